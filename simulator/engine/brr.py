"""BRR group execution, tile by tile and weight sub-group by sub-group, on the simulated machine.

The configuration (tile count, each op's resident or streamed weights and its slices) is the
one the analytic model picks (`simulator.cost.brr.chosen_tiling`), and each tile needs the rows
`simulator.cost.brr.tile_regions` gives: BRR's semantics (docs/cost-model.md, section 4.2).

Resident weights are loaded once before the first tile and freed after the last. Each tile
first takes its row allowances (one row in flight per entering tensor, one row being written per
leaving tensor, held until the tile ends), then runs the ops in topological order: before an
op, the entering tensors it is the first to read are loaded (their region for this tile); its
output region is taken and the PE array computes it:

* resident weights, or streamed in one slice: in one step (streamed weights loaded first);
* output-channel slices: slice after slice, each loading its weights, computing its channels
  of the output region over the whole input region, and freeing them;
* input-channel slices: the output region is taken as 32-bit partial sums; each slice loads its
  channels of the input region and its weights, accumulates, and frees both; the partial sums
  are then requantised in place (the accumulator's extra bytes are freed).

A band leaving the group is written back (the tile waits for the write), and tensors whose last
reader the op was are freed. Rows of an entering tensor that no tile needs are read with the
last tile and dropped, so the DRAM traffic is whole tensors as in the analytic accounting.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from simulator.cost.brr import (
    OpWeights,
    TileCost,
    channels,
    slice_bounds,
    slice_elems,
    tile_regions,
)
from simulator.cost.rows import row_deps
from simulator.engine.machine import Machine
from simulator.workload.graph import ComputeGraph, OpKind

__all__ = ["run_brr_group"]


def run_brr_group(m: Machine, graph: ComputeGraph, ops: Sequence[int], tiling: TileCost,
                  ) -> Generator[Any, Any, None]:
    """simpy process body running `ops` as one BRR group with the given configuration."""
    yield from _BrrGroup(m, graph, tuple(sorted(ops)), tiling).run()


class _BrrGroup:
    def __init__(self, m: Machine, graph: ComputeGraph, ops: tuple[int, ...],
                 tiling: TileCost) -> None:
        self.m, self.graph, self.ops, self.tiling = m, graph, ops, tiling
        self.deps = row_deps(graph)
        self.regions = tile_regions(graph, ops, tiling.tiles)
        self.spans = self.regions.lifetimes()
        self.d = m.hw.dtype_bytes
        refs = self.regions.refs
        self.name = {r: graph.input_names[-r - 1] if r < 0 else graph[r].name for r in refs}
        self.row_bytes = {r: self.deps.row_elems_of[r] * self.d for r in refs}
        self.leaving = set(graph.outputs_of(ops))
        self.plans = {w.op: w for w in tiling.weights}
        # an input-sliced op's input is loaded slice by slice, not ahead of the op
        self.sliced_input = {graph[o].inputs[0] for o, w in self.plans.items()
                             if not w.resident and w.split == "in"}
        self.sums = [o for o in ops if graph[o].kind is OpKind.GLOBAL_POOL]
        self.ready: dict[int, int] = {}

    def run(self) -> Generator[Any, Any, None]:
        m, resident = self.m, [w for w in self.tiling.weights if w.resident]
        for w in resident:
            yield from m.alloc(w.slice_elems * self.d, f"the weights of {self.name[w.op]!r}",
                               "weights")
            self.ready[w.op] = m.transfer(w.slice_elems * self.d, f"{self.name[w.op]}.weights")
        for o in self.sums:  # running sums of global poolings live from the first tile to the last
            yield from m.alloc(self.row_bytes[o], f"the running sum of {self.name[o]!r}")
        allowance = self.tiling.allowance_elems * self.d
        for j in range(self.tiling.tiles):
            yield from m.alloc(allowance, f"the rows in flight of tile {j}")
            yield from self._tile(j)
            yield from m.free(allowance)
        for o in self.sums:
            yield from m.free(self.row_bytes[o])
        for w in resident:
            yield from m.free(w.slice_elems * self.d, "weights")

    def _tile(self, j: int) -> Generator[Any, Any, None]:
        m, graph, refs = self.m, self.graph, self.regions.refs
        last_tile = j == self.tiling.tiles - 1
        held: dict[int, int] = {}
        for p, o in enumerate(self.ops):
            for t, ref in enumerate(refs):
                if ref not in self.ops and self.spans[t][0] == p and \
                        ref not in self.sliced_input:  # entering tensor, first read here
                    yield from self._load_region(ref, j, held, last_tile)
            plan = self.plans.get(o)
            rows = int(self.regions.rows(o)[j])
            out_bytes = rows * self.row_bytes[o] if o not in self.sums else 0
            macs = rows * graph[o].macs // self.deps.height_of[o]
            if plan is not None and not plan.resident and plan.split == "in":
                yield from self._input_slices(o, plan, j, rows, macs, out_bytes, last_tile)
            else:
                yield from m.alloc(out_bytes, f"tile {j} of {self.name[o]!r}")
                reads = sum(held.get(r, 0) for r in graph[o].inputs)
                if plan is None or plan.resident:
                    yield from m.wait_until(self.ready.get(o, 0))
                    yield from m.compute(macs, reads)
                else:
                    yield from self._output_slices(o, plan, macs, reads)
            if out_bytes:
                held[o] = out_bytes
            if o in self.leaving:
                band = _band_rows(self.deps.height_of[o], j, self.tiling.tiles)
                if band:
                    yield from m.wait_until(m.transfer(band * self.row_bytes[o], self.name[o],
                                                       write=True))
            for t, ref in enumerate(refs):
                if self.spans[t][1] == p and ref in held:
                    yield from m.free(held.pop(ref))

    def _output_slices(self, o: int, plan: OpWeights, macs: int,
                       reads: int) -> Generator[Any, Any, None]:
        """Streamed weights in output-channel slices (one slice: the whole op)."""
        m, elems = self.m, self.graph[o].weight_reads
        chans = channels(self.graph[o].output_shape)
        for a, b in slice_bounds(chans, plan.slices):
            w = slice_elems(elems, chans, a, b) * self.d
            yield from m.alloc(w, f"weight slice {a}:{b} of {self.name[o]!r}", "weights")
            yield from m.wait_until(m.transfer(w, f"{self.name[o]}.weights"))
            yield from m.compute(macs * b // chans - macs * a // chans, reads)
            yield from m.free(w, "weights")

    def _input_slices(self, o: int, plan: OpWeights, j: int, rows: int, macs: int,
                      out_bytes: int, last_tile: bool) -> Generator[Any, Any, None]:
        """Streamed weights in input-channel slices: partial sums, then requantised."""
        m, graph = self.m, self.graph
        x, elems = graph[o].inputs[0], graph[o].weight_reads
        chans = channels(graph[o].input_shapes[0])
        x_rows = int(self.regions.rows(x)[j])
        per_channel = x_rows * self.row_bytes[x] // chans
        partial = out_bytes * self.tiling.accumulator
        yield from m.alloc(partial, f"tile {j} of {self.name[o]!r} (partial sums)")
        for a, b in slice_bounds(chans, plan.slices):
            xb, w = per_channel * (b - a), slice_elems(elems, chans, a, b) * self.d
            yield from m.alloc(xb, f"tile {j} of {self.name[x]!r}, channels {a}:{b}")
            yield from m.alloc(w, f"weight slice {a}:{b} of {self.name[o]!r}", "weights")
            ready = m.transfer(xb, self.name[x]) if xb else 0
            yield from m.wait_until(max(ready, m.transfer(w, f"{self.name[o]}.weights")))
            yield from m.compute(macs * b // chans - macs * a // chans, xb)
            yield from m.free_both(xb, w)
        yield from m.free(partial - out_bytes)
        if last_tile:
            self._drop_unread(x)

    def _load_region(self, ref: int, j: int, held: dict[int, int],
                     last_tile: bool) -> Generator[Any, Any, None]:
        rows = int(self.regions.rows(ref)[j])
        if rows:
            size = rows * self.row_bytes[ref]
            yield from self.m.alloc(size, f"tile {j} of {self.name[ref]!r}")
            held[ref] = size
            yield from self.m.wait_until(self.m.transfer(size, self.name[ref]))
        if last_tile:
            self._drop_unread(ref)

    def _drop_unread(self, ref: int) -> None:
        """Rows of an entering tensor no tile needs: read (whole-tensor DMA) and dropped."""
        unread = self.deps.height_of[ref] - int(self.regions.rows(ref).sum())
        if unread > 0:
            self.m.transfer(unread * self.row_bytes[ref], self.name[ref])


def _band_rows(height: int, j: int, tiles: int) -> int:
    return max(0, ((j + 1) * height) // tiles - (j * height) // tiles)
