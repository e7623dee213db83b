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
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost.rows import RowDeps, height, row_deps
from simulator.cost.traffic import boundary, buffer_traffic_elems
from simulator.cost.types import Failure, GroupCost, timing
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph, OpKind

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["FitFloors", "TileCost", "TileRegions", "chosen_tiling", "dram_lower_bound",
           "fit_floors", "group_cost", "incompatibility", "tile_cost", "tile_regions"]


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


def dram_lower_bound(graph: ComputeGraph, ops: Sequence[int], hw: HardwareConfig) -> int | None:
    """A lower bound of the group's F_D if it fits the buffer; None if it cannot fit.

    Far cheaper than `group_cost` (no tile regions: one pass over the group's ops, vectorised
    over every tile count). Proof (docs/exact.md, "The BRR fit bound"): for T tiles every tile
    holds at least ``floor(H/T)`` rows of each leaving tensor of height H (its band), and an op
    whose tile needs r rows makes the tile need at least ``min_a(hi[a+r-1] - lo[a] + 1)`` rows
    of each input (a global pooling with a network output downstream, `_useful`:
    ``floor(h/T)`` of its input); these per-tile row counts L_T bound the live elements at each
    op position in *every* tile, hence the requirement of each weight mode at T, and the DRAM
    reads (each entering tensor at least ``max(T * L_T, H)`` rows, streamed weights T times).
    The chosen configuration fits, so its (T, mode) is one whose bounded requirement fits, and
    its F_D is at least the least bounded F_D over those; when none fits, neither does the
    group.
    """
    ops = tuple(sorted(ops))
    if incompatibility(graph, ops):
        return None
    limit = hw.buffer_bytes // hw.dtype_bytes
    layout = _Layout(graph, ops, row_deps(graph))
    tiles = np.arange(1, int(layout.heights.max()) + 1, dtype=np.int64)
    least = _least_rows(graph, layout, tiles)
    live = _live(layout, least)  # (positions, tile counts)
    m = len(layout.entering)
    act = (np.maximum(tiles * least[:m], layout.heights[:m, None])
           * layout.row_elems[:m, None]).sum(axis=0)
    writes = sum(h * int(layout.row_elems[k]) for k, h in layout.leaving)
    weights = layout.weight_sum
    fits_resident = live.max(axis=0) + weights <= limit
    fits_streamed = (live + layout.weights[:, None]).max(axis=0) <= limit
    dram = np.concatenate([(act + weights)[fits_resident],
                           (act + weights * tiles)[fits_streamed]])
    return None if not len(dram) else (int(dram.min()) + writes) * hw.dtype_bytes


@dataclass(frozen=True)
class FitFloors:
    """Per-op floors of every BRR group holding the op, on one graph and buffer.

    Attributes:
        tiles: Per op, the fewest tiles with which such a group can fit with streamed weights
            (0: with none, so no group holding the op fits).
        resident_elems: Per op, the fewest activation elements live at its position in a tile
            at any tile count (what resident weights share the buffer with, at least).
    """

    tiles: tuple[int, ...]
    resident_elems: tuple[int, ...]


def fit_floors(graph: ComputeGraph, hw: HardwareConfig) -> FitFloors:
    """The `FitFloors` of `graph` on `hw` (docs/exact.md, "The BRR fit bound").

    Proof sketch: in every BRR group S holding op o and for every tile count T, each tile
    needs at least m_T(o) rows of o's tensor and ``win(m_T(o))`` of each of o's inputs
    (`_op_activations`), and all of them are live at o's position; streamed, o's weights are
    on chip then too. So a fitting streamed configuration has T >= tiles[o] for every o of S,
    and a fitting resident one weights(S) + resident_elems[o] <= buffer.
    """
    act = _op_activations(graph)  # (ops, tile counts 1..): non-increasing along a row
    limit = hw.buffer_bytes // hw.dtype_bytes
    weights = np.array([op.weight_elems for op in graph], dtype=np.int64)
    fits = act + weights[:, None] <= limit
    tiles = np.where(fits.any(axis=1), fits.argmax(axis=1) + 1, 0)
    return FitFloors(tuple(int(t) for t in tiles), tuple(int(x) for x in act[:, -1]))


@lru_cache(maxsize=8)
def _op_activations(graph: ComputeGraph) -> np.ndarray:
    """a[o, T-1] = a_T(o): the fewest activation elements every tile of T tiles holds at o's
    position, in any group holding o (T = 1 .. the tallest tensor of the graph): m_T(o) rows
    of o's tensor plus win(m_T(o)) rows of each distinct input (a useful global pooling:
    floor(h/T) of its input), where m_T(o) (`_least_rows_any`) bounds the rows of o any tile
    needs in any group. Non-increasing in T."""
    deps = row_deps(graph)
    least = _least_rows_any(graph)
    tiles = np.arange(1, least.shape[1] + 1, dtype=np.int64)
    act = least * np.array([deps.row_elems_of[op.id] for op in graph], dtype=np.int64)[:, None]
    for op in graph:
        for ref in dict.fromkeys(op.inputs):  # each distinct input once
            act[op.id] += _read_by(graph, op.id, ref, least[op.id], tiles) * deps.row_elems_of[ref]
    return act


