"""Line-buffer depth-first (LBDF) execution of a fusion group (Shi et al. 2021).

The group streams rows. Rows of the tensors entering the group arrive from DRAM in order, one
row in flight ahead of use (double buffering); every op computes its output row `r` as soon as
the input rows its window reads (`simulator.cost.rows`) are on chip; a row is freed once the
last in-group consumer row that reads it has been computed; a row leaving the group is written
back while the next row of its tensor is computed (one write in flight per tensor). All
weights of the group stay resident.

The schedule is evaluated exactly, without stepping through it: each row gets a time (the
fraction of its source tensor streamed when it can be computed) and the rows are ordered by
(time, position in their own tensor, op); the buffer holds a row from its production to the
computation that last reads it, and a row leaving the group until the next row of its tensor
is produced (its DRAM write is in flight meanwhile; the last one until the group ends).
F_beta = weights + the peak of live rows over that order.
Nothing is special-cased: line buffers of d(k-1)+1 rows, skips holding the rows their partner
branch has not consumed, and a squeeze-and-excitation multiply forcing its other input to be
held whole all follow from the row dependencies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost.rows import RowDeps, height, row_deps
from simulator.cost.traffic import boundary, buffer_traffic_elems
from simulator.cost.types import Failure, GroupCost, timing
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph, Op, OpKind

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["RowOrder", "group_cost", "peak_row_bytes", "row_order"]


def group_cost(graph: ComputeGraph, ops: Sequence[int], hw: HardwareConfig) -> GroupCost:
    """F_beta, F_D, cycles and energy of `ops` run as one LBDF group on `hw`."""
    ops = tuple(sorted(ops))
    b = boundary(graph, ops)
    weight_bytes = b.weight_elems * hw.dtype_bytes
    rows_bytes = peak_row_bytes(graph, ops) * hw.dtype_bytes
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
    """

    refs: tuple[int, ...]
    heights: tuple[int, ...]
    n_entering: int
    tensor: np.ndarray
    row: np.ndarray


def row_order(graph: ComputeGraph, ops: Sequence[int]) -> RowOrder:
    """The order in which an LBDF group streams and computes rows."""
    sched = _RowSchedule(graph, tuple(sorted(ops)), row_deps(graph))
    rank = sched._ranks(*sched._keys())
    order = np.argsort(rank)
    tensor = np.repeat(np.arange(len(sched.heights)), sched.heights)[order]
    row = (np.arange(len(rank)) - np.repeat(sched.offsets[:-1], sched.heights))[order]
    return RowOrder(tuple(sched.refs), tuple(sched.heights), len(sched.entering), tensor, row)


def peak_row_bytes(graph: ComputeGraph, ops: Sequence[int]) -> int:
    """Peak elements of live activation rows when `ops` run as one LBDF group."""
    return _RowSchedule(graph, tuple(sorted(ops)), row_deps(graph)).peak()


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
