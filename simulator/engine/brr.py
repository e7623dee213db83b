"""BRR group execution, tile by tile, on the simulated machine.

The tiling (tile count, resident or streamed weights) is the one the analytic model picks, and
each tile needs the rows `simulator.cost.brr.tile_regions` gives: BRR's semantics. Within a
tile the ops run in topological order: before an op, the entering tensors it is the first to
read are loaded (their region for this tile), and its weights when streamed; its output region
is taken, the PE array computes it, a band leaving the group is written back (the tile waits
for the write), and tensors whose last reader it was are freed. Resident weights are loaded
once before the first tile. Rows of an entering tensor that no tile needs are read with the
last tile and dropped, so the DRAM traffic is whole tensors as in the analytic accounting.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from simulator.cost.brr import TileCost, tile_regions
from simulator.cost.rows import row_deps
from simulator.engine.machine import Machine
from simulator.workload.graph import ComputeGraph, OpKind

__all__ = ["run_brr_group"]


def run_brr_group(m: Machine, graph: ComputeGraph, ops: Sequence[int], tiling: TileCost,
                  ) -> Generator[Any, Any, None]:
    """simpy process body running `ops` as one BRR group with the given tiling."""
    ops = tuple(sorted(ops))
    deps = row_deps(graph)
    regions = tile_regions(graph, ops, tiling.tiles)
    spans = regions.lifetimes()
    d = m.hw.dtype_bytes
    refs = regions.refs
    name = {r: graph.input_names[-r - 1] if r < 0 else graph[r].name for r in refs}
    row_bytes = {r: deps.row_elems_of[r] * d for r in refs}
    leaving = set(graph.outputs_of(ops))
    ready = {}
    if not tiling.streamed:
        for o in ops:
            ready[o] = yield from _load_weights(m, graph, o)
    sums = [o for o in ops if graph[o].kind is OpKind.GLOBAL_POOL]
    for o in sums:  # running sums of global poolings live from the first tile to the last
        yield from m.alloc(row_bytes[o], f"the running sum of {name[o]!r}")
    for j in range(tiling.tiles):
        held: dict[int, int] = {}
        for p, o in enumerate(ops):
            for t, ref in enumerate(refs):
                if ref not in ops and spans[t][0] == p:  # entering tensor, first read here
                    yield from _load_region(m, regions, ref, j, row_bytes[ref], name[ref],
                                            held, last_tile=j == tiling.tiles - 1)
            if tiling.streamed:
                ready[o] = yield from _load_weights(m, graph, o)
            yield from m.wait_until(ready.get(o, 0))
            rows = int(regions.rows(o)[j])
            if rows and o not in sums:
                yield from m.alloc(rows * row_bytes[o], f"tile {j} of {name[o]!r}")
                held[o] = rows * row_bytes[o]
            if rows:
                reads = sum(held.get(r, 0) for r in graph[o].inputs)
                yield from m.compute(rows * graph[o].macs // deps.height_of[o], reads)
            if o in leaving:
                band = _band_rows(deps.height_of[o], j, tiling.tiles)
                if band:
                    yield from m.wait_until(m.transfer(band * row_bytes[o], name[o], write=True))
            for t, ref in enumerate(refs):
                if spans[t][1] == p and ref in held:
                    yield from m.free(held.pop(ref))
            if tiling.streamed:
                yield from m.free(graph[o].weight_elems * d)
    for o in sums:
        yield from m.free(row_bytes[o])
    if not tiling.streamed:
        for o in ops:
            yield from m.free(graph[o].weight_elems * d)


def _load_weights(m: Machine, graph: ComputeGraph, o: int) -> Generator[Any, Any, int]:
    w = graph[o].weight_elems * m.hw.dtype_bytes
    if not w:
        return 0
    yield from m.alloc(w, f"the weights of {graph[o].name!r}")
    return m.transfer(w, f"{graph[o].name}.weights")


def _load_region(m: Machine, regions: Any, ref: int, j: int, row_bytes: int, name: str,
                 held: dict[int, int], last_tile: bool) -> Generator[Any, Any, None]:
    rows = int(regions.rows(ref)[j])
    if rows:
        yield from m.alloc(rows * row_bytes, f"tile {j} of {name!r}")
        held[ref] = rows * row_bytes
        yield from m.wait_until(m.transfer(rows * row_bytes, name))
    if last_tile:
        height = regions.deps.height_of[ref]
        unread = height - int(regions.rows(ref).sum())
        if unread > 0:  # rows no tile needs: read (whole-tensor DMA) and dropped
            m.transfer(unread * row_bytes, name)


def _band_rows(height: int, j: int, tiles: int) -> int:
    return max(0, ((j + 1) * height) // tiles - (j * height) // tiles)
