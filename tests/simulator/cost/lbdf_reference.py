"""A reference implementation of the LBDF cost model in numpy (docs/cost-model.md 4.1, 5).

This is the implementation `simulator.cost.lbdf` had before its schedule moved into compiled
kernels (`simulator.cost._lbdf_kernels`, issue [speed]), kept verbatim (with its cycle model,
formerly `simulator.cost.cycles.lbdf_cycles`) so that `test_lbdf_fast.py` can hold the
compiled path to the same figures, bit for bit, on random groups, and so that the tests of the
schedule's invariants (`test_lbdf_pixel_schedule.py`) can read its intermediate arrays. The
library never imports it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost.rows import RowDeps, image_row, row_deps, slot_window
from simulator.cost.traffic import boundary, buffer_traffic_elems
from simulator.cost.types import Failure, GroupCost, timing
from simulator.hw import LBDF_BUFFERS, HardwareConfigError
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph, Op, OpKind

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["RowOrder", "group_cost", "lbdf_cycles", "line_buffer_elems", "peak_row_bytes",
           "row_order"]


def group_cost(graph: ComputeGraph, ops: Sequence[int], hw: HardwareConfig) -> GroupCost:
    """F_beta, F_D, cycles and energy of `ops` run as one LBDF group on `hw`."""
    ops = tuple(sorted(ops))
    b = boundary(graph, ops)
    weight_bytes = b.weight_elems * hw.dtype_bytes
    line, order = _line_buffer(graph, ops, hw.lbdf_buffer, with_order=True,
                               room=hw.buffer_bytes // hw.dtype_bytes - b.weight_elems)
    need = weight_bytes + line * hw.dtype_bytes
    dram_act, dram_w, dram_write = (b.read_elems * hw.dtype_bytes, weight_bytes,
                                    b.write_elems * hw.dtype_bytes)
    macs = sum(graph[o].macs for o in ops)
    dram = dram_act + dram_w + dram_write
    buf = buffer_traffic_elems(graph, ops) * hw.dtype_bytes + dram
    failure, reason = _failure(weight_bytes, need, hw)
    return GroupCost(
        scheme=Scheme.LBDF, ops=ops, buffer_bytes=need, weight_buffer_bytes=weight_bytes,
        dram_act_read=dram_act, dram_weight_read=dram_w, dram_write=dram_write, macs=macs,
        fits=need <= hw.buffer_bytes, reason=reason,
        timing=timing(dram, buf, macs, hw,
                      lbdf_cycles(graph, ops, order, hw) if order is not None else 0),
        failure=failure,
    )


def _failure(weight_bytes: int, need: int, hw: HardwareConfig) -> tuple[Failure | None, str]:
    if weight_bytes > hw.buffer_bytes:
        return Failure.WEIGHTS_OVER_BUFFER, (f"weights alone ({weight_bytes:,} B) exceed the "
                                             f"buffer ({hw.buffer_bytes:,} B)")
    if need > hw.buffer_bytes:
        return Failure.OVER_BUFFER, f"needs {need:,} B > buffer {hw.buffer_bytes:,} B"
    return None, ""


@dataclass(frozen=True)
class RowOrder:
    """The LBDF schedule of a group as a sequence of row events (what the simulator runs).

    Attributes:
        refs: Tensors of the group: the entering ones (references), then the group's ops.
        heights: Rows of each tensor.
        n_entering: How many of `refs` (the first ones) enter the group from DRAM.
        tensor: For each event in schedule order, the index into `refs` of the tensor whose
            row is produced (an entering row arriving, or an op computing a row).
        row: For each event, that row.
        block: Pixel granularity, wavefront schedule: for each event, its block
            (non-decreasing), the rows streamed together pixel by pixel; None when the group
            streams whole rows.
        levels: Pixel granularity, wavefront schedule: per block, the activation elements its
            line buffers hold (at most; their maximum is `line_buffer_elems`); None when the
            group streams whole rows (at pixel granularity too, where that holds no more).
    """

    refs: tuple[int, ...]
    heights: tuple[int, ...]
    n_entering: int
    tensor: np.ndarray
    row: np.ndarray
    block: np.ndarray | None = None
    levels: np.ndarray | None = None


def row_order(graph: ComputeGraph, ops: Sequence[int], granularity: str = "row") -> RowOrder:
    """The order in which an LBDF group streams and computes rows.

    With ``granularity="pixel"`` the events are ordered block by block (each block's rows in
    row order), and the block of each event and each block's line-buffer level come with them,
    unless the whole-row schedule holds no more (narrow maps deep in a group): then it is
    returned, as for ``"row"``.
    """
    order = _line_buffer(graph, ops, granularity, with_order=True)[1]
    assert order is not None
    return order


def _line_buffer(graph: ComputeGraph, ops: Sequence[int], granularity: str,
                 with_order: bool = False, room: int | None = None,
                 ) -> tuple[int, RowOrder | None]:
    """`line_buffer_elems` and, with `with_order`, `row_order`, from one schedule. With `room`
    (the elements the buffer leaves the line buffers) the order is made only when they fit
    it: a group that does not fit is not timed."""
    ops = tuple(sorted(ops))
    if _granularity(granularity) == "pixel":
        px = _PixelSchedule(graph, ops, row_deps(graph))
        rows, levels = px.peaks()
        line = min(rows, int(levels.max()))
        if not with_order or (room is not None and line > room):
            return line, None
        if levels.max() < rows:  # else whole rows one after the other hold no more
            order = np.lexsort((px.rank, px.row_block))
            tensor = np.repeat(np.arange(len(px.heights)), px.heights)[order]
            row = (np.arange(len(order)) - np.repeat(px.offsets[:-1], px.heights))[order]
            return line, RowOrder(tuple(px.refs), tuple(px.heights), len(px.entering), tensor,
                                  row, px.row_block[order], levels)
        sched = _RowSchedule(graph, ops, row_deps(graph))
    else:
        sched = _RowSchedule(graph, ops, row_deps(graph))
        line = sched.peak()
        if not with_order or (room is not None and line > room):
            return line, None
    rank = sched._ranks(*sched._keys())
    order = np.argsort(rank)
    tensor = np.repeat(np.arange(len(sched.heights)), sched.heights)[order]
    row = (np.arange(len(rank)) - np.repeat(sched.offsets[:-1], sched.heights))[order]
    return line, RowOrder(tuple(sched.refs), tuple(sched.heights), len(sched.entering),
                          tensor, row)


def peak_row_bytes(graph: ComputeGraph, ops: Sequence[int]) -> int:
    """Peak elements of live activation rows when `ops` run as one LBDF group (whole rows)."""
    return _RowSchedule(graph, tuple(sorted(ops)), row_deps(graph)).peak()


def line_buffer_elems(graph: ComputeGraph, ops: Sequence[int], granularity: str = "pixel") -> int:
    """Peak activation elements the line buffers of an LBDF group hold (F_beta less weights).

    Args:
        graph: The workload.
        ops: The group.
        granularity: ``"pixel"`` (the paper's line buffer) or ``"row"`` (whole rows).

    Raises:
        HardwareConfigError: An unknown granularity.
    """
    ops = tuple(sorted(ops))
    if _granularity(granularity) == "row":
        return _RowSchedule(graph, ops, row_deps(graph)).peak()
    rows, levels = _PixelSchedule(graph, ops, row_deps(graph)).peaks()
    return min(rows, int(levels.max()))


def _granularity(value: str) -> str:
    if value not in LBDF_BUFFERS:
        raise HardwareConfigError(f"lbdf_buffer = {value!r}: must be 'pixel' or 'row'")
    return value


def _accumulates(op: Op) -> bool:
    """A global pooling folds each input row into its output as it arrives."""
    return op.kind is OpKind.GLOBAL_POOL


def _blocks(op: Op, deps: RowDeps) -> bool:
    """An op whose single output row needs a multi-row input: what follows starts an epoch."""
    return deps.whole_from_rows(op.id)


class _RowSchedule:
    """The row schedule of one group: tensors are the entering ones, then the group's ops.

    Every row production is an event with key (time, epoch, pace, tensor index), ordered
    lexicographically:
      * time: when the row can be computed, as the fraction of its entering tensor streamed
        (entering row j of a tensor of height H arrives at j / H);
      * epoch: how many whole-input ops (global pooling, flatten, ...) precede it; rows
        released together by such an op (the squeeze-and-excitation multiply) share a time;
      * pace: the row's own fraction r / H within its time and epoch, so that released rows
        stream again, interleaved with their consumers, instead of arriving as a burst;
      * tensor index: producers before consumers.
    Each component is the maximum over the rows the event depends on, so every event follows
    its dependencies.
    """

    def __init__(self, graph: ComputeGraph, ops: tuple[int, ...], deps: RowDeps) -> None:
        self.graph, self.ops, self.deps = graph, ops, deps
        self.entering = graph.inputs_of(ops)
        self.refs = (*self.entering, *ops)
        self.index = {ref: k for k, ref in enumerate(self.refs)}
        self.heights = [deps.height_of[r] for r in self.refs]
        self.offsets = np.concatenate(([0], np.cumsum(self.heights))).astype(np.int64)

    def peak(self) -> int:
        """Peak live activation elements over the schedule."""
        rank = self._ranks(*self._keys())
        start, end = self._lifetimes(rank)
        sizes = np.repeat([self.deps.row_elems_of[r] for r in self.refs],
                          self.heights).astype(np.int64)
        diff = np.zeros(len(rank) + 1, dtype=np.int64)
        np.add.at(diff, start, sizes)
        np.add.at(diff, end + 1, -sizes)
        return int(np.cumsum(diff).max())

    def _keys(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per tensor, the (time, epoch) key of each row as one float, and its pace.

        time * 2**40 + epoch orders like (time, epoch): times are fractions j/H, so distinct
        times differ by at least 2**40 / H**2 key units (65,536 for H = 4,096), more than
        any count of epochs, while the 52-bit mantissa keeps equal times equal.
        """
        first = _preloaded(self.graph, self.ops, self.deps, self.entering)
        keys = [(self.deps.frac[r] - (r in first)) * _TIME_SCALE for r in self.entering]
        paces = [np.zeros(h) for h in self.heights[:len(self.entering)]]
        for o in self.ops:
            k, p = self._op_keys(o, keys, paces)
            keys.append(k)
            paces.append(p)
        return keys, paces

    def _op_keys(self, o: int, keys: list, paces: list) -> tuple[np.ndarray, np.ndarray]:
        op, deps = self.graph[o], self.deps
        srcs = [(keys[self.index[ref]], paces[self.index[ref]]) if same else
                (keys[self.index[ref]][hi], paces[self.index[ref]][hi])
                for ref, hi, same in zip(op.inputs, deps.hi[o], deps.identity[o], strict=True)]
        key = srcs[0][0] if len(srcs) == 1 else np.maximum.reduce([k for k, _ in srcs])
        if _blocks(op, deps):
            return key + 1.0, np.zeros(len(key))
        pace = deps.frac[o]
        for k, p in srcs:
            pace = np.maximum(pace, np.where(k == key, p, 0.0)) if len(srcs) > 1 \
                else np.maximum(pace, p)
        return key, pace

    def _ranks(self, keys: list, paces: list) -> np.ndarray:
        """Position of every row production in the schedule's order."""
        tensor = np.repeat(np.arange(len(self.heights)), self.heights)
        order = np.lexsort((tensor, np.concatenate(paces), np.concatenate(keys)))
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return rank

    def _lifetimes(self, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First and last schedule position at which each row is in the buffer."""
        start = rank.copy()
        for k in range(len(self.entering)):  # one row in flight ahead of use
            start[self.offsets[k] + 1:self.offsets[k + 1]] = \
                rank[self.offsets[k]:self.offsets[k + 1] - 1]
        end = rank.copy()
        last_event = len(rank) - 1
        for o in self.graph.outputs_of(self.ops):  # one row written back at a time:
            seg = slice(self.offsets[self.index[o]], self.offsets[self.index[o] + 1])
            rows = rank[seg]  # a leaving row is held until its successor is produced
            end[seg] = np.append(rows[1:] - 1, last_event)
        for o in self.ops:
            self._release_inputs(o, rank, start, end)
        return start, np.maximum(end, start)

    def _release_inputs(self, o: int, rank: np.ndarray, start: np.ndarray,
                        end: np.ndarray) -> None:
        c0 = self.offsets[self.index[o]]
        accumulates = _accumulates(self.graph[o])
        for ref, last in zip(self.graph[o].inputs, self.deps.last[o], strict=True):
            k = self.index.get(ref)
            if k is None:
                continue
            if accumulates:  # each input row is folded in as it arrives
                start[c0] = min(start[c0], rank[self.offsets[k]])
                continue
            seg = slice(self.offsets[k], self.offsets[k + 1])
            np.maximum(end[seg], rank[c0 + last], out=end[seg])


_TIME_SCALE = float(2**40)


def _preloaded(graph: ComputeGraph, ops: tuple[int, ...], deps: RowDeps,
               entering: Sequence[int]) -> frozenset[int]:
    """Entering tensors of several rows that the group reads only whole, beside a streamed
    input of the same op (the keys and values of an attention's products): they arrive first,
    in the time before 0, so that the streamed operand is not held meanwhile."""
    if not entering:
        return frozenset()
    cands = {r for r in entering if deps.height_of[r] > 1}
    if not cands:
        return frozenset()
    whole: dict[int, bool] = {}
    beside: set[int] = set()
    for o in ops:
        op = graph[o]
        reads = [(r, deps.height_of[r] > 1 and int(lo[-1]) == 0
                  and int(hi[0]) == deps.height_of[r] - 1)
                 for r, lo, hi in zip(op.inputs, deps.lo[o], deps.hi[o], strict=True)]
        streams = any(not w and deps.height_of[r] > 1 for r, w in reads)
        for r, w in reads:
            if r in cands:
                whole[r] = whole.get(r, True) and w
                if streams and w:
                    beside.add(r)
    return frozenset(r for r in beside if whole[r])


# --- pixel granularity ------------------------------------------------------------------------

def _width(shape: tuple[int, ...], axis: int | None) -> int:
    """Pixels of one row: W of an N,C,H,W tensor streamed by H, else 1 (a token row, a
    vector: one pixel)."""
    return int(shape[3]) if image_row(shape, axis) else 1


class _ColumnDeps:
    """The column analogue of `simulator.cost.rows.RowDeps`: for op `o` and input slot `i`,
    output column `c` reads input columns ``lo[o][i][c]..hi[o][i][c]`` (clipped), with the
    rules of docs/cost-model.md section 3 applied to widths and the left padding. `info` holds,
    per op, what `_PixelSchedule` reads of it (its hot path), and `entering` the rows and
    columns of a tensor entering a group."""

    def __init__(self, graph: ComputeGraph) -> None:
        self.rows = rows = row_deps(graph)
        axes = rows.axes
        self.width_of = {op.id: _width(op.output_shape, axes.of[op.id]) for op in graph}
        self.width_of.update({-(k + 1): _width(s, axes.of[-(k + 1)])
                              for k, s in enumerate(graph.input_shapes)})
        self.lo: list[tuple[np.ndarray, ...]] = []
        self.hi: list[tuple[np.ndarray, ...]] = []
        self.identity: list[tuple[bool, ...]] = []
        self.own = [np.arange(self.width_of[op.id]) / self.width_of[op.id] for op in graph]
        self.blocks = [_blocks(op, rows) for op in graph]
        self.folds = [_accumulates(op) for op in graph]
        for op in graph:
            pairs = [slot_window(op, k, axis=1, axes=axes) for k in range(len(op.inputs))]
            self.lo.append(tuple(p[0] for p in pairs))
            self.hi.append(tuple(p[1] for p in pairs))
            self.identity.append(tuple(
                len(hi) == self.width_of[r] and bool((hi == np.arange(len(hi))).all())
                and bool((lo == hi).all())
                for (lo, hi), r in zip(pairs, op.inputs, strict=True)))
        self.same = [tuple(a and b for a, b in zip(rows.identity[op.id], self.identity[op.id],
                                                   strict=True)) for op in graph]
        self.info = [self._info(op) for op in graph]
        self.successors = [frozenset(graph.successors(op.id)) for op in graph]
        self.inputs = [op.inputs for op in graph]
        self._entering: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}

    def _info(self, op: Op) -> tuple:
        """(slots, row fractions, column fractions, blocks, folds) of an op, where a slot is
        (input, row identity, row hi, column identity, column hi, the reader row of each input
        row as `_PixelSchedule.peaks` takes it, read plainly)."""
        o, rows, single = op.id, self.rows, len(op.inputs) == 1
        slots = tuple(
            (ref, rows.identity[o][i], rows.hi[o][i], self.identity[o][i], self.hi[o][i],
             np.arange(len(last)) if rows.identity[o][i] else last,
             self.same[o][i] and single and not self.blocks[o])
            for i, (ref, last) in enumerate(zip(op.inputs, rows.last[o], strict=True)))
        return slots, rows.frac[o], self.own[o], self.blocks[o], self.folds[o]

    def entering(self, ref: int, h_ref: int) -> tuple[np.ndarray, ...]:
        """Keys, paces and steps of the rows of entering tensor `ref`, phases and orders of its
        columns, in a group whose tallest entering tensor has `h_ref` rows (cached: read only).
        """
        got = self._entering.get((ref, h_ref))
        if got is None:
            h, w = self.rows.height_of[ref], self.width_of[ref]
            got = (self.rows.frac[ref] * _TIME_SCALE, np.zeros(h), np.zeros(h, dtype=np.int64),
                   np.arange(w, dtype=np.int64) * h_ref / (w * h), np.zeros(w))
            self._entering[(ref, h_ref)] = got
        return got


@lru_cache(maxsize=64)
def _column_deps(graph: ComputeGraph) -> _ColumnDeps:
    return _ColumnDeps(graph)


class _PixelSchedule(_RowSchedule):
    """The row schedule of a group and, with it, its pixel line buffers (docs/cost-model.md
    4.1, "Pixel granularity").

    Rows are the events of the row schedule (same keys), grouped into *blocks*: the rows of one
    (time, epoch) that belong to the same wavefront step, where a row's step is the largest
    step among the rows it waits for in its own (time, epoch), and one more than its own
    predecessor's if that shares the (time, epoch) (rows released together are computed one
    after the other). A block streams its rows pixel by pixel together: column c of a tensor
    comes at the phase `phase[t][c]` (a fraction of the row period: the phase of the last
    column its window reads of every row it waits for) and, among columns of one phase, in
    `order[t][c]` (the larger of its own fraction of its row and its inputs').

    A row lives from the block that produces it to the block of the last row reading it. In
    block b a tensor spans U rows; if it produces one of them and its oldest is read for the
    last time in b (*steady*), a pixel wavefront holds only U - 1 rows plus the pixels from
    its slowest reader's window to its producer's last pixel (`_ColumnsOf.steady`); otherwise U
    rows. A block needs the sum of these, or, with a single stream height, the larger of its
    rows at its start and at its end plus how far each tensor strays from the line between
    them (a tensor growing while another is consumed trades rows). Plus one pixel in flight
    per entering tensor and one being written per leaving tensor.

    The schedule is built in one pass over the ops, which also gathers every read (the input
    rows and the reader's row of each) so that `peaks` evaluates both schedules' lifetimes at
    once.
    """

    def __init__(self, graph: ComputeGraph, ops: tuple[int, ...], deps: RowDeps) -> None:
        self.graph, self.ops, self.deps = graph, ops, deps
        cols = self.cols = _column_deps(graph)
        members = set(ops)
        if ops and 0 <= ops[0] and ops[-1] < len(graph):  # (sorted: else inputs_of raises)
            entering = tuple(sorted({r for o in ops for r in cols.inputs[o]} - members))
        else:
            entering = graph.inputs_of(ops)
        self.entering = entering
        self.refs = refs = (*entering, *ops)
        self.index = index = {ref: k for k, ref in enumerate(refs)}
        self.heights = heights = [deps.height_of[r] for r in refs]
        self.offs = offs = [0, *accumulate(heights)]
        self.offsets = np.array(offs, dtype=np.int64)
        n_in = len(entering)
        self.widths = [cols.width_of[r] for r in refs]
        self.one_height = len({h for h in heights[:n_in] if h > 1}) <= 1
        h_ref = max(heights[:n_in], default=1)
        keys: list[np.ndarray] = []
        paces: list[np.ndarray] = []
        steps: list[np.ndarray] = []
        phase: list[np.ndarray] = []
        order: list[np.ndarray] = []
        first = _preloaded(graph, ops, deps, entering)
        for ref in entering:
            key, pace, step, x, p = cols.entering(ref, h_ref)
            keys.append(key - _TIME_SCALE if ref in first else key)
            paces.append(pace)
            steps.append(step)
            phase.append(x)
            order.append(p)
        self.keys, self.paces, self.steps, self.phase, self.order = keys, paces, steps, phase, order
        out, successors = graph.output_set, cols.successors
        readers = [False] * len(refs)
        self.leaving: list[int] = []  # tensors written to DRAM (all ops of the group)
        self.plain: list[int] = []  # tensors read column by column by an op of one input
        self.reads: list[tuple[int, int, int]] = []  # (tensor, op, slot): any other read
        self.folded: list[tuple[int, int]] = []  # (first row of a fold, of the tensor it folds)
        # per non-folding read: the reader's row (less its first) of each row read, the rows
        # read, the first of them less the rows of the reads before, the reader's first row
        self.read_row: list[np.ndarray] = []
        self.read_len: list[int] = []
        self.read_shift: list[int] = []
        self.read_first: list[int] = []
        read_row, read_len = self.read_row.append, self.read_len.append
        read_shift, read_first = self.read_shift.append, self.read_first.append
        n_read = 0
        for j, o in enumerate(ops, n_in):
            slots, frac, own, blocks, folds = cols.info[o]
            c0 = offs[j]
            if o in out or not successors[o] <= members:
                self.leaving.append(j)
            for i, slot in enumerate(slots):
                k = index[slot[0]]
                readers[k] = True
                if folds:  # each input row is folded in as it arrives: a running sum held
                    self.folded.append((c0, offs[k]))  # from input row 0 on
                    continue
                read_row(slot[5])
                read_len(heights[k])
                read_shift(offs[k] - n_read)
                read_first(c0)
                n_read += heights[k]
                if slot[6]:
                    self.plain.append(k)
                else:  # (a blocking op's columns read its inputs' columns too)
                    self.reads.append((k, o, i))
            if len(slots) == 1:
                ref, row_id, hi, col_id, col_hi, _, _ = slots[0]
                k = index[ref]
                if row_id:  # its input's rows one to one: their keys, steps and paces (an
                    keys.append(keys[k])  # op's paces are at least its rows' fractions,
                    steps.append(steps[k])  # these rows' too; an entering tensor's are 0)
                    paces.append(paces[k] if k >= n_in else frac)
                else:  # (a blocking op never reads its input's rows one to one)
                    key = keys[k][hi]
                    if blocks:
                        self._epoch(o, key)
                        continue
                    keys.append(key)
                    paces.append(np.maximum(frac, paces[k][hi]))
                    steps.append(_wavefront_steps(key, steps[k][hi]))
                if col_id:  # the phases and orders of a row, re-indexed (orders likewise at
                    phase.append(phase[k])  # least the columns' fractions, 0 entering)
                    order.append(order[k] if k >= n_in else own)
                else:
                    phase.append(phase[k][col_hi])
                    order.append(np.maximum(own, order[k][col_hi]))
                continue
            picks = [(index[s[0]], s[1], s[2]) for s in slots]
            ks = [keys[k] if row_id else keys[k][hi] for k, row_id, hi in picks]
            key = ks[0]
            for kk in ks[1:]:
                key = np.maximum(key, kk)
            if blocks:
                self._epoch(o, key)
                continue
            pace, step, bound = frac.copy(), np.zeros(len(key), dtype=np.int64), []
            for (k, row_id, hi), kk, slot in zip(picks, ks, slots, strict=True):
                eq = kk == key  # the inputs it waits for: their paces and steps
                pp, ss = (paces[k], steps[k]) if row_id else (paces[k][hi], steps[k][hi])
                np.maximum(pace, pp, out=pace, where=eq)
                np.maximum(step, ss, out=step, where=eq)
                if eq.any():
                    bound.append((k, slot))
            keys.append(key)
            paces.append(pace)
            steps.append(_wavefront_steps(key, step))
            x, p = self._columns(own, bound)
            phase.append(x)
            order.append(p)
        self.readers = readers
        self.width_array = np.array(self.widths, dtype=np.int64)
        self.tensor = np.arange(len(refs)).repeat(heights)
        self.rank, self.row_block, self.n_blocks = self._order()

    def _epoch(self, o: int, key: np.ndarray) -> None:
        """A blocking op starts a new epoch: its rows wait for nothing of this one."""
        w = self.cols.width_of[o]
        self.keys.append(key + 1.0)
        self.paces.append(np.zeros(len(key)))
        self.steps.append(np.zeros(len(key), dtype=np.int64))
        self.phase.append(np.zeros(w))
        self.order.append(self.cols.own[o])

    def _columns(self, own: np.ndarray, bound: list) -> tuple[np.ndarray, np.ndarray]:
        """Phase and order of each column of an op of several inputs (`own`: its columns'
        fractions of their row; `bound`: the (tensor, slot) of the inputs it waits for):
        column c waits for the last column its window reads of every input it waits for (the
        latest of their phases); among columns of one phase, the one whose own fraction of its
        row (or its inputs') is smaller goes first. Both are carried forward along the row (a
        row is produced in raster order)."""
        phase, order = self.phase, self.order
        srcs = [(phase[k], order[k]) if slot[3] else (phase[k][slot[4]], order[k][slot[4]])
                for k, slot in bound]
        if len(srcs) == 1:  # monotone already: the phases and orders of a row, re-indexed
            return srcs[0][0], np.maximum(own, srcs[0][1])
        x = srcs[0][0]  # (every tensor's phases rise along its row, and so does their maximum)
        for a, _ in srcs[1:]:
            x = np.maximum(x, a)
        p = own
        for a, b in srcs:
            p = np.maximum(p, b * (a == x))
        new = x[1:] != x[:-1]
        if (new | (p[1:] >= p[:-1])).all():
            return x, p
        # the running maximum of the order within each run of one phase (exact: on ranks)
        values, rank = np.unique(p, return_inverse=True)
        run = np.concatenate(([0], np.cumsum(new)))
        top = np.maximum.accumulate(run * len(values) + rank) - run * len(values)
        return x, values[top]

    def _order(self) -> tuple[np.ndarray, np.ndarray, int]:
        """Rank of every row in the row schedule's order (rows of all tensors concatenated, so
        that a stable sort by (key, pace) ends with the tensor index, as `_RowSchedule._ranks`),
        its block (blocks in (key, step) order), and the number of blocks."""
        key, step = np.concatenate(self.keys), np.concatenate(self.steps)
        order = np.lexsort((np.concatenate(self.paces), key))
        n = len(order)
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        order = np.lexsort((step, key))
        k, s = key[order], step[order]
        new = np.empty(n, dtype=np.int64)  # 1 where a block starts
        new[0] = 1
        np.not_equal(k[1:], k[:-1], out=new[1:])
        new[1:] |= s[1:] != s[:-1]
        np.add.accumulate(new, out=new)
        block = np.empty(n, dtype=np.int64)
        block[order] = new - 1
        return rank, block, int(new[-1])

    def peaks(self) -> tuple[int, np.ndarray]:
        """The peak of the row schedule (whole rows, as `_RowSchedule.peak`) and, per block,
        the activation elements the pixel line buffers hold (at most)."""
        rank, rb = self.rank, self.row_block
        end, bend = rank.copy(), rb.copy()
        if self.read_row:  # a row lives to its last reader's row (rank / block)
            shift = np.array([self.read_shift, self.read_first]).repeat(self.read_len, axis=1)
            rows = np.arange(shift.shape[1])
            rows += shift[0]
            at = np.concatenate(self.read_row)
            at += shift[1]
            np.maximum.at(end, rows, rank[at])
            np.maximum.at(bend, rows, rb[at])
        start, bstart = rank.copy(), rb.copy()
        for c0, first in self.folded:
            start[c0] = min(start[c0], rank[first])
            bstart[c0] = min(bstart[c0], rb[first])
        self.row_elems = np.array([self.deps.row_elems_of[r] for r in self.refs],
                                  dtype=np.int64)
        self.sizes = self.row_elems[self.tensor]
        return self._row_peak(start, end), self._levels(bstart, bend)

    def _row_peak(self, start: np.ndarray, end: np.ndarray) -> int:
        """`_RowSchedule.peak` from the lifetimes found by `peaks`."""
        rank, offs, n = self.rank, self.offs, len(self.rank)
        for k in range(len(self.entering)):  # one row in flight ahead of use
            start[offs[k] + 1:offs[k + 1]] = rank[offs[k]:offs[k + 1] - 1]
        for k in self.leaving:  # a leaving row is held until its successor is produced, the
            a, b = offs[k], offs[k + 1]  # last one until the group ends
            np.maximum(end[a:b - 1], rank[a + 1:b] - 1, out=end[a:b - 1])
            end[b - 1] = n - 1
        end = np.maximum(end, start)
        diff = np.bincount(start, self.sizes, minlength=n + 1) - \
            np.bincount(end + 1, self.sizes, minlength=n + 1)
        return int(np.add.accumulate(diff).max())

    def _levels(self, bstart: np.ndarray, bend: np.ndarray) -> np.ndarray:
        """Per block: what the pixel line buffers hold (at most) while the block streams."""
        nb, rb, offsets, tensor = self.n_blocks, self.row_block, self.offsets, self.tensor
        cols_of = _ColumnsOf(self, self.plain, self.reads)
        widths, offs = self.width_array, self.offs
        pixel = self.row_elems // widths
        # a lone tensor (leaving, read by no op of the group) holds only its newest pixel, being
        # written: its rows are not kept
        lone = [k for k in self.leaving if not self.readers[k]]
        r, px = self.sizes, pixel[tensor]  # per row
        keep = np.ones(len(r), dtype=bool)
        for k in lone:
            keep[offs[k]:offs[k + 1]] = False
        r_keep = r * keep
        born = np.bincount(bstart, r_keep, minlength=nb + 1)
        live = np.add.accumulate(born - np.bincount(bend + 1, r_keep, minlength=nb + 1))[:nb]
        # per tensor and block: the oldest live row, and whether the block reads it last
        base = tensor * (nb + 1)  # tensor-major block numbers
        made, gone = base + bstart, base + bend  # non-decreasing: made
        reach = np.maximum.accumulate(gone)  # non-decreasing
        oldest = np.minimum(reach.searchsorted(made), len(rb) - 1)
        steady = keep & (bend[oldest] == bstart)  # the block making row j reads its tensor's
        steady_dev = np.minimum(cols_of.steady(), widths)  # oldest row out
        save = (r - steady_dev[tensor] * px) * steady
        level = live - np.bincount(bstart, save, minlength=nb + 1)[:nb]
        extra = self._pixels_in_transit(nb, bstart, bend, lone, pixel)
        total = level + extra
        growing = keep & ~steady
        at_peak = total >= total.max()
        if not self.one_height or not at_peak[bstart[growing]].any():
            return total.astype(np.int64)  # nothing grows at the peak: no trade
        # rows read out: the oldest live row of its tensor at the block of its last reader
        prior = np.concatenate(([-1], reach[:-1])) - base
        prior[offsets[:-1]] = -1
        read_out = keep & (prior < bend)
        at = np.minimum(made.searchsorted(gone), len(rb) - 1)  # is a row of the tensor born
        shrinking = read_out & ~(keep[at] & (made[at] == gone))  # where it is read out?
        trade = (np.bincount(bstart[growing], minlength=nb)
                 * np.bincount(bend[shrinking], minlength=nb)) > 0
        if not trade[at_peak].any():
            return total.astype(np.int64)  # no tensor grows while another shrinks at the peak
        # a tensor growing while another shrinks: the larger of the rows at the block's start
        # and end, plus how far each tensor's pixels stray from the line between them. The
        # block's progress is the phase, or, in a block whose rows all have one phase (released
        # together, e.g. after a global pooling), the order
        by = cols_of.single_phase_blocks(nb, tensor).astype(np.intp)  # 0: phase, 1: order
        lag_min, shrink = cols_of.deviations()  # per progress measure and tensor
        grow_dev = np.minimum(np.maximum(1 - lag_min, 0), widths)
        shrink_dev = np.minimum(np.maximum(np.ceil(shrink - 1e-9), 0), widths)
        dev = (np.bincount(bstart, np.where(steady, steady_dev[tensor], 0) * px
                           + np.where(growing, grow_dev[by[bstart], tensor], 0) * px,
                           minlength=nb + 1)
               + np.bincount(bend, np.where(shrinking, shrink_dev[by[bend], tensor], 0) * px,
                             minlength=nb + 1))[:nb]
        before = live - born[:nb]
        after = live - np.bincount(bend, np.where(read_out, r, 0), minlength=nb + 1)[:nb]
        linear = np.maximum(before, after) + dev
        return (np.minimum(level, linear) + extra).astype(np.int64)

    def _pixels_in_transit(self, nb: int, bstart: np.ndarray, bend: np.ndarray,
                           lone: list[int], pixel: np.ndarray) -> np.ndarray:
        """Per block: the pixel in flight of each entering tensor of more than one pixel (from
        its first row's block to its last's), and the newest pixel of each leaving tensor
        while none of its rows is live (its DRAM write in flight; the last one until the group
        ends)."""
        offs, n_in, nt = self.offs, len(self.entering), len(self.refs)
        at = bstart[offs[:-1] + [offs[k + 1] - 1 for k in range(n_in)]].tolist()
        first, last, pixel = at[:nt], at[nt:], pixel.tolist()  # (blocks of first / last rows)
        blocks: list[int] = []  # where a pixel starts / stops being held, and its elements
        elems: list[int] = []
        for k in range(n_in):
            if self.heights[k] * self.widths[k] > 1:
                blocks += (first[k], last[k] + 1)
                elems += (pixel[k], -pixel[k])
        for k in lone:
            blocks += (first[k], nb)
            elems += (pixel[k], -pixel[k])
        extra = np.add.accumulate(np.bincount(np.array(blocks, dtype=np.int64), elems,
                                              minlength=nb + 1))[:nb]
        for k in self.leaving:  # leaving tensors some op of the group reads too
            if k in lone:
                continue
            a, b, f = offs[k], offs[k + 1], first[k]
            rows = np.add.accumulate(np.bincount(bstart[a:b], minlength=nb + 1)
                                     - np.bincount(bend[a:b] + 1, minlength=nb + 1))[f:nb]
            extra[f:] += (rows == 0) * pixel[k]
        return extra


class _ColumnsOf:
    """The reads of a `_PixelSchedule`, evaluated at once: the columns of every tensor laid
    end to end, phases offset per tensor (so they increase across tensors), with the run of
    equal phase of each column and run + order (which increases too).

    For tensor k read by op o, when o computes column c the producer of k has produced every
    column whose (phase, order) comes first; k's interval then reaches from o's window's first
    column to the last of those (`steady`), and o's window's first column trails o's phase (or
    order) by some columns (`deviations`, with how far each tensor runs ahead). A *plain* reader,
    which reads column c of k alone for its column c (a 1x1 or elementwise op of one input), has
    k's phases and orders: k's columns of equal phase and order come first (`steady` is the
    longest such run) and its trail is k's own lag.
    """

    def __init__(self, px: _PixelSchedule, plain: list[int],
                 reads: list[tuple[int, int, int]]) -> None:
        self.px, self.plain, self.reads = px, plain, reads
        self.widths = widths = px.width_array
        self.start_of = [0, *accumulate(px.widths)]
        self.starts = np.array(self.start_of)
        self.tensor_of = np.arange(len(widths)).repeat(widths)
        self.span = 2 * (max(px.heights[:len(px.entering)], default=1) + 1)  # (as a float too)
        self.raw = np.concatenate(px.phase)
        self.phase = self.raw + self.tensor_of * self.span
        self.run = np.empty(len(self.phase), dtype=np.int64)
        self.run[0] = 0
        np.add.accumulate(self.phase[1:] != self.phase[:-1], dtype=np.int64, out=self.run[1:])
        self.order = np.concatenate(px.order)
        self.key = self.run + self.order
        self._general: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def steady(self) -> np.ndarray:
        """Per tensor: the most pixels its interval spans beyond whole rows (at least 1)."""
        steady = np.zeros(len(self.widths), dtype=np.int64)
        if self.plain:  # runs of one key never span two tensors (their phases differ)
            run = np.empty(len(self.key), dtype=np.int64)
            run[0] = 0
            np.add.accumulate(self.key[1:] != self.key[:-1], dtype=np.int64, out=run[1:])
            ks = np.array(self.plain)
            steady[ks] = np.maximum.reduceat(np.bincount(run), run[self.starts[:-1]])[ks]
        if self.reads:
            k, produced, lo = self._evaluate()
            np.maximum.at(steady, k, produced - lo)
        return np.maximum(steady, 1)

    def deviations(self) -> tuple[np.ndarray, np.ndarray]:
        """Per progress measure (row 0: the phase, row 1: the order) and tensor: minus how many
        columns it runs ahead of the progress, at most, and how many columns its readers'
        windows trail the progress, at most."""
        starts = self.starts[:-1]
        column = np.arange(len(self.raw)) - self.starts[self.tensor_of]
        lag = self.widths[self.tensor_of] * np.stack((self.raw, self.order)) - column
        lag_min = np.ceil(np.minimum.reduceat(lag, starts, axis=1) - 1e-9)
        shrink = np.zeros((2, len(self.widths)))
        if self.plain:
            ks = np.array(self.plain)
            np.maximum.at(shrink, (slice(None), ks),
                          np.maximum.reduceat(lag, starts, axis=1)[:, ks])
        if self.reads:
            k, _, lo = self._evaluate()
            xo = np.stack((self._reader_phase, self._reader_order))
            np.maximum.at(shrink, (slice(None), k), self._reader_width * xo - lo)
        return lag_min, shrink

    def single_phase_blocks(self, nb: int, tensor: np.ndarray) -> np.ndarray:
        """Blocks whose rows are all of tensors of one and the same phase in every column."""
        lowest = np.minimum.reduceat(self.raw, self.starts[:-1])
        flat = lowest == np.maximum.reduceat(self.raw, self.starts[:-1])
        block = self.px.row_block
        mixed = np.bincount(block[~flat[tensor]], minlength=nb) > 0
        of_row = lowest[tensor]
        low = np.empty(nb)
        low[block] = of_row  # (every block has a row)
        high = low.copy()
        np.minimum.at(low, block, of_row)
        np.maximum.at(high, block, of_row)
        return ~mixed & (low == high)

    def _evaluate(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the columns of every general read: its tensor, how many columns of it are
        produced by then, and the first column the read's window reads."""
        if self._general is None:
            px, start, span = self.px, self.start_of, self.span
            idx = [px.index[o] for _, o, _ in self.reads]
            ks = [k for k, _, _ in self.reads]
            k, offset, last, first_col, self._reader_width = np.array(
                [ks, [k * span for k in ks], [start[k + 1] - 1 for k in ks],
                 [start[k] for k in ks], [px.widths[k] for k in ks]]
            ).repeat([px.widths[j] for j in idx], axis=1)
            self._reader_phase = np.concatenate([px.phase[j] for j in idx])
            self._reader_order = np.concatenate([px.order[j] for j in idx])
            at_x = self._reader_phase + offset
            first = self.phase.searchsorted(at_x, side="left")
            at = np.minimum(first, last)
            later = self.key.searchsorted(self.run[at] + self._reader_order, side="right")
            produced = np.where(self.phase[at] == at_x, later, first) - first_col
            lo = np.concatenate([px.cols.lo[o][i] for _, o, i in self.reads])
            self._general = k, produced, lo
        return self._general


def _wavefront_steps(key: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Step of each row: at least `floor`, and one more than the previous row's when both
    share a key (rows released together are computed one after the other)."""
    same = (key[1:] == key[:-1]).nonzero()[0]
    if not len(same):
        return floor
    if len(same) == len(key) - 1:  # one key: row r at max over j <= r of floor[j] + r - j
        r = np.arange(len(key))
        return np.maximum.accumulate(floor - r) + r
    same += 1
    step = np.array(floor, dtype=np.int64)
    if len(same) <= 8:
        for r in same.tolist():
            if step[r] <= step[r - 1]:
                step[r] = step[r - 1] + 1
        return step
    h = len(key)
    r = np.arange(h)
    new = np.ones(h, dtype=bool)
    new[same] = False
    run_start = np.maximum.accumulate(np.where(new, r, 0))
    pos = r - run_start
    span = h + int(step.max()) + 1
    run = np.cumsum(new) * span
    return np.maximum.accumulate(step - pos + run) - run + pos


def lbdf_cycles(graph: ComputeGraph, ops: tuple[int, ...], order: RowOrder,
                hw: HardwareConfig) -> int:
    """Cycles of an LBDF group (or an op streaming its rows on its own) run in `order`."""
    bw, lat, mpc, d = hw.dram_bandwidth, hw.dram_latency, hw.macs_per_cycle, hw.dtype_bytes
    deps = row_deps(graph)
    refs, n_in, heights = order.refs, order.n_entering, order.heights
    leaving = set(graph.outputs_of(ops))
    n = len(refs)
    xfer = [math.ceil(deps.row_elems_of[r] * d / bw) for r in refs]
    comp, leaves, weights_ready = [0] * n, [False] * n, [0] * n
    channel = 0  # the cycle the channel is free
    for k in range(n_in, n):  # every weight tensor first, in op order
        op = graph[refs[k]]
        comp[k] = -(-(op.macs // heights[k]) // mpc)
        leaves[k] = op.id in leaving
        if op.weight_elems:
            channel += math.ceil(op.weight_elems * d / bw)
            weights_ready[k] = channel + lat
    ready = [0] * n  # entering: when its next row is usable; leaving: when its last write lands
    for k in range(n_in):  # then row 0 of every entering tensor
        channel += xfer[k]
        ready[k] = channel + lat
    now = 0
    for k, j in zip(order.tensor.tolist(), order.row.tolist(), strict=True):
        if k < n_in:  # an entering row: wait for it, then request the next one
            if ready[k] > now:
                now = ready[k]
            if j + 1 < heights[k]:
                channel = (now if now > channel else channel) + xfer[k]
                ready[k] = channel + lat
        else:
            if weights_ready[k] > now:
                now = weights_ready[k]
            if leaves[k]:  # one write in flight: row j - 1 must have landed
                if j and ready[k] > now:
                    now = ready[k]
                now += comp[k]
                channel = (now if now > channel else channel) + xfer[k]
                ready[k] = channel + lat
            else:
                now += comp[k]
    for k in range(n_in, n):
        if leaves[k] and ready[k] > now:
            now = ready[k]
    return now
