"""Buffer-requirement-reduction (BRR) execution of a fusion group: row tiles, weight streaming.

The group runs in T tiles, each a band of rows of every tensor leaving the group (band j of a
tensor of height H is rows [jH/T, (j+1)H/T)). A tile pulls from DRAM the rows of each entering
tensor its receptive field needs (halos overlap, so neighbouring tiles re-read them), computes
the group op by op in topological order over the rows the tile needs (halo rows of
intermediate tensors are recomputed), and writes its bands. Within a tile a tensor is held from
its producer (or its first consumer, for an entering tensor) to its last consumer.

Weights are either resident (all of them on chip, read once) or streamed: each op's weights
are loaded when the op runs, once per tile, so the buffer holds one op's weights at a time and
DRAM reads them T times. The tile count and weight mode are chosen to minimise F_D under the
buffer: for each mode the smallest T that fits is found (T = 1, then doubling, then bisection,
which assumes the requirement does not grow with T), and the cheaper feasible mode wins.

A group in which a single-row tensor computed from a whole feature map (global pooling) is
broadcast back onto a feature map (the squeeze-and-excitation multiply) cannot be tiled: every
tile would need the whole map. Such groups are BRR-incompatible and reported as not fitting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost.rows import RowDeps, height, row_deps, row_elems
from simulator.cost.traffic import boundary, buffer_traffic_elems
from simulator.cost.types import GroupCost, timing
from simulator.workload.graph import ComputeGraph, OpKind

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["TileCost", "group_cost", "incompatibility", "tile_cost"]


@dataclass(frozen=True, slots=True)
class TileCost:
    """Requirement and traffic of one (tile count, weight mode) configuration, in elements."""

    tiles: int
    streamed: bool
    buffer_elems: int
    act_read_elems: int
    weight_read_elems: int
    macs: int


def incompatibility(graph: ComputeGraph, ops: Sequence[int]) -> str:
    """Why BRR cannot tile the group ("" if it can)."""
    group = set(ops)
    whole = {o for o in ops if _reads_whole_map(graph, o)}
    for o in sorted(ops):  # topological: whole-map dependence flows forward
        if any(p in whole for p in graph.predecessors(o) if p in group):
            whole.add(o)
    for o in sorted(ops):
        op = graph[o]
        for ref in op.inputs:
            if ref in whole and height(graph[ref].output_shape) == 1 < height(op.output_shape):
                return (f"BRR-incompatible: {op.name!r} broadcasts {graph[ref].name!r}, which "
                        "depends on a whole feature map, onto a feature map")
    return ""


def _reads_whole_map(graph: ComputeGraph, o: int) -> bool:
    op = graph[o]
    return height(op.output_shape) == 1 and any(height(s) > 1 for s in op.input_shapes)


def group_cost(graph: ComputeGraph, ops: Sequence[int], hw: HardwareConfig) -> GroupCost:
    """F_beta, F_D, cycles and energy of `ops` as one BRR group, at its best tiling on `hw`."""
    ops = tuple(sorted(ops))
    b = boundary(graph, ops)
    reason = incompatibility(graph, ops)
    best = None if reason else _best_tiling(graph, ops, hw)
    fitting = best is not None and best.buffer_elems * hw.dtype_bytes <= hw.buffer_bytes
    if best is None:
        best = tile_cost(graph, ops, 1, streamed=False)
    elif not fitting:
        reason = (f"needs {best.buffer_elems * hw.dtype_bytes:,} B at best ({best.tiles} tiles, "
                  f"{'streamed' if best.streamed else 'resident'} weights) > buffer "
                  f"{hw.buffer_bytes:,} B")
    return _as_group_cost(graph, ops, hw, best, b.write_elems, fitting and not reason, reason)


def _as_group_cost(graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig,
                   t: TileCost, write_elems: int, fits: bool, reason: str) -> GroupCost:
    d = hw.dtype_bytes
    weights = sum(graph[o].weight_elems for o in ops)
    weight_buffer = max(graph[o].weight_elems for o in ops) if t.streamed else weights
    dram = (t.act_read_elems + t.weight_read_elems + write_elems) * d
    buf = buffer_traffic_elems(graph, ops) * d + dram
    return GroupCost(
        scheme="brr", ops=ops, buffer_bytes=t.buffer_elems * d,
        weight_buffer_bytes=weight_buffer * d, dram_act_read=t.act_read_elems * d,
        dram_weight_read=t.weight_read_elems * d, dram_write=write_elems * d, macs=t.macs,
        fits=fits, reason=reason, timing=timing(dram, buf, t.macs, hw), tiles=t.tiles,
        weights_streamed=t.streamed,
    )


def _best_tiling(graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig) -> TileCost:
    """The feasible configuration with the least DRAM traffic, else the smallest requirement."""
    limit = hw.buffer_bytes // hw.dtype_bytes
    max_tiles = max(height(graph.tensor_shape(r)) for r in (*graph.inputs_of(ops), *ops))
    found = [_smallest_fitting(graph, ops, s, limit, max_tiles) for s in (False, True)]
    feasible = [t for t in found if t.buffer_elems <= limit]
    if feasible:
        return min(feasible, key=lambda t: (_dram(t), t.buffer_elems))
    return min(found, key=lambda t: t.buffer_elems)


def _dram(t: TileCost) -> int:
    return t.act_read_elems + t.weight_read_elems


def _smallest_fitting(graph: ComputeGraph, ops: tuple[int, ...], streamed: bool, limit: int,
                      max_tiles: int) -> TileCost:
    cost = {}

    def at(n: int) -> TileCost:
        if n not in cost:
            cost[n] = tile_cost(graph, ops, n, streamed)
        return cost[n]

    n = 1
    while at(n).buffer_elems > limit and n < max_tiles:
        n = min(2 * n, max_tiles)
    if at(n).buffer_elems > limit or n == 1:
        return at(n)
    lo, hi = n // 2, n  # at(lo) does not fit, at(hi) fits
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if at(mid).buffer_elems > limit else (lo, mid)
    return at(hi)


def tile_cost(graph: ComputeGraph, ops: Sequence[int], tiles: int,
              streamed: bool) -> TileCost:
    """Buffer requirement and traffic of running `ops` in `tiles` row tiles."""
    ops = tuple(sorted(ops))
    regions = _TileRegions(graph, ops, row_deps(graph), tiles)
    live = regions.live_elems()  # (positions, tiles)
    if streamed:
        w = np.array([graph[o].weight_elems for o in ops], dtype=np.int64)
        need = int((live + w[:, None]).max())
        weight_reads = sum(graph[o].weight_elems for o in ops) * tiles
    else:
        need = int(live.max()) + sum(graph[o].weight_elems for o in ops)
        weight_reads = sum(graph[o].weight_elems for o in ops)
    return TileCost(tiles=tiles, streamed=streamed, buffer_elems=need,
                    act_read_elems=regions.entering_read_elems(), weight_read_elems=weight_reads,
                    macs=regions.macs())


class _TileRegions:
    """Rows of every tensor each tile needs, propagated back from the leaving bands."""

    def __init__(self, graph: ComputeGraph, ops: tuple[int, ...], deps: RowDeps,
                 tiles: int) -> None:
        self.graph, self.ops, self.deps, self.tiles = graph, ops, deps, tiles
        self.entering = graph.inputs_of(ops)
        self.refs = (*self.entering, *ops)
        self.first = {}  # ref -> [first needed row per tile]
        self.last = {}
        for ref in self.refs:
            h = height(graph.tensor_shape(ref))
            self.first[ref] = np.full(tiles, h, dtype=np.int64)
            self.last[ref] = np.full(tiles, -1, dtype=np.int64)
        self._seed_bands()
        self._propagate()

    def _seed_bands(self) -> None:
        j = np.arange(self.tiles, dtype=np.int64)
        for o in self.graph.outputs_of(self.ops):
            h = int(self.deps.heights[o])
            self.first[o] = (j * h) // self.tiles
            self.last[o] = ((j + 1) * h) // self.tiles - 1

    def _propagate(self) -> None:
        for o in reversed(self.ops):
            a, z = self.first[o], self.last[o]
            needed = z >= a
            if not needed.any():
                continue
            if self.graph[o].kind is OpKind.GLOBAL_POOL:
                self._accumulate(o)
                continue
            a_c, z_c = np.where(needed, a, 0), np.where(needed, z, 0)
            for ref, lo, hi in zip(self.graph[o].inputs, self.deps.lo[o], self.deps.hi[o],
                                   strict=True):
                self.first[ref] = np.where(needed, np.minimum(self.first[ref], lo[a_c]),
                                           self.first[ref])
                self.last[ref] = np.where(needed, np.maximum(self.last[ref], hi[z_c]),
                                          self.last[ref])

    def _accumulate(self, o: int) -> None:
        """A global pooling folds in its input band by band: each tile reads only its band,
        and the one-row accumulator is held in every tile."""
        ref = self.graph[o].inputs[0]
        h = height(self.graph.tensor_shape(ref))
        j = np.arange(self.tiles, dtype=np.int64)
        self.first[ref] = np.minimum(self.first[ref], (j * h) // self.tiles)
        self.last[ref] = np.maximum(self.last[ref], ((j + 1) * h) // self.tiles - 1)
        self.first[o] = np.zeros(self.tiles, dtype=np.int64)
        self.last[o] = np.zeros(self.tiles, dtype=np.int64)

    def rows(self, ref: int) -> np.ndarray:
        """Rows of tensor `ref` each tile needs."""
        return np.maximum(self.last[ref] - self.first[ref] + 1, 0)

    def entering_read_elems(self) -> int:
        """Elements read from DRAM over all tiles: halo rows every time they are needed, and
        every entering tensor at least whole (the DRAM accounting reads whole tensors)."""
        total = 0
        for r in self.entering:
            shape = self.graph.tensor_shape(r)
            total += max(int(self.rows(r).sum()), height(shape)) * row_elems(shape)
        return total

    def macs(self) -> int:
        """MACs over all tiles, halo rows recomputed."""
        total = 0
        for o in self.ops:
            op = self.graph[o]
            total += int(self.rows(o).sum()) * op.macs // max(1, height(op.output_shape))
        return total

    def live_elems(self) -> np.ndarray:
        """Live activation elements at each op position (rows) in each tile (columns)."""
        pos = {o: k for k, o in enumerate(self.ops)}
        n = len(self.ops)
        alive = np.zeros((n, len(self.refs)), dtype=np.int64)
        for t, ref in enumerate(self.refs):
            users = [pos[c] for c in self.graph.successors(ref) if c in pos] if ref >= 0 \
                else [pos[o] for o in self.ops if ref in self.graph[o].inputs]
            born = pos.get(ref, min(users) if users else 0)
            dies = max(users) if users else born
            alive[born:dies + 1, t] = 1
        sizes = np.stack([self.rows(r) * row_elems(self.graph.tensor_shape(r))
                          for r in self.refs])
        return alive @ sizes