@lru_cache(maxsize=8)
def _least_rows_any(graph: ComputeGraph) -> np.ndarray:
    """m[o, T-1] <= the rows of o's tensor that every tile of T tiles needs, in every BRR group
    holding o: ``floor(H/T)`` where o's tensor leaves the group, which it always does for a
    network output; else some reader c of it is in the group, needing m_T(c) rows at least,
    so ``min over readers c of win_c(m_T(c))`` (0 for an op nobody reads)."""
    deps = row_deps(graph)
    tallest = max([*deps.height_of.values(), 1])
    tiles = np.arange(1, tallest + 1, dtype=np.int64)
    least = np.zeros((len(graph), tallest), dtype=np.int64)
    for op in reversed(list(graph)):
        own = deps.height_of[op.id] // tiles
        readers = list(graph.successors(op.id))
        if op.id in graph.output_set or not readers:
            least[op.id] = own if op.id in graph.output_set else 0
            continue
        row = own
        for c in readers:
            row = np.minimum(row, _read_by(graph, c, op.id, least[c], tiles))
        least[op.id] = row
    return least


def _read_by(graph: ComputeGraph, c: int, ref: int, rows: np.ndarray,
             tiles: np.ndarray) -> np.ndarray:
    """The fewest rows of tensor `ref` a tile needing `rows` rows of op `c` reads from it."""
    if graph[c].kind is OpKind.GLOBAL_POOL:
        return row_deps(graph).height_of[ref] // tiles * (c in _useful(graph))
    reads = [_least_window(graph, c, slot)[rows]
             for slot, r in enumerate(graph[c].inputs) if r == ref]
    return reads[0] if len(reads) == 1 else np.max(reads, axis=0)  # one slot: the usual case


def _least_rows(graph: ComputeGraph, layout: _Layout, tiles: np.ndarray) -> np.ndarray:
    """Rows of every tensor (rows) that every tile of T tiles needs at least (columns: T in
    `tiles`): the leaving bands' least height, propagated to the inputs by `_least_window`."""
    least = np.zeros((len(layout.refs), len(tiles)), dtype=np.int64)
    for k, h in layout.leaving:
        least[k] = h // tiles
    index = layout.index
    for o in reversed(layout.refs[len(layout.entering):]):
        for ref in dict.fromkeys(graph[o].inputs):
            r = index[ref]
            np.maximum(least[r], _read_by(graph, o, ref, least[index[o]], tiles), out=least[r])
    return least


@lru_cache(maxsize=8)
def _useful(graph: ComputeGraph) -> frozenset[int]:
    """Ops from which a network output is reachable (themselves included). In a BRR group such
    an op is needed by some tile: its tensor leaves (the last band is not empty) or a useful
    reader in the group needs it, and every output row reads at least one row of each input
    (lo <= hi); so a useful global pooling makes every tile read its band of the input."""
    useful: set[int] = set()
    for op in reversed(list(graph)):
        if op.id in graph.output_set or any(c in useful for c in graph.successors(op.id)):
            useful.add(op.id)
    return frozenset(useful)


@lru_cache(maxsize=8)
def _window_tables(graph: ComputeGraph) -> dict[tuple[int, int], np.ndarray]:
    """The `_least_window` tables of `graph` computed so far, by (op, input slot)."""
    return {}


def _least_window(graph: ComputeGraph, o: int, slot: int) -> np.ndarray:
    """w[r] = the fewest rows of input `slot` that r consecutive output rows of op `o` read
    (w[0] = 0): ``min over a of hi[a+r-1] - lo[a] + 1``, non-decreasing in r."""
    tables = _window_tables(graph)
    w = tables.get((o, slot))
    if w is None:
        deps = row_deps(graph)
        lo, hi = deps.lo[o][slot], deps.hi[o][slot]
        h = len(lo)
        w = np.zeros(h + 1, dtype=np.int64)
        for r in range(1, h + 1):
            w[r] = max(0, int((hi[r - 1:] - lo[:h - r + 1]).min()) + 1)
        tables[(o, slot)] = w
    return w


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
        self.graph, self.ops, self.deps = graph, ops, deps
        self.entering = graph.inputs_of(ops)
        self.refs = (*self.entering, *ops)
        self.index = {ref: k for k, ref in enumerate(self.refs)}
        self.heights = np.array([deps.height_of[r] for r in self.refs], dtype=np.int64)
        self.row_elems = np.array([deps.row_elems_of[r] for r in self.refs], dtype=np.int64)
        self.leaving = tuple((self.index[o], deps.height_of[o]) for o in graph.outputs_of(ops))
        self.spans = _lifetimes(graph, ops, self.refs)
        self.born = np.array([b for b, _ in self.spans], dtype=np.int64)
        self.dies = np.array([d for _, d in self.spans], dtype=np.int64)
        self.positions = len(ops)
        self.weights = np.array([graph[o].weight_elems for o in ops], dtype=np.int64)
        self.weight_sum = int(self.weights.sum())

    @cached_property
    def steps(self) -> list[tuple[int, tuple[int, int] | None, tuple]]:
        """Propagation, last op first: (row of o, pooled input row and height or None, slots).
        Only the tile regions need it (not `dram_lower_bound`), so it is built on demand."""
        graph, deps, steps = self.graph, self.deps, []
        for o in reversed(self.ops):
            if graph[o].kind is OpKind.GLOBAL_POOL:
                ref = graph[o].inputs[0]
                pooled = (self.index[ref], deps.height_of[ref])
                steps.append((self.index[o], pooled, ()))
                continue
            slots = tuple((self.index[ref], lo, hi) for ref, lo, hi in zip(
                graph[o].inputs, deps.lo_pad[o], deps.hi_pad[o], strict=True))
            steps.append((self.index[o], None, slots))
        return steps

    @cached_property
    def macs(self) -> tuple[tuple[int, int, int], ...]:
        """(row of o, o's MACs, o's height) of every op with MACs."""
        return tuple((self.index[o], self.graph[o].macs, self.deps.height_of[o])
                     for o in self.ops if self.graph[o].macs)


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
