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
buffer: for each mode the smallest T that fits is found (T = 1; if the most tiles do not fit
either, none do; else doubling, then bisection: this assumes the requirement does not grow
with T), and the cheaper feasible mode wins. Streamed weights at T = 1 read everything once,
so when they fit nothing is cheaper and resident weights are not searched.

A group in which a single-row tensor computed from a whole feature map (global pooling) is
broadcast back onto a feature map (the squeeze-and-excitation multiply) cannot be tiled: every
tile would need the whole map. Such groups are BRR-incompatible and reported as not fitting.
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
from simulator.workload.graph import ComputeGraph, OpKind

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["TileCost", "TileRegions", "chosen_tiling", "group_cost", "incompatibility",
           "tile_cost", "tile_regions"]


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
    if not whole:  # no whole-map dependence starts in the group
        return ""
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
    failure = Failure.BRR_INCOMPATIBLE if reason else None
    if best is None:
        best = tile_cost(graph, ops, 1, streamed=False)
    elif not fitting:
        failure = Failure.OVER_BUFFER
        reason = (f"needs {best.buffer_elems * hw.dtype_bytes:,} B at best ({best.tiles} tiles, "
                  f"{'streamed' if best.streamed else 'resident'} weights) > buffer "
                  f"{hw.buffer_bytes:,} B")
    return _as_group_cost(graph, ops, hw, best, b.write_elems, failure, reason)


def _as_group_cost(graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig,
                   t: TileCost, write_elems: int, failure: Failure | None,
                   reason: str) -> GroupCost:
    d = hw.dtype_bytes
    weights = sum(graph[o].weight_elems for o in ops)
    weight_buffer = max(graph[o].weight_elems for o in ops) if t.streamed else weights
    dram = (t.act_read_elems + t.weight_read_elems + write_elems) * d
    buf = buffer_traffic_elems(graph, ops) * d + dram
    return GroupCost(
        scheme=Scheme.BRR, ops=ops, buffer_bytes=t.buffer_elems * d,
        weight_buffer_bytes=weight_buffer * d, dram_act_read=t.act_read_elems * d,
        dram_weight_read=t.weight_read_elems * d, dram_write=write_elems * d, macs=t.macs,
        fits=failure is None, reason=reason, timing=timing(dram, buf, t.macs, hw),
        tiles=t.tiles, weights_streamed=t.streamed, failure=failure,
    )


def chosen_tiling(graph: ComputeGraph, ops: Sequence[int],
                  hw: HardwareConfig) -> TileCost | None:
    """The tiling `group_cost` picks for the group (None if BRR cannot tile it)."""
    ops = tuple(sorted(ops))
    return None if incompatibility(graph, ops) else _best_tiling(graph, ops, hw)


def tile_regions(graph: ComputeGraph, ops: Sequence[int], tiles: int) -> TileRegions:
    """The rows of every tensor each of `tiles` tiles needs."""
    return TileRegions(graph, tuple(sorted(ops)), row_deps(graph), tiles)


def _best_tiling(graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig) -> TileCost:
    """The feasible configuration with the least DRAM traffic, else the smallest requirement."""
    limit = hw.buffer_bytes // hw.dtype_bytes
    layout = _Layout(graph, ops, row_deps(graph))
    max_tiles = int(layout.heights.max())
    # the counts every search below starts with (1, the most, then doubling), in one pass
    first = {1, max_tiles, *(min(1 << k, max_tiles) for k in range(max_tiles.bit_length()))}
    memo = _batch_costs(layout, tuple(sorted(first)))

    def at(n: int) -> tuple[TileCost, TileCost]:
        if n not in memo:
            memo.update(_batch_costs(layout, (n,)))
        return memo[n]

    streamed = _smallest_fitting(lambda n: at(n)[1], limit, max_tiles)
    if streamed.tiles == 1 and streamed.buffer_elems <= limit:
        return streamed  # one tile reads everything once: nothing is cheaper
    found = [streamed, _smallest_fitting(lambda n: at(n)[0], limit, max_tiles)]
    feasible = [t for t in found if t.buffer_elems <= limit]
    if feasible:
        return min(feasible, key=lambda t: (_dram(t), t.buffer_elems))
    return min(found, key=lambda t: t.buffer_elems)


def _dram(t: TileCost) -> int:
    return t.act_read_elems + t.weight_read_elems


def _smallest_fitting(at, limit: int, max_tiles: int) -> TileCost:
    if at(1).buffer_elems <= limit or at(max_tiles).buffer_elems > limit:
        return at(1) if at(1).buffer_elems <= limit else at(max_tiles)
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
    return _tile_costs(graph, tuple(sorted(ops)), tiles)[int(streamed)]


