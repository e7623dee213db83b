"""Line-buffer depth-first (LBDF) execution of a fusion group (Shi et al. 2021).

The group streams rows. Rows of the tensors entering the group arrive from DRAM in order; every
op computes its output row `r` as soon as the input rows its window reads (`simulator.cost.rows`)
are on chip; all weights of the group stay resident. The schedule is evaluated exactly, without
stepping through it: each row gets a time (the fraction of its source tensor streamed when it
can be computed) and the rows are ordered by (time, position in their own tensor, op).
F_beta = weights + the peak of the activations the line buffers hold, at one of two
granularities (`HardwareConfig.lbdf_buffer`, docs/cost-model.md 4.1):

* ``row``: whole rows. A row is held from its production to the computation that last reads
  it, one row in flight ahead of use per entering tensor, and a row leaving the group until the
  next row of its tensor is produced (its DRAM write is in flight meanwhile).
* ``pixel`` (the default, the paper's Fig. 1 line buffer): rows stream pixel by pixel in raster
  order, and a tensor holds the contiguous pixel interval from the oldest pixel a reader still
  needs to the newest one produced: a k x k window over a stream of width W holds (k-1) rows +
  k pixels, not k rows; one pixel is in flight per entering tensor and one pixel being written
  per leaving tensor. The rows that stream together (same time and epoch, same wavefront step)
  form a *block*; in a block a tensor that produces a row while its oldest row is read out
  holds one row less plus the pixels its slowest reader's window spans (`_PixelSchedule`). The
  group's requirement is the larger over blocks, or the whole-row peak if that is smaller (a
  pixel buffer can run the rows one after the other too).

Nothing is special-cased: line buffers, skips holding the rows their partner branch has not
consumed, and a squeeze-and-excitation multiply forcing its other input to be held whole all
follow from the row dependencies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost.rows import RowDeps, height, row_deps, slot_window
from simulator.cost.traffic import boundary, buffer_traffic_elems
from simulator.cost.types import Failure, GroupCost, timing
from simulator.hw import LBDF_BUFFERS, HardwareConfigError
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph, Op, OpKind

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["RowOrder", "group_cost", "line_buffer_elems", "peak_row_bytes", "row_order"]


def group_cost(graph: ComputeGraph, ops: Sequence[int], hw: HardwareConfig) -> GroupCost:
    """F_beta, F_D, cycles and energy of `ops` run as one LBDF group on `hw`."""
    ops = tuple(sorted(ops))
    b = boundary(graph, ops)
    weight_bytes = b.weight_elems * hw.dtype_bytes
    rows_bytes = line_buffer_elems(graph, ops, hw.lbdf_buffer) * hw.dtype_bytes
    need = weight_bytes + rows_bytes
    dram_act, dram_w, dram_write = (b.read_elems * hw.dtype_bytes, weight_bytes,
                                    b.write_elems * hw.dtype_bytes)
    macs = sum(graph[o].macs for o in ops)
    dram = dram_act + dram_w + dram_write
    buf = buffer_traffic_elems(graph, ops) * hw.dtype_bytes + dram
    failure, reason = _failure(weight_bytes, need, hw)
    return GroupCost(
        scheme=Scheme.LBDF, ops=ops, buffer_bytes=need, weight_buffer_bytes=weight_bytes,
        dram_act_read=dram_act, dram_weight_read=dram_w, dram_write=dram_write, macs=macs,
        fits=need <= hw.buffer_bytes, reason=reason, timing=timing(dram, buf, macs, hw),
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
    ops = tuple(sorted(ops))
    if _granularity(granularity) == "pixel":
        px = _PixelSchedule(graph, ops, row_deps(graph))
        rows, levels = px.peaks()
        if levels.max() < rows:  # else whole rows one after the other hold no more
            order = np.lexsort((px.rank, px.row_block))
            tensor = np.repeat(np.arange(len(px.heights)), px.heights)[order]
            row = (np.arange(len(order)) - np.repeat(px.offsets[:-1], px.heights))[order]
            return RowOrder(tuple(px.refs), tuple(px.heights), len(px.entering), tensor, row,
                            px.row_block[order], levels)
    sched = _RowSchedule(graph, ops, row_deps(graph))
    rank = sched._ranks(*sched._keys())
    order = np.argsort(rank)
    tensor = np.repeat(np.arange(len(sched.heights)), sched.heights)[order]
    row = (np.arange(len(rank)) - np.repeat(sched.offsets[:-1], sched.heights))[order]
    return RowOrder(tuple(sched.refs), tuple(sched.heights), len(sched.entering), tensor, row)


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


def _blocks(op: Op) -> bool:
    """An op whose single output row needs a multi-row input: what follows starts an epoch."""
    return height(op.output_shape) == 1 and any(height(s) > 1 for s in op.input_shapes)


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
        keys = [self.deps.frac[r] * _TIME_SCALE for r in self.entering]
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
        if _blocks(op):
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


# --- pixel granularity ------------------------------------------------------------------------

def _width(shape: tuple[int, ...]) -> int:
    """Pixels of one row: W of an N,C,H,W tensor, 1 for any other rank."""
    return int(shape[3]) if len(shape) == 4 else 1


class _ColumnDeps:
    """The column analogue of `simulator.cost.rows.RowDeps`: for op `o` and input slot `i`,
    output column `c` reads input columns ``lo[o][i][c]..hi[o][i][c]`` (clipped), with the
    rules of docs/cost-model.md section 3 applied to widths and the left padding."""

    def __init__(self, graph: ComputeGraph) -> None:
        self.width_of = {op.id: _width(op.output_shape) for op in graph}
        self.width_of.update({-(k + 1): _width(s) for k, s in enumerate(graph.input_shapes)})
        self.lo: list[tuple[np.ndarray, ...]] = []
        self.hi: list[tuple[np.ndarray, ...]] = []
        self.identity: list[tuple[bool, ...]] = []
        self.own = [np.arange(self.width_of[op.id]) / self.width_of[op.id] for op in graph]
        self.blocks = [_blocks(op) for op in graph]
        self.folds = [_accumulates(op) for op in graph]
        for op in graph:
            pairs = [slot_window(op, k, axis=1) for k in range(len(op.inputs))]
            self.lo.append(tuple(p[0] for p in pairs))
            self.hi.append(tuple(p[1] for p in pairs))
            self.identity.append(tuple(
                len(hi) == _width(s) and bool((hi == np.arange(len(hi))).all())
                and bool((lo == hi).all())
                for (lo, hi), s in zip(pairs, op.input_shapes, strict=True)))
        rows = row_deps(graph).identity
        self.same = [tuple(a and b for a, b in zip(rows[op.id], self.identity[op.id],
                                                   strict=True)) for op in graph]


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
    """

    def __init__(self, graph: ComputeGraph, ops: tuple[int, ...], deps: RowDeps) -> None:
        super().__init__(graph, ops, deps)
        self.cols = _column_deps(graph)
        self.widths = [self.cols.width_of[r] for r in self.refs]
        tall = {h for h in self.heights[:len(self.entering)] if h > 1}
        self.one_height = len(tall) <= 1
        self.keys: list[np.ndarray] = []
        self.paces: list[np.ndarray] = []
        self.steps: list[np.ndarray] = []
        self.phase: list[np.ndarray] = []
        self.order: list[np.ndarray] = []
        h_ref = max(self.heights[:len(self.entering)], default=1)
        for ref, h, w in zip(self.entering, self.heights, self.widths, strict=False):
            self.keys.append(deps.frac[ref] * _TIME_SCALE)
            self.paces.append(np.zeros(h))
            self.steps.append(np.zeros(h, dtype=np.int64))
            self.phase.append(np.arange(w, dtype=np.int64) * h_ref / (w * h))
            self.order.append(np.zeros(w))
        for o in ops:
            self._op(o)
        self.rank = self._ranks(self.keys, self.paces)
        self.row_block = self._blocks()

    def _op(self, o: int) -> None:
        deps, cols, index = self.deps, self.cols, self.index
        srcs = [(index[ref], i) for i, ref in enumerate(self.graph[o].inputs)]
        if len(srcs) == 1:
            k, i = srcs[0]
            if deps.identity[o][i]:
                key, pace, step = self.keys[k], self.paces[k], self.steps[k]
            else:
                hi = deps.hi[o][i]
                key, pace, step = self.keys[k][hi], self.paces[k][hi], self.steps[k][hi]
                step = _wavefront_steps(key, step)
            pace = np.maximum(deps.frac[o], pace)
            bound = srcs
        else:
            picks = [(self.keys[k], self.paces[k], self.steps[k]) if deps.identity[o][i] else
                     (self.keys[k][deps.hi[o][i]], self.paces[k][deps.hi[o][i]],
                      self.steps[k][deps.hi[o][i]]) for k, i in srcs]
            key = np.maximum.reduce([kk for kk, _, _ in picks])
            pace, step, bound = deps.frac[o], None, []
            for (k, i), (kk, pp, ss) in zip(srcs, picks, strict=True):
                eq = kk == key
                pace = np.maximum(pace, np.where(eq, pp, 0.0))
                s = np.where(eq, ss, 0)
                step = s if step is None else np.maximum(step, s)
                if eq.any():
                    bound.append((k, i))
            step = _wavefront_steps(key, step)
        if cols.blocks[o]:  # a new epoch: its rows wait for nothing of this one
            self.keys.append(key + 1.0)
            self.paces.append(np.zeros(len(key)))
            self.steps.append(np.zeros(len(key), dtype=np.int64))
            self.phase.append(np.zeros(cols.width_of[o]))
            self.order.append(cols.own[o])
            return
        self.keys.append(key)
        self.paces.append(pace)
        self.steps.append(step)
        x, p = self._columns(o, bound)
        self.phase.append(x)
        self.order.append(p)

    def _columns(self, o: int, bound: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """Phase and order of each column of op o: column c waits for the last column its
        window reads of every input it waits for (the latest of their phases); among columns
        of one phase, the one whose own fraction of its row (or its inputs') is smaller goes
        first. Both are carried forward along the row (a row is produced in raster order)."""
        cols, own = self.cols, self.cols.own[o]
        srcs = []
        for k, i in bound:
            if cols.identity[o][i]:
                srcs.append((self.phase[k], self.order[k]))
            else:
                hi = cols.hi[o][i]
                srcs.append((self.phase[k][hi], self.order[k][hi]))
        if len(srcs) == 1:  # monotone already: the phases and orders of a row, re-indexed
            return srcs[0][0], np.maximum(own, srcs[0][1])
        x = np.maximum.reduce([a for a, _ in srcs])
        p = own
        for a, b in srcs:
            p = np.maximum(p, np.where(a == x, b, 0.0))
        x = np.maximum.accumulate(x)
        new = x[1:] != x[:-1]
        if (new | (p[1:] >= p[:-1])).all():
            return x, p
        # the running maximum of the order within each run of one phase (exact: on ranks)
        values, rank = np.unique(p, return_inverse=True)
        run = np.concatenate(([0], np.cumsum(new)))
        top = np.maximum.accumulate(run * len(values) + rank) - run * len(values)
        return x, values[top]

    def _blocks(self) -> np.ndarray:
        """Block of every row (rows of all tensors concatenated): blocks in (key, step)
        order."""
        key, step = np.concatenate(self.keys), np.concatenate(self.steps)
        order = np.lexsort((step, key))
        k, s = key[order], step[order]
        new = np.empty(len(order), dtype=bool)
        new[0] = True
        new[1:] = (k[1:] != k[:-1]) | (s[1:] != s[:-1])
        block = np.empty(len(order), dtype=np.int64)
        block[order] = np.cumsum(new) - 1
        return block

    def peaks(self) -> tuple[int, np.ndarray]:
        """The peak of the row schedule (whole rows, as `_RowSchedule.peak`) and, per block,
        the activation elements the pixel line buffers hold (at most)."""
        deps, cols, index, offsets = self.deps, self.cols, self.index, self.offsets
        rank, rb, nt = self.rank, self.row_block, len(self.refs)
        end, bstart, bend = rank.copy(), rb.copy(), rb.copy()
        start = rank.copy()
        readers = np.zeros(nt, dtype=bool)
        plain: list[int] = []  # tensors read column by column by an op of one input
        reads: list[tuple[int, int, int]] = []  # (tensor, op, slot): any other read
        for o in self.ops:
            c0 = offsets[index[o]]
            folds, single = cols.folds[o], len(self.graph[o].inputs) == 1
            for i, (ref, last) in enumerate(zip(self.graph[o].inputs, deps.last[o],
                                                strict=True)):
                k = index[ref]
                readers[k] = True
                if folds:  # each input row is folded in as it arrives: a running sum held
                    start[c0] = min(start[c0], rank[offsets[k]])  # from input row 0 on
                    bstart[c0] = min(bstart[c0], rb[offsets[k]])
                    continue
                seg = slice(offsets[k], offsets[k + 1])
                at = slice(c0, c0 + len(last)) if deps.identity[o][i] else c0 + last
                np.maximum(end[seg], rank[at], out=end[seg])
                np.maximum(bend[seg], rb[at], out=bend[seg])
                if cols.same[o][i] and single and not cols.blocks[o]:
                    plain.append(k)
                else:  # (a blocking op's columns read its inputs' columns too)
                    reads.append((k, o, i))
        out = set(self.graph.outputs_of(self.ops))
        leaving = np.array([r in out for r in self.refs])
        return (self._row_peak(start, end, leaving),
                self._levels(bstart, bend, readers, leaving, plain, reads))

    def _row_peak(self, start: np.ndarray, end: np.ndarray, leaving: np.ndarray) -> int:
        """`_RowSchedule.peak` from the lifetimes found by `peaks`."""
        rank, offsets = self.rank, self.offsets
        for k in range(len(self.entering)):  # one row in flight ahead of use
            start[offsets[k] + 1:offsets[k + 1]] = rank[offsets[k]:offsets[k + 1] - 1]
        for k in np.flatnonzero(leaving):  # a leaving row is held until its successor
            seg = slice(offsets[k], offsets[k + 1])
            np.maximum(end[seg], np.append(rank[seg][1:] - 1, len(rank) - 1), out=end[seg])
        end = np.maximum(end, start)
        sizes = np.repeat([self.deps.row_elems_of[r] for r in self.refs],
                          self.heights).astype(np.int64)
        diff = np.bincount(start, sizes, minlength=len(rank) + 1) - \
            np.bincount(end + 1, sizes, minlength=len(rank) + 1)
        return int(np.cumsum(diff).max())

    def _levels(self, bstart: np.ndarray, bend: np.ndarray, readers: np.ndarray,
                leaving: np.ndarray, plain: list[int], reads: list[tuple[int, int, int]]
                ) -> np.ndarray:
        """Per block: what the pixel line buffers hold (at most) while the block streams."""
        deps, nt, rb, offsets = self.deps, len(self.refs), self.row_block, self.offsets
        nb = int(rb.max()) + 1
        cols_of = _ColumnsOf(self, plain, reads)
        widths = np.array(self.widths, dtype=np.int64)
        row_elems = np.array([deps.row_elems_of[r] for r in self.refs], dtype=np.int64)
        pixel = row_elems // widths
        lone = leaving & ~readers  # only its newest pixel, being written, is held
        tensor = np.repeat(np.arange(nt), self.heights)
        r, px = row_elems[tensor], pixel[tensor]  # per row
        keep = ~lone[tensor]
        r_keep = np.where(keep, r, 0)
        born = np.bincount(bstart, r_keep, minlength=nb + 1)
        live = np.cumsum(born - np.bincount(bend + 1, r_keep, minlength=nb + 1))[:nb]
        # per tensor and block: the oldest live row, and whether the block reads it last
        stride = nb + 1
        reach = np.maximum.accumulate(bend + tensor * stride)  # tensor-major, non-decreasing
        oldest = np.minimum(np.searchsorted(reach, tensor * stride + bstart), len(rb) - 1)
        steady = keep & (bend[oldest] == bstart)  # the block making row j reads its tensor's
        steady_dev = np.minimum(cols_of.steady(), widths)  # oldest row out
        save = np.where(steady, r - steady_dev[tensor] * px, 0)
        level = live - np.bincount(bstart, save, minlength=nb + 1)[:nb]
        extra = self._pixels_in_transit(nb, bstart, bend, leaving, lone, pixel)
        total = level + extra
        growing = keep & ~steady
        at_peak = total >= total.max()
        if not self.one_height or not at_peak[bstart[growing]].any():
            return total.astype(np.int64)  # nothing grows at the peak: no trade
        # rows read out: the oldest live row of its tensor at the block of its last reader
        prior = np.concatenate(([-1], reach[:-1])) - tensor * stride
        prior[offsets[:-1]] = -1
        read_out = keep & (prior < bend)
        made = tensor * stride + bstart  # non-decreasing: is a row of the tensor born there?
        at = np.minimum(np.searchsorted(made, tensor * stride + bend), len(rb) - 1)
        shrinking = read_out & ~(keep[at] & (made[at] == tensor * stride + bend))
        trade = (np.bincount(bstart[growing], minlength=nb)
                 * np.bincount(bend[shrinking], minlength=nb)) > 0
        if not trade[at_peak].any():
            return total.astype(np.int64)  # no tensor grows while another shrinks at the peak
        # a tensor growing while another shrinks: the larger of the rows at the block's start
        # and end, plus how far each tensor's pixels stray from the line between them. The
        # block's progress is the phase, or, in a block whose rows all have one phase (released
        # together, e.g. after a global pooling), the order
        by_order = cols_of.single_phase_blocks(nb, tensor)
        dev = np.zeros(nb)
        for by, where in (("phase", ~by_order), ("order", by_order)):
            if not where.any():
                continue
            grow_dev = np.clip(1 - cols_of.lag_min(by), 0, widths)
            shrink_dev = np.clip(np.ceil(cols_of.shrink(by) - 1e-9), 0, widths)
            moved = (np.bincount(bstart, np.where(steady, steady_dev[tensor], 0) * px
                                 + np.where(growing, grow_dev[tensor], 0) * px, minlength=nb + 1)
                     + np.bincount(bend, np.where(shrinking, shrink_dev[tensor], 0) * px,
                                   minlength=nb + 1))[:nb]
            dev = np.where(where, moved, dev)
        before = live - born[:nb]
        after = live - np.bincount(bend, np.where(read_out, r, 0), minlength=nb + 1)[:nb]
        linear = np.maximum(before, after) + dev
        return (np.minimum(level, linear) + extra).astype(np.int64)

    def _pixels_in_transit(self, nb: int, bstart: np.ndarray, bend: np.ndarray,
                           leaving: np.ndarray, lone: np.ndarray, pixel: np.ndarray
                           ) -> np.ndarray:
        """Per block: the pixel in flight of each entering tensor of more than one pixel (from
        its first row's block to its last's), and the newest pixel of each leaving tensor
        while none of its rows is live (its DRAM write in flight; the last one until the group
        ends)."""
        offsets, rb = self.offsets, self.row_block
        first = bstart[offsets[:-1]]
        diff = np.zeros(nb + 1, dtype=np.int64)
        for k in range(len(self.entering)):
            if self.heights[k] * self.widths[k] > 1:
                diff[first[k]] += pixel[k]
                diff[rb[offsets[k + 1] - 1] + 1] -= pixel[k]
        for k in np.flatnonzero(lone):
            diff[first[k]] += pixel[k]
            diff[nb] -= pixel[k]
        extra = np.cumsum(diff)[:nb]
        for k in np.flatnonzero(leaving & ~lone):
            seg = slice(offsets[k], offsets[k + 1])
            rows = np.cumsum(np.bincount(bstart[seg], minlength=nb + 1)
                             - np.bincount(bend[seg] + 1, minlength=nb + 1))[:nb]
            extra[first[k]:] += np.where(rows[first[k]:] == 0, pixel[k], 0)
        return extra


class _ColumnsOf:
    """The reads of a `_PixelSchedule`, evaluated at once: the columns of every tensor laid
    end to end, phases offset per tensor (so they increase across tensors), with the run of
    equal phase of each column and run + order (which increases too).

    For tensor k read by op o, when o computes column c the producer of k has produced every
    column whose (phase, order) comes first; k's interval then reaches from o's window's first
    column to the last of those (`steady`), and o's window's first column trails o's phase by
    `shrink` columns. A *plain* reader, which reads column c of k alone for its column c (a 1x1
    or elementwise op of one input), has k's phases and orders: k's columns of equal phase and
    order come first (`steady` is the longest such run) and `shrink` is k's own lag.
    """

    def __init__(self, px: _PixelSchedule, plain: list[int],
                 reads: list[tuple[int, int, int]]) -> None:
        self.px, self.plain, self.reads = px, plain, reads
        self.widths = widths = np.array(px.widths, dtype=np.int64)
        self.starts = np.concatenate(([0], np.cumsum(widths)))
        self.tensor_of = np.repeat(np.arange(len(widths)), widths)
        self.span = 2.0 * (max(px.heights[:len(px.entering)], default=1) + 1)
        self.raw = np.concatenate(px.phase)
        self.phase = self.raw + self.tensor_of * self.span
        self.run = np.zeros(len(self.phase))
        np.cumsum(self.phase[1:] != self.phase[:-1], out=self.run[1:])
        self.key = self.run + np.concatenate(px.order)
        self._general: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def steady(self) -> np.ndarray:
        """Per tensor: the most pixels its interval spans beyond whole rows (at least 1)."""
        steady = np.ones(len(self.widths), dtype=np.int64)
        if self.plain:
            ks = np.array(self.plain)
            equal = np.empty(len(self.key), dtype=bool)
            equal[0] = False
            equal[1:] = self.key[1:] == self.key[:-1]
            run = np.cumsum(~equal)
            longest = np.maximum.reduceat(np.bincount(run)[run], self.starts[:-1])
            np.maximum.at(steady, ks, longest[ks])
        if self.reads:
            k, produced, lo = self._evaluate()
            np.maximum.at(steady, k, produced - lo)
        return steady

    def shrink(self, by: str) -> np.ndarray:
        """Per tensor: how many columns its readers' windows trail the progress (`by` the
        phase or the order), at most."""
        shrink = np.zeros(len(self.widths))
        if self.plain:
            ks = np.array(self.plain)
            np.maximum.at(shrink, ks,
                          np.maximum.reduceat(self._lag(by), self.starts[:-1])[ks])
        if self.reads:
            k, _, lo = self._evaluate()
            of = self.px.phase if by == "phase" else self.px.order
            xo = np.concatenate([of[self.px.index[o]] for _, o, _ in self.reads])
            np.maximum.at(shrink, k, self.widths[k] * xo - lo)
        return shrink

    def lag_min(self, by: str) -> np.ndarray:
        """Per tensor: minus how many columns it runs ahead of the progress, at most."""
        return np.ceil(np.minimum.reduceat(self._lag(by), self.starts[:-1]) - 1e-9)

    def single_phase_blocks(self, nb: int, tensor: np.ndarray) -> np.ndarray:
        """Blocks whose rows are all of tensors of one and the same phase in every column."""
        lowest = np.minimum.reduceat(self.raw, self.starts[:-1])
        flat = lowest == np.maximum.reduceat(self.raw, self.starts[:-1])
        block = self.px.row_block
        mixed = np.bincount(block[~flat[tensor]], minlength=nb) > 0
        low, high = np.full(nb, np.inf), np.full(nb, -np.inf)
        np.minimum.at(low, block, lowest[tensor])
        np.maximum.at(high, block, lowest[tensor])
        return ~mixed & (low == high)

    def _lag(self, by: str) -> np.ndarray:
        column = np.arange(len(self.raw)) - self.starts[self.tensor_of]
        progress = self.raw if by == "phase" else np.concatenate(self.px.order)
        return self.widths[self.tensor_of] * progress - column

    def _evaluate(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the columns of every general read: its tensor, how many columns of it are
        produced by then, and the first column the read's window reads."""
        if self._general is None:
            px, widths, starts = self.px, self.widths, self.starts
            idx = [px.index[o] for _, o, _ in self.reads]
            k = np.repeat(np.array([k for k, _, _ in self.reads]), widths[idx])
            at_x = np.concatenate([px.phase[j] for j in idx]) + k * self.span
            first = np.searchsorted(self.phase, at_x, side="left")
            at = np.minimum(first, starts[k + 1] - 1)
            later = np.searchsorted(self.key, self.run[at]
                                    + np.concatenate([px.order[j] for j in idx]),
                                    side="right")
            produced = np.where(self.phase[at] == at_x, later, first) - starts[k]
            lo = np.concatenate([px.cols.lo[o][i] for _, o, i in self.reads])
            self._general = k, produced, lo
        return self._general


def _wavefront_steps(key: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Step of each row: at least `floor`, and one more than the previous row's when both
    share a key (rows released together are computed one after the other)."""
    same = np.flatnonzero(key[1:] == key[:-1]) + 1
    if not len(same):
        return floor
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
