"""LBDF group execution, row by row, on the simulated machine.

The group's weights are loaded first and stay resident. Rows then follow the schedule of
`simulator.cost.lbdf.row_order`: an entering row is usable when its DRAM transfer lands, and
its successor is requested (transfer queued) at that moment, so one row per entering tensor is
in flight; an op row waits for its weights and input rows, and the PE array's cycles; a row
leaving the group is written back while the next row of its tensor is computed (one write in
flight per tensor). The buffer follows the hardware's line-buffer granularity
(`HardwareConfig.lbdf_buffer`):

* whole rows: an entering row takes its buffer row when it is requested, an op row when it is
  computed; the simulator keeps its own reference counts: a row is freed when every consumer
  row whose window covers it has been computed (a global pooling consumes each row as it is
  produced), a row leaving the group when its DRAM write has landed and the next row of its
  tensor is being produced;
* pixels: rows are executed block by block (the rows streamed together pixel by pixel) and,
  at the first row of each block, the buffer is taken or returned to hold what the block's
  line buffers hold (`RowOrder.levels`, the pixel rule of docs/cost-model.md 4.1): rows are not
  allocated one by one, since a pixel line buffer takes and frees a row pixel by pixel. Where
  whole rows hold no more (`row_order` then returns the row schedule), the group runs as with
  whole rows.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import numpy as np

from simulator.cost.lbdf import row_order
from simulator.cost.rows import row_deps
from simulator.engine.machine import Machine
from simulator.workload.graph import ComputeGraph, OpKind

__all__ = ["run_lbdf_group"]


def run_lbdf_group(m: Machine, graph: ComputeGraph, ops: Sequence[int],
                   ) -> Generator[Any, Any, None]:
    """simpy process body running `ops` as one LBDF group."""
    yield from _LbdfGroup(m, graph, tuple(sorted(ops))).run()


class _LbdfGroup:
    def __init__(self, m: Machine, graph: ComputeGraph, ops: tuple[int, ...]) -> None:
        self.m, self.graph, self.ops = m, graph, ops
        self.deps = row_deps(graph)
        self.order = row_order(graph, ops, m.hw.lbdf_buffer)
        self.pixel = self.order.levels is not None  # else whole rows (they hold no more)
        self.block = -1  # pixel granularity: the block being executed, and its bytes held
        self.held = 0
        self.refs = self.order.refs
        self.index = {r: k for k, r in enumerate(self.refs)}
        self.n_in = self.order.n_entering
        d = m.hw.dtype_bytes
        self.row_bytes = [self.deps.row_elems_of[r] * d for r in self.refs]
        self.names = [graph.input_names[-r - 1] if r < 0 else graph[r].name for r in self.refs]
        self.leaving = set(graph.outputs_of(ops))
        self.folded_by: dict[int, list[int]] = {}  # tensor -> global poolings reading it
        self.accumulating: set[int] = set()  # global poolings whose accumulator is held
        self.pending = self._reader_counts()
        self.arrival: list[list[int]] = [[0] * h for h in self.order.heights[:self.n_in]]
        self.last_write: dict[int, int] = {}
        self.weights_ready: dict[int, int] = {}

    def _reader_counts(self) -> list[list[int]]:
        """For every row of every tensor: consumer rows reading it, +1 if it leaves."""
        window = [np.zeros(h + 1, dtype=np.int64) for h in self.order.heights]
        direct = [np.zeros(h, dtype=np.int64) for h in self.order.heights]
        for o in self.ops:
            accumulate = self.graph[o].kind is OpKind.GLOBAL_POOL
            for ref, lo, hi in zip(self.graph[o].inputs, self.deps.lo[o], self.deps.hi[o],
                                   strict=True):
                k = self.index.get(ref)
                if k is None:
                    continue
                if accumulate:  # one read per row, as it is produced
                    direct[k] += 1
                    self.folded_by.setdefault(k, []).append(self.index[o])
                else:
                    np.add.at(window[k], lo, 1)
                    np.add.at(window[k], hi + 1, -1)
        rows = [np.cumsum(w)[:-1] + d for w, d in zip(window, direct, strict=True)]
        for o in self.leaving:
            rows[self.index[o]] += 1
        return [r.tolist() for r in rows]

    def run(self) -> Generator[Any, Any, None]:
        yield from self._load_weights()
        blocks = self.order.block.tolist() if self.pixel else None
        if blocks:
            yield from self._enter_block(blocks[0])
        for k in range(self.n_in):
            yield from self._request(k, 0)
        for e, (k, j) in enumerate(zip(self.order.tensor.tolist(), self.order.row.tolist(),
                                       strict=True)):
            if blocks:
                yield from self._enter_block(blocks[e])
            if k < self.n_in:
                yield from self._arrive(k, j)
            else:
                yield from self._compute(k, j)
        yield from self._finish()

    def _enter_block(self, b: int) -> Generator[Any, Any, None]:
        """Pixel granularity: hold what block b's line buffers hold."""
        if b == self.block:
            return
        self.block = b
        need = int(self.order.levels[b]) * self.m.hw.dtype_bytes
        if need > self.held:
            yield from self.m.alloc(need - self.held, f"the line buffers of block {b}")
        else:
            yield from self.m.free(self.held - need)
        self.held = need

    def _load_weights(self) -> Generator[Any, Any, None]:
        d = self.m.hw.dtype_bytes
        for o in self.ops:
            w = self.graph[o].weight_reads * d
            if w:
                yield from self.m.alloc(w, f"the weights of {self.graph[o].name!r}", "weights")
                self.weights_ready[o] = self.m.transfer(w, f"{self.graph[o].name}.weights")

    def _request(self, k: int, j: int) -> Generator[Any, Any, None]:
        if not self.pixel:
            yield from self.m.alloc(self.row_bytes[k], f"row {j} of {self.names[k]!r}")
        self.arrival[k][j] = self.m.transfer(self.row_bytes[k], self.names[k])

    def _arrive(self, k: int, j: int) -> Generator[Any, Any, None]:
        yield from self.m.wait_until(self.arrival[k][j])
        if j + 1 < self.order.heights[k]:
            yield from self._request(k, j + 1)
        yield from self._produced(k, j)

    def _compute(self, k: int, j: int) -> Generator[Any, Any, None]:
        o = self.refs[k]
        op = self.graph[o]
        yield from self.m.wait_until(self.weights_ready.get(o, 0))
        if o in self.leaving and j > 0:  # one write in flight: row j-1 must have landed
            yield from self.m.wait_until(self.last_write[o])
            yield from self._release(k, j - 1)
        if k not in self.accumulating and not self.pixel:
            yield from self.m.alloc(self.row_bytes[k], f"row {j} of {self.names[k]!r}")
        yield from self.m.compute(op.macs // self.order.heights[k], self._window_bytes(o, j))
        yield from self._open_accumulators(k)
        if op.kind is not OpKind.GLOBAL_POOL and not self.pixel:
            for ref, lo, hi in zip(op.inputs, self.deps.lo[o], self.deps.hi[o], strict=True):
                src = self.index.get(ref)
                if src is not None:
                    for r in range(int(lo[j]), int(hi[j]) + 1):
                        yield from self._release(src, r)
        if o in self.leaving:
            self.last_write[o] = self.m.transfer(self.row_bytes[k], self.names[k], write=True)
        yield from self._produced(k, j)

    def _window_bytes(self, o: int, j: int) -> int:
        return sum((int(hi[j]) - int(lo[j]) + 1) * self.deps.row_elems_of[ref]
                   for ref, lo, hi in zip(self.graph[o].inputs, self.deps.lo[o],
                                          self.deps.hi[o], strict=True)) * self.m.hw.dtype_bytes

    def _open_accumulators(self, k: int) -> Generator[Any, Any, None]:
        """The accumulators of the global poolings folding tensor `k` are held from the event
        that produces its first row on, as that row is (the cost model's lifetimes: with the
        rows the event reads, before it releases them)."""
        if self.pixel:
            return
        for c in self.folded_by.get(k, ()):
            if c not in self.accumulating:
                self.accumulating.add(c)
                yield from self.m.alloc(self.row_bytes[c], f"the accumulator of "
                                        f"{self.names[c]!r}")

    def _produced(self, k: int, j: int) -> Generator[Any, Any, None]:
        """A row exists: global poolings reading it fold it in at once."""
        if self.pixel:
            return
        yield from self._open_accumulators(k)
        for _ in self.folded_by.get(k, ()):
            yield from self._release(k, j)
        if self.pending[k][j] == 0:  # a row no consumer row reads (e.g. skipped by a stride)
            self.pending[k][j] = -1
            yield from self.m.free(self.row_bytes[k])

    def _release(self, k: int, j: int) -> Generator[Any, Any, None]:
        if self.pixel:
            return
        self.pending[k][j] -= 1
        if self.pending[k][j] == 0:
            self.pending[k][j] = -1
            yield from self.m.free(self.row_bytes[k])

    def _finish(self) -> Generator[Any, Any, None]:
        for o in sorted(self.leaving):
            k = self.index[o]
            yield from self.m.wait_until(self.last_write[o])
            yield from self._release(k, self.order.heights[k] - 1)
        if self.pixel:
            yield from self.m.free(self.held)
            self.held = 0
        d = self.m.hw.dtype_bytes
        for o in self.ops:
            yield from self.m.free(role="weights", nbytes=self.graph[o].weight_reads * d)
