"""Line-buffer depth-first (LBDF) execution of a fusion group (Shi et al. 2021).

The group streams rows. Rows of the tensors entering the group arrive from DRAM in order, one
row in flight ahead of use (double buffering); every op computes its output row `r` as soon as
the input rows its window reads (`simulator.cost.rows`) are on chip; a row is freed once the
last in-group consumer row that reads it has been computed, and rows of tensors leaving the
group are written out as they are produced. All weights of the group stay resident.

The schedule is evaluated exactly, without stepping through it: each row gets a time (the
fraction of its source tensor streamed when it can be computed) and the rows are ordered by
(time, position in their own tensor, op); the buffer holds a row from its production to the
computation that last reads it. F_beta = weights + the peak of live rows over that order.
Nothing is special-cased: line buffers of d(k-1)+1 rows, skips holding the rows their partner
branch has not consumed, and a squeeze-and-excitation multiply forcing its other input to be
held whole all follow from the row dependencies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost.rows import RowDeps, height, row_deps, row_elems
from simulator.cost.traffic import boundary, buffer_traffic_elems
from simulator.cost.types import GroupCost, timing
from simulator.workload.graph import ComputeGraph, Op, OpKind

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["group_cost", "peak_row_bytes"]


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
    return GroupCost(
        scheme="lbdf", ops=ops, buffer_bytes=need, weight_buffer_bytes=weight_bytes,
        dram_act_read=dram_act, dram_weight_read=dram_w, dram_write=dram_write, macs=macs,
        fits=need <= hw.buffer_bytes, reason=_reason(weight_bytes, need, hw),
        timing=timing(dram, buf, macs, hw),
    )


def _reason(weight_bytes: int, need: int, hw: HardwareConfig) -> str:
    if weight_bytes > hw.buffer_bytes:
        return f"weights alone ({weight_bytes:,} B) exceed the buffer ({hw.buffer_bytes:,} B)"
    if need > hw.buffer_bytes:
        return f"needs {need:,} B > buffer {hw.buffer_bytes:,} B"
    return ""


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
        self.heights = [height(graph.tensor_shape(r)) for r in self.refs]
        self.offsets = np.concatenate(([0], np.cumsum(self.heights))).astype(np.int64)

    def peak(self) -> int:
        """Peak live activation elements over the schedule."""
        rank = self._ranks(*self._keys())
        start, end = self._lifetimes(rank)
        sizes = np.repeat([row_elems(self.graph.tensor_shape(r)) for r in self.refs],
                          self.heights).astype(np.int64)
        diff = np.zeros(len(rank) + 1, dtype=np.int64)
        np.add.at(diff, start, sizes)
        np.add.at(diff, end + 1, -sizes)
        return int(np.cumsum(diff).max())

    def _keys(self) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        n_in = len(self.entering)
        times = [np.arange(h, dtype=np.float64) / h for h in self.heights[:n_in]]
        epochs = [np.zeros(h, dtype=np.int64) for h in self.heights[:n_in]]
        paces = [np.zeros(h, dtype=np.float64) for h in self.heights[:n_in]]
        for o in self.ops:
            t, e, p = self._op_keys(o, times, epochs, paces)
            times.append(t)
            epochs.append(e)
            paces.append(p)
        return times, epochs, paces

    def _op_keys(self, o: int, times: list, epochs: list, paces: list,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        op, h = self.graph[o], int(self.deps.heights[o])
        srcs = [(self.index[ref], hi) for ref, hi in zip(op.inputs, self.deps.hi[o], strict=True)]
        t = np.full(h, -1.0)
        e = np.zeros(h, dtype=np.int64)
        for k, hi in srcs:
            tc, ec = times[k][hi], epochs[k][hi]
            later = (tc > t) | ((tc == t) & (ec > e))
            t, e = np.where(later, tc, t), np.where(later, ec, e)
        if _blocks(op):
            return t, e + 1, np.zeros(h)
        p = np.arange(h, dtype=np.float64) / h
        for k, hi in srcs:
            tied = (times[k][hi] == t) & (epochs[k][hi] == e)
            p = np.where(tied, np.maximum(p, paces[k][hi]), p)
        return t, e, p

    def _ranks(self, times: list, epochs: list, paces: list) -> np.ndarray:
        """Position of every row production in the schedule's order."""
        tensor = np.repeat(np.arange(len(self.heights)), self.heights)
        order = np.lexsort((tensor, np.concatenate(paces), np.concatenate(epochs),
                            np.concatenate(times)))
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return rank

    def _lifetimes(self, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First and last schedule position at which each row is in the buffer."""
        start = rank.copy()
        for k in range(len(self.entering)):  # one row in flight ahead of use
            start[self.offsets[k] + 1:self.offsets[k + 1]] = \
                rank[self.offsets[k]:self.offsets[k + 1] - 1]
        end = rank.copy()  # a row leaving the group is written as it is produced
        for o in self.ops:
            self._release_inputs(o, rank, start, end)
        return start, np.maximum(end, start)

    def _release_inputs(self, o: int, rank: np.ndarray, start: np.ndarray,
                        end: np.ndarray) -> None:
        op = self.graph[o]
        c0 = self.offsets[self.index[o]]
        for ref, lo in zip(op.inputs, self.deps.lo[o], strict=True):
            if ref not in self.index:
                continue
            k = self.index[ref]
            seg = slice(self.offsets[k], self.offsets[k + 1])
            if _accumulates(op):  # each input row is folded in as it arrives
                start[c0] = min(start[c0], rank[self.offsets[k]])
                continue
            last = np.searchsorted(lo, np.arange(self.heights[k]), side="right") - 1
            np.maximum(end[seg], rank[c0 + np.maximum(last, 0)], out=end[seg])