def _tile_costs(graph: ComputeGraph, ops: tuple[int, ...], tiles: int,
                ) -> tuple[TileCost, TileCost]:
    """(resident, streamed) costs of `tiles` row tiles: the regions are shared."""
    return _batch_costs(_Layout(graph, ops, row_deps(graph)), (tiles,))[tiles]


def _batch_costs(layout: _Layout, counts: tuple[int, ...],
                 ) -> dict[int, tuple[TileCost, TileCost]]:
    """`_tile_costs` at several tile counts, from one propagation over all their tiles."""
    rows = _Bands(layout, counts).rows
    live = _live(layout, rows)  # (positions, all tiles)
    w, weights = layout.weights, layout.weight_sum
    m = len(layout.entering)
    out = {}
    start = 0
    for tiles in counts:
        cols = slice(start, start + tiles)
        start += tiles
        block_rows, block_live = rows[:, cols], live[:, cols]
        read = np.maximum(block_rows[:m].sum(axis=1), layout.heights[:m])
        act = sum(int(x) * int(e) for x, e in zip(read, layout.row_elems[:m], strict=True))
        sums = block_rows.sum(axis=1).tolist()
        macs = sum(sums[k] * op_macs // h for k, op_macs, h in layout.macs)
        out[tiles] = (
            TileCost(tiles, False, int(block_live.max()) + weights, act, weights, macs),
            TileCost(tiles, True, int((block_live + w[:, None]).max()), act, weights * tiles,
                     macs))
    return out


class _Bands:
    """First / last row of every tensor (rows) each tile needs (columns), for the tiles of
    several tile counts side by side (the columns of one count are independent of the
    others'); a tensor a tile does not need has the sentinels first = H, last = -1."""

    def __init__(self, layout: _Layout, counts: tuple[int, ...]) -> None:
        self.layout, self.counts = layout, counts
        self.j = np.concatenate([np.arange(t, dtype=np.int64) for t in counts])
        self.t = np.repeat(np.array(counts, dtype=np.int64), counts)
        n = len(layout.refs)
        self.first = np.repeat(layout.heights[:, None], len(self.j), axis=1)
        self.last = np.full((n, len(self.j)), -1, dtype=np.int64)
        j, t = self.j, self.t
        for k, h in layout.leaving:
            first, last = (j * h) // t, ((j + 1) * h) // t - 1
            empty = last < first
            self.first[k] = np.where(empty, h, first)
            self.last[k] = np.where(empty, -1, last)
        self._propagate()
        self.rows = np.maximum(self.last - self.first + 1, 0)

    def _propagate(self) -> None:
        firsts, lasts = list(self.first), list(self.last)  # row views
        for k, pooled, slots in self.layout.steps:
            a, z = firsts[k], lasts[k]
            if pooled is not None:
                self._accumulate(k, *pooled)
                continue
            # padded tables map the "not needed" sentinels (first = H, last = -1) to themselves,
            # so tiles that do not need the op leave its inputs as they are
            for r, lo, hi in slots:
                np.minimum(firsts[r], lo[a], out=firsts[r])
                np.maximum(lasts[r], hi[z], out=lasts[r])

    def _accumulate(self, k: int, r: int, h: int) -> None:
        """A global pooling folds in its input band by band: each tile reads only its band,
        and the one-row accumulator is held in every tile (of a count where it is needed)."""
        start = 0
        for tiles in self.counts:
            cols = slice(start, start + tiles)
            start += tiles
            if not (self.last[k, cols] >= self.first[k, cols]).any():
                continue
            j = self.j[cols]
            np.minimum(self.first[r, cols], (j * h) // tiles, out=self.first[r, cols])
            np.maximum(self.last[r, cols], ((j + 1) * h) // tiles - 1, out=self.last[r, cols])
            self.first[k, cols] = 0
            self.last[k, cols] = 0


class _Layout:
    """What the tile regions of one group share whatever the tile count: its tensors, their
    heights and row sizes, the propagation steps, the tensors' lifetimes and the weights."""

    def __init__(self, graph: ComputeGraph, ops: tuple[int, ...], deps: RowDeps) -> None:
        self.entering = graph.inputs_of(ops)
        self.refs = (*self.entering, *ops)
        self.index = {ref: k for k, ref in enumerate(self.refs)}
        self.heights = np.array([deps.height_of[r] for r in self.refs], dtype=np.int64)
        self.row_elems = np.array([deps.row_elems_of[r] for r in self.refs], dtype=np.int64)
        self.leaving = tuple((self.index[o], deps.height_of[o]) for o in graph.outputs_of(ops))
        # propagation, last op first: (row of o, pooled input row and height or None, slots)
        self.steps = []
        for o in reversed(ops):
            if graph[o].kind is OpKind.GLOBAL_POOL:
                ref = graph[o].inputs[0]
                pooled = (self.index[ref], deps.height_of[ref])
                self.steps.append((self.index[o], pooled, ()))
                continue
            slots = tuple((self.index[ref], lo, hi) for ref, lo, hi in zip(
                graph[o].inputs, deps.lo_pad[o], deps.hi_pad[o], strict=True))
            self.steps.append((self.index[o], None, slots))
        self.spans = _lifetimes(graph, ops, self.refs)
        self.born = np.array([b for b, _ in self.spans], dtype=np.int64)
        self.dies = np.array([d for _, d in self.spans], dtype=np.int64)
        self.positions = len(ops)
        self.macs = tuple((self.index[o], graph[o].macs, deps.height_of[o]) for o in ops
                          if graph[o].macs)
        self.weights = np.array([graph[o].weight_elems for o in ops], dtype=np.int64)
        self.weight_sum = int(self.weights.sum())


def _lifetimes(graph: ComputeGraph, ops: tuple[int, ...],
               refs: tuple[int, ...]) -> list[tuple[int, int]]:
    pos = {o: k for k, o in enumerate(ops)}
    readers: dict[int, list[int]] = {}  # entering tensor -> positions of its readers
    for k, o in enumerate(ops):
        for ref in dict.fromkeys(graph[o].inputs):
            if ref not in pos:
                readers.setdefault(ref, []).append(k)
    spans = []
    for ref in refs:
        if ref >= 0 and ref in pos and graph[ref].kind is OpKind.GLOBAL_POOL:
            spans.append((0, len(ops) - 1))  # the running sum spans every tile
            continue
        users = readers.get(ref, []) if ref not in pos \
            else [pos[c] for c in graph.successors(ref) if c in pos]
        born = pos.get(ref, min(users) if users else 0)
        spans.append((born, max(users) if users else born))
    return spans


def _live(layout: _Layout, rows: np.ndarray) -> np.ndarray:
    """Live activation elements at each op position (rows) in each tile (columns): the sum of
    the tile's rows of every tensor whose lifetime covers the position."""
    sizes = rows * layout.row_elems[:, None]
    diff = np.zeros((layout.positions + 1, rows.shape[1]), dtype=np.int64)
    np.add.at(diff, layout.born, sizes)
    np.subtract.at(diff, layout.dies + 1, sizes)
    return np.cumsum(diff[:-1], axis=0)


class TileRegions:
    """Rows of every tensor each tile needs, propagated back from the leaving bands."""

    def __init__(self, graph: ComputeGraph, ops: tuple[int, ...], deps: RowDeps,
                 tiles: int) -> None:
        self.graph, self.ops, self.deps, self.tiles = graph, ops, deps, tiles
        self.layout = _Layout(graph, ops, deps)
        self.entering, self.refs = self.layout.entering, self.layout.refs
        bands = _Bands(self.layout, (tiles,))
        self._first, self._last, self._rows = bands.first, bands.last, bands.rows

    @property
    def first(self) -> dict[int, np.ndarray]:
        """First row of each tensor each tile needs (its height where none is)."""
        return {ref: self._first[k] for k, ref in enumerate(self.refs)}

    @property
    def last(self) -> dict[int, np.ndarray]:
        """Last row of each tensor each tile needs (-1 where none is)."""
        return {ref: self._last[k] for k, ref in enumerate(self.refs)}

    def rows(self, ref: int) -> np.ndarray:
        """Rows of tensor `ref` each tile needs."""
        return self._rows[self.layout.index[ref]]

    def entering_read_elems(self) -> int:
        """Elements read from DRAM over all tiles: halo rows every time they are needed, and
        every entering tensor at least whole (the DRAM accounting reads whole tensors)."""
        m = len(self.entering)
        read = np.maximum(self._rows[:m].sum(axis=1), self.layout.heights[:m])
        return sum(int(x) * int(e) for x, e in zip(read, self.layout.row_elems[:m],
                                                    strict=True))

    def macs(self) -> int:
        """MACs over all tiles, halo rows recomputed."""
        sums = self._rows.sum(axis=1).tolist()
        return sum(sums[k] * macs // h for k, macs, h in self.layout.macs)

    def lifetimes(self) -> list[tuple[int, int]]:
        """Per tensor of `refs`, the first and last op position at which a tile holds it:
        from its producer (an entering tensor: its first consumer) to its last consumer; a
        global pooling's running sum is held throughout, from the first tile to the last."""
        return list(self.layout.spans)

    def live_elems(self) -> np.ndarray:
        """Live activation elements at each op position (rows) in each tile (columns)."""
        return _live(self.layout, self._rows)
