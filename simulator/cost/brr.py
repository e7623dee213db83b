"""Buffer-requirement-reduction (BRR) execution of a fusion group: row tiles, weight sub-groups.

The group runs in T tiles, each a band of rows of every tensor leaving the group (band j of a
tensor of height H is rows [jH/T, (j+1)H/T)). A tile pulls from DRAM the rows of each entering
tensor its receptive field needs (halos overlap, so neighbouring tiles re-read them; a tensor
several ops of the group read is pulled once per tile, the hull of what they need), computes
the group op by op in topological order over the rows the tile needs (halo rows of
intermediate tensors are recomputed), and writes its bands. Within a tile a tensor is held from
its producer (or its first consumer, for an entering tensor) to its last consumer. Every tile
also holds one row in flight per entering tensor and one row being written per leaving tensor
(tensors of more than one row: LBDF's row allowances).

Weights (docs/cost-model.md, section 4.2): each op's weights are either *resident* (on chip
for every tile, read once) or *streamed* (read once per tile, in S sequential sub-groups:
output-channel slices, the op's whole input region on chip and its output produced slice by
slice, or input-channel slices, the op's input held a slice of channels at a time and its
output held whole as 32-bit partial sums). Slicing adds no DRAM traffic. For a tile count the
residency maximises the resident weights (a subset-sum, by branch and bound; F_D falls by
(T - 1) x the weights made resident), and each streamed op takes the fewest slices that fit.
The tile count is the one of least F_D over 1, the powers of two, the tallest height and a
bisection towards the smallest count that fits, ties to fewer tiles.

A group in which a single-row tensor computed from a whole feature map (global pooling) is
broadcast back onto a feature map (the squeeze-and-excitation multiply) cannot be tiled: every
tile would need the whole map. Such groups are BRR-incompatible and reported as not fitting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost._lazy import LazyModule
from simulator.cost.rows import RowDeps, row_deps
from simulator.cost.traffic import buffer_traffic_elems, weight_traffic_bytes
from simulator.cost.types import Failure, GroupCost, timing
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph, Op, OpKind, Shape

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["ACCUMULATOR_BYTES", "FitFloors", "OpWeights", "TileCost", "TileRegions",
           "accumulator_elems", "channels", "chosen_tiling", "dram_lower_bound", "fit_arrays",
           "fit_floors",
           "group_cost", "incompatibility", "one_tile_floor", "position_needs", "slice_elems",
           "slice_bounds", "tile_cost", "tile_regions", "whole_tensor_rule"]

_k = LazyModule("simulator.cost._brr_kernels")  # numba imported on first use

ACCUMULATOR_BYTES = 4
"""Bytes of one partial sum of an input-channel-sliced op (32-bit accumulators)."""


@dataclass(frozen=True, slots=True)
class OpWeights:
    """How one op's weights are held in a BRR configuration.

    Attributes:
        op: The op id.
        resident: On chip for every tile, read once (else streamed: read once per tile).
        split: "out" (output-channel slices; one slice is the whole op) or "in" (input-channel
            slices, the output held as partial sums).
        slices: S, the sub-groups the op runs in per tile (1 when resident).
        chunk: Channels per slice, ceil(C / S) (the last slice may hold fewer).
        slice_elems: Weight elements of the largest (first) slice; all of them when S = 1.
    """

    op: int
    resident: bool
    split: str
    slices: int
    chunk: int
    slice_elems: int


@dataclass(frozen=True, slots=True)
class TileCost:
    """Requirement and traffic of one BRR configuration, in elements.

    Attributes:
        tiles: T.
        streamed: True when any op streams its weights.
        buffer_elems: F_beta / d: the peak over tiles and op positions.
        act_read_elems, weight_read_elems: DRAM reads.
        macs: MACs over all tiles, halo rows recomputed.
        weights: How each op with weights holds them, by op id.
        allowance_elems: The rows in flight held throughout a tile (one row per entering and
            per leaving tensor of more than one row).
        accumulator: Elements one partial sum takes (``accumulator_elems``).
    """

    tiles: int
    streamed: bool
    buffer_elems: int
    act_read_elems: int
    weight_read_elems: int
    macs: int
    weights: tuple[OpWeights, ...] = ()
    allowance_elems: int = 0
    accumulator: int = 1

    @property
    def resident_elems(self) -> int:
        """Weight elements resident for the whole group."""
        return sum(w.slice_elems for w in self.weights if w.resident)

    @property
    def weight_buffer_elems(self) -> int:
        """The most weight elements on chip at once: the resident ones plus the largest slice
        of a streamed op."""
        return self.resident_elems + max(
            (w.slice_elems for w in self.weights if not w.resident), default=0)

    def of(self, op: int) -> OpWeights | None:
        """The weights plan of `op` (None for an op without weights)."""
        return next((w for w in self.weights if w.op == op), None)


def accumulator_elems(dtype_bytes: int) -> int:
    """Elements (of `dtype_bytes` each) one 32-bit partial sum takes: 4 at int8, 1 at fp32."""
    return max(1, ACCUMULATOR_BYTES // dtype_bytes)


def channels(shape: Shape) -> int:
    """The channel count of a tensor: dimension 1 of an N,C,H,W or N,C tensor, else the last."""
    if len(shape) in (2, 4):
        return int(shape[1])
    return int(shape[-1]) if shape else 1


def slice_elems(elems: int, chans: int, start: int, stop: int) -> int:
    """Weight elements of the slice of channels [start, stop) of an op with `elems` weight
    elements over `chans` channels: ``q = elems // chans`` each, and one more for each of the
    first ``elems % chans`` channels (so the slices add up to `elems` and the first slice of a
    split is its largest)."""
    q, r = divmod(elems, chans)
    return (stop - start) * q + min(stop, r) - min(start, r)


def slice_bounds(chans: int, slices: int) -> list[tuple[int, int]]:
    """The channel ranges of `slices` slices of ceil(chans / slices) channels each."""
    chunk = -(-chans // slices)
    return [(a, min(a + chunk, chans)) for a in range(0, chans, chunk)]


def _largest_chunk(budget: int, elems: int, chans: int) -> int:
    """The most channels c in [1, chans] whose first slice fits `budget`; 0 if none does."""
    if budget >= elems:
        return chans
    q, r = divmod(elems, chans)
    best = min(r, budget // (q + 1)) if budget > 0 else 0  # c <= r: c (q + 1) elements
    if q and budget >= r:  # c > r: c q + r elements
        c = min(chans, (budget - r) // q)
        if c > r:
            best = max(best, c)
    return best


def incompatibility(graph: ComputeGraph, ops: Sequence[int]) -> str:
    """Why BRR cannot tile the group ("" if it can)."""
    reads_whole = _k.graph_tables(graph).whole_from_rows
    if not reads_whole[np.asarray(ops, dtype=np.int64)].any():
        return ""  # no whole-map dependence starts in the group
    t = _k.graph_tables(graph)
    o, ref = _k.broadcast(np.asarray(ops, dtype=np.int64), t.n_in, t.in_ptr, t.in_node,
                          reads_whole, t.height)
    if o < 0:
        return ""
    return (f"BRR-incompatible: {graph[int(o)].name!r} broadcasts {graph[int(ref)].name!r}, "
            "which depends on a whole feature map, onto a feature map")


def group_cost(graph: ComputeGraph, ops: Sequence[int], hw: HardwareConfig) -> GroupCost:
    """F_beta, F_D, cycles and energy of `ops` as one BRR group, at its best configuration
    (split buffers: `_split_cost`)."""
    ops = tuple(sorted(ops))
    if hw.is_split:
        return _split_cost(graph, ops, hw, incompatibility(graph, ops))
    return _compiled_cost(graph, ops, hw, incompatibility(graph, ops))


def _compiled_cost(graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig,
                   incompatible: str) -> GroupCost:
    """`group_cost` in one compiled call (`_k.group`: the layout, `_search`'s configuration
    and `schedule_cycles`, on the same integers); a group BRR cannot tile (`incompatible`
    says why) reports its one-tile configuration, as `_configure` of the T = 1 block."""
    t = _k.graph_tables(graph)
    c_out, first_out, chans, first_in, x_chan, x_node = t.weight_arrays
    d, limit = hw.dtype_bytes, hw.buffer_bytes // hw.dtype_bytes
    (tiles, buffer_elems, act, weight_reads, macs, writes, traffic, allowance, cycles, w_ops,
     resident, split, slices, chunk, first) = _k.group(
        np.array(ops, dtype=np.int64), t.n_in, t.in_ptr, t.in_node, t.succ_ptr, t.succ,
        t.output, t.pool, t.height, t.row_elems, t.tab_off, t.tab_len, t.lo, t.hi, t.macs,
        t.weights, c_out, first_out, chans, first_in, x_chan, x_node, t.op_traffic,
        t.output_elems, accumulator_elems(d), limit, d, float(hw.dram_bandwidth),
        hw.macs_per_cycle, hw.dram_latency, not incompatible)
    streamed = ~resident
    resident_elems = int(first[resident].sum())
    weight_buffer = resident_elems + int(first[streamed].max(initial=0))
    slices_of = tuple(zip(w_ops[streamed].tolist(),
                          ["in" if sp else "out" for sp in split[streamed].tolist()],
                          slices[streamed].tolist(), strict=True))
    fits = buffer_elems <= limit and not incompatible
    reason, failure = incompatible, Failure.BRR_INCOMPATIBLE if incompatible else None
    if not fits and not incompatible:
        failure = Failure.OVER_BUFFER
        sliced = ", every weight streamed in its finest slices" if len(w_ops) else ""
        reason = (f"needs {int(buffer_elems) * d:,} B at best ({int(tiles)} "
                  f"tiles{sliced}) > buffer {hw.buffer_bytes:,} B")
    act, weight_reads, writes, macs = int(act), int(weight_reads), int(writes), int(macs)
    dram = (act + weight_reads + writes) * d
    return GroupCost(
        scheme=Scheme.BRR, ops=ops, buffer_bytes=int(buffer_elems) * d,
        weight_buffer_bytes=weight_buffer * d, dram_act_read=act * d,
        dram_weight_read=weight_reads * d, dram_write=writes * d, macs=macs, fits=fits,
        reason=reason,
        timing=timing(dram, int(traffic) * d + dram, macs, hw, int(cycles) if fits else 0,
                      weight_traffic_bytes(graph, ops, hw, weight_reads * d)),
        tiles=int(tiles), weights_streamed=bool(streamed.any()),
        failure=failure, resident_weight_bytes=resident_elems * d,
        weight_slices=slices_of)


def _as_group_cost(graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig,
                   t: TileCost, write_elems: int, failure: Failure | None,
                   reason: str, layout: _Layout | None = None, *, traffic: int | None = None,
                   cycles: int | None = None) -> GroupCost:
    """The `GroupCost` of configuration `t` (`traffic`: the group's buffer accesses, and
    `cycles`: its schedule's, when the caller has them)."""
    d = hw.dtype_bytes
    dram = (t.act_read_elems + t.weight_read_elems + write_elems) * d
    if traffic is None:
        traffic = buffer_traffic_elems(graph, ops)
    if cycles is None and failure is None:
        cycles = schedule_cycles(graph, ops, t, hw, layout)
    buf = traffic * d + dram
    return GroupCost(
        scheme=Scheme.BRR, ops=ops, buffer_bytes=t.buffer_elems * d,
        weight_buffer_bytes=t.weight_buffer_elems * d, dram_act_read=t.act_read_elems * d,
        dram_weight_read=t.weight_read_elems * d, dram_write=write_elems * d, macs=t.macs,
        fits=failure is None, reason=reason,
        timing=timing(dram, buf, t.macs, hw, cycles if failure is None else 0,
                      weight_traffic_bytes(graph, ops, hw, t.weight_read_elems * d)),
        tiles=t.tiles, weights_streamed=t.streamed, failure=failure,
        resident_weight_bytes=t.resident_elems * d,
        weight_slices=tuple((w.op, w.split, w.slices) for w in t.weights if not w.resident),
    )


def schedule_cycles(graph: ComputeGraph, ops: tuple[int, ...], tiling: TileCost,
                    hw: HardwareConfig, layout: _Layout | None = None,
                    rows: np.ndarray | None = None) -> int:
    """Cycles of the group `ops` (ascending) at the configuration `tiling`
    (`simulator.cost.cycles.brr_cycles`), from its layout and tile regions when the caller
    has them (rows: tensors x the tiles of ``tiling.tiles``)."""
    if layout is None:
        layout = _Layout(graph, ops, row_deps(graph))
    if rows is None:
        rows = _Bands(layout, (tiling.tiles,)).rows
    d, bw = hw.dtype_bytes, hw.dram_bandwidth
    n, n_ent = len(ops), layout.n_entering
    kind = np.zeros(n, dtype=np.int64)
    slices, chans, elems, x = (np.zeros(n, dtype=np.int64) for _ in range(4))
    sliced_input = np.zeros(n_ent, dtype=np.bool_)
    resident_first, resident_cycles = -1, 0
    weighted = layout.weighted
    for w, plan in zip(weighted, tiling.weights, strict=True):
        p = w.pos
        if plan.resident:
            kind[p] = 1
            resident_cycles += math.ceil(plan.slice_elems * d / bw)
            if resident_first < 0:
                resident_first = p
            continue
        op = graph[w.op]
        kind[p] = 3 if plan.split == "in" else 2
        slices[p], elems[p] = plan.slices, op.weight_reads
        chans[p] = channels(op.input_shapes[0] if plan.split == "in" else op.output_shape)
        x[p] = layout.index[op.inputs[0]]
        if plan.split == "in" and x[p] < n_ent:
            sliced_input[x[p]] = True
    t = layout.tables
    leaves = np.zeros(n, dtype=np.bool_)
    leaves[layout.leaving_rows - n_ent] = True
    return int(_k.cycles(rows, n_ent, layout.born, layout.heights, layout.row_elems,
                         sliced_input, t.macs[layout.op_array], leaves, kind, slices, chans,
                         elems, x, resident_first, resident_cycles, d, float(bw),
                         hw.macs_per_cycle, hw.dram_latency))


def chosen_tiling(graph: ComputeGraph, ops: Sequence[int],
                  hw: HardwareConfig) -> TileCost | None:
    """The configuration `group_cost` picks for the group (None if BRR cannot tile it)."""
    ops = tuple(sorted(ops))
    if incompatibility(graph, ops):
        return None
    layout = _Layout(graph, ops, row_deps(graph), accumulator_elems(hw.dtype_bytes))
    if hw.is_split:
        return _search_split(layout, _split_caps(hw))[0]
    return _search(layout, hw.buffer_bytes // hw.dtype_bytes)[0]


def tile_cost(graph: ComputeGraph, ops: Sequence[int], tiles: int, hw: HardwareConfig,
              resident: Sequence[int] | None = None) -> TileCost:
    """The configuration of `ops` at `tiles` tiles on `hw`'s buffer.

    Args:
        graph, ops, hw: The group and the machine.
        tiles: T, in [1, the tallest tensor of the group].
        resident: The ops whose weights stay resident; None: the model's choice
            (`_residency`: none at T = 1, else the most resident weights that fit). Every
            other op with weights is streamed in the fewest slices that fit, or in its finest
            slices when the configuration does not fit (then ``buffer_elems`` exceeds the
            buffer).
    """
    ops = tuple(sorted(ops))
    layout = _Layout(graph, ops, row_deps(graph), accumulator_elems(hw.dtype_bytes))
    limit = hw.buffer_bytes // hw.dtype_bytes
    block = _blocks(layout, (tiles,))[tiles]
    mask = None if resident is None else [w.op in set(resident) for w in layout.weighted]
    if hw.is_split:
        return _configure_split(block, _split_caps(hw), mask)[0]
    return _configure(block, limit, mask)


def tile_regions(graph: ComputeGraph, ops: Sequence[int], tiles: int) -> TileRegions:
    """The rows of every tensor each of `tiles` tiles needs."""
    return TileRegions(graph, tuple(sorted(ops)), row_deps(graph), tiles)


def position_needs(graph: ComputeGraph, ops: Sequence[int], tiling: TileCost) -> np.ndarray:
    """Elements held at each op position (rows, op id order) in each tile (columns) of the
    configuration `tiling`, at the op's largest slice: live activations (an input-sliced op's
    input slice and partial sums instead of its whole input and output), the row allowances,
    the resident weights and, for a streamed op, its largest slice. Its maximum is
    ``tiling.buffer_elems``."""
    ops = tuple(sorted(ops))
    layout = _Layout(graph, ops, row_deps(graph), tiling.accumulator)
    block = _blocks(layout, (tiling.tiles,))[tiling.tiles]
    need = block.live + layout.allowance + tiling.resident_elems
    for k, w in enumerate(layout.weighted):
        plan = tiling.of(w.op)
        if plan is None or plan.resident:
            continue
        if plan.split == "in":
            base, per = block.sliced(k)
            need[w.pos] = base + plan.chunk * per + tiling.resident_elems
        need[w.pos] += plan.slice_elems
    return need


def _search(layout: _Layout, limit: int) -> tuple[TileCost, _Block]:
    """The fitting configuration of least F_D (ties: fewer tiles), else the least demanding.

    Tile counts: 1, the powers of two below the tallest height T_max, T_max; then, if the
    smallest fitting count c among them is not 1, bisection between the count before it and
    c (assuming the requirement does not grow with T there) towards the smallest fitting one.
    F_D is compared over every fitting count evaluated. T = 1 reads everything once, so when
    it fits nothing is cheaper (checked first on whole tensors, a T = 1 tile's upper bound).
    Returns the configuration and its block."""
    if _whole_least(layout) <= limit:  # one tile holding whole tensors fits, so does T = 1
        one = _blocks(layout, (1,))[1]
        return _configure(one, limit), one
    tmax = int(layout.heights.max())
    first = tuple(sorted({1, tmax, *(1 << k for k in range(tmax.bit_length()))}))
    blocks = _blocks(layout, first)
    fitting = [t for t in first if blocks[t].least <= limit]
    if not fitting:  # report the least demanding count
        least = min(blocks.values(), key=lambda b: (b.least, b.tiles))
        return _configure(least, limit), least
    if fitting[0] > 1:
        lo, hi = max(t for t in first if t < fitting[0]), fitting[0]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            blocks.update(_blocks(layout, (mid,)))
            lo, hi = (lo, mid) if blocks[mid].least <= limit else (mid, hi)
    # F_D >= act + W + (T - 1) (W - what can be resident next to the least held position):
    # counts whose floor cannot beat the best found are not configured
    weights = layout.weight_sum
    floors = []
    for t, b in blocks.items():
        if b.least <= limit:
            room = limit - max([b.floor, *map(min, b.held_w, b.finest)])
            floors.append((b.act + weights + (t - 1) * max(weights - room, 0), t))
    best, best_key = None, None
    for floor, t in sorted(floors):
        if best_key is not None and (floor, t) > best_key:
            break
        b = blocks[t]
        resident = _residency(b, limit)
        key = (b.act + b.weight_reads(resident), t)
        if best_key is None or key < best_key:
            best, best_key = (b, resident), key
    assert best is not None
    return _configure(best[0], limit, best[1]), best[0]


_RESIDENCY_NODES = 512
"""Branch-and-bound nodes `_residency` explores at most (then it keeps the best found)."""


def _residency(b: _Block, limit: int) -> list[bool]:
    """Which ops keep their weights resident at b's tile count (fitting), maximising the
    resident weights (F_D = ... + resident + T x streamed): none at T = 1 (one tile reads every
    weight once anyway). Else a depth-first branch and bound over the ops by decreasing
    weights (ties: lower id), resident before streamed, a configuration fitting when the
    resident weights plus the most any position holds (a resident op's activations, a
    streamed op's with its finest slice, the ops without weights') fit, from the incumbent of
    `_first_fit`; exact unless `_RESIDENCY_NODES` nodes do not suffice (then the best found;
    docs/cost-model.md 4.2 has the measured gaps)."""
    k = len(b.layout.weighted)
    if b.tiles == 1 or not k:
        return [False] * k
    elems, held, finest = b.layout.w_elems, b.held_w, b.finest
    order = sorted(range(k), key=lambda i: (-elems[i], i))
    w = [elems[i] for i in order]
    h = [held[i] for i in order]
    f = [finest[i] for i in order]
    rest_w, rest_f, rest_min = [0] * (k + 1), [0] * (k + 1), [0] * (k + 1)
    for i in range(k - 1, -1, -1):
        rest_w[i] = rest_w[i + 1] + w[i]
        rest_f[i] = max(rest_f[i + 1], f[i])
        rest_min[i] = max(rest_min[i + 1], min(h[i], f[i]))
    best_w, best = _first_fit(w, h, f, b.floor, limit)
    stack = [(0, 0, b.floor, 0, 0)]  # next op, resident weights, max held, max finest, mask
    nodes = 0
    while stack and nodes < _RESIDENCY_NODES:
        i, total, top_h, top_f, mask = stack.pop()
        nodes += 1
        least = max(top_h, top_f, rest_min[i])  # any completion holds this much at least
        if total + least > limit or min(total + rest_w[i], limit - least) <= best_w:
            continue  # no completion fits, or none beats the best
        if total > best_w and total + max(top_h, top_f, rest_f[i]) <= limit:
            best_w, best = total, mask  # the rest streamed fits
        if i < k:
            stack.append((i + 1, total, top_h, max(top_f, f[i]), mask))
            stack.append((i + 1, total + w[i], max(top_h, h[i]), top_f, mask | 1 << i))
    resident = [False] * k
    for j in range(k):
        if best >> j & 1:
            resident[order[j]] = True
    return resident


def _first_fit(w: list[int], h: list[int], f: list[int], floor: int,
               limit: int) -> tuple[int, int]:
    """The branch and bound's first incumbent: for each bound V on what a position may hold
    (ascending from the least possible, while the buffer less V could beat the best), the ops
    needing more than V streamed are resident, those needing more than V resident are
    streamed, and the others fill the room left (`_fill`). `w`, `h`, `f` by decreasing
    weights. Returns (resident weights, bit mask over that order)."""
    v0 = max([floor, *map(min, h, f)])
    best_w, best = -1, 0
    for v in sorted({v0, *(x for x in (*h, *f) if x > v0)}):
        if limit - v <= best_w:
            break
        total, mask, free = 0, 0, []
        for i, (hi, fi) in enumerate(zip(h, f, strict=True)):
            if fi > v:  # must be resident (hi <= v0 <= v: min(hi, fi) <= v0)
                total += w[i]
                mask |= 1 << i
            elif hi <= v:
                free.append(i)
        room = limit - v - total
        if room < 0:
            continue
        added, chosen = _fill([w[i] for i in free], room)
        if total + added > best_w:
            best_w = total + added
            best = mask | sum(1 << free[j] for j in chosen)
    return best_w, best


_FILL_STEPS = 4096
"""Resolution of `_fill`'s subset-sum table (units of the room)."""


def _fill(w: list[int], room: int) -> tuple[int, list[int]]:
    """A subset of the weights `w` (decreasing) of large sum within `room`: an exact
    subset-sum over weights rounded up to room / `_FILL_STEPS` units (a bit set per item, so
    the sum stays within the room and falls short of the best by less than a unit per item),
    then the unused weights added first-fit. Returns (sum, indices)."""
    unit = max(1, -(-room // _FILL_STEPS))
    cap = room // unit
    scaled = [-(-x // unit) for x in w]
    full = (1 << (cap + 1)) - 1
    reach, history = 1, []
    for x in scaled:
        history.append(reach)
        if x <= cap:
            reach |= (reach << x) & full
    target = reach.bit_length() - 1
    chosen = []
    for i in range(len(w) - 1, -1, -1):
        if not history[i] >> target & 1:  # not reachable without item i: it is used
            chosen.append(i)
            target -= scaled[i]
    total = sum(w[i] for i in chosen)
    used = set(chosen)
    for i, x in enumerate(w):
        if i not in used and total + x <= room:
            total += x
            chosen.append(i)
    return total, chosen


def _configure(b: _Block, limit: int, resident: list[bool] | None = None) -> TileCost:
    """The configuration of block `b` with the given residency (None: `_residency` if the
    block fits, else none): streamed ops in the fewest slices that fit, or in their finest
    slices when the configuration does not fit."""
    layout = b.layout
    if resident is None:
        resident = _residency(b, limit) if b.least <= limit else [False] * len(layout.weighted)
    total = sum(e for e, r in zip(layout.w_elems, resident, strict=True) if r)
    fits = total + max([b.floor, *(b.held_w[i] if r else b.finest[i]
                                   for i, r in enumerate(resident))]) <= limit
    peak = b.floor
    plans = []
    for i, w in enumerate(layout.weighted):
        if resident[i]:
            plans.append(OpWeights(w.op, True, "out", 1, w.out_channels, w.elems))
            peak = max(peak, b.held_w[i])
            continue
        plan, need = _slices(b, i, limit - total) if fits else _finest(b, i)
        plans.append(plan)
        peak = max(peak, need)
    streamed = sum(e for e, r in zip(layout.w_elems, resident, strict=True) if not r)
    return TileCost(b.tiles, streamed > 0, total + peak, b.act, total + b.tiles * streamed,
                    b.macs, tuple(plans), layout.allowance, layout.acc)


def _finest(b: _Block, i: int) -> tuple[OpWeights, int]:
    """Op i streamed in one-channel slices of the split that needs less (ties: output)."""
    w = b.layout.weighted[i]
    out = b.held_w[i] + w.first_out
    if w.in_channels and b.sliced_finest[i] < out:
        return OpWeights(w.op, False, "in", w.in_channels, 1, w.first_in), b.sliced_finest[i]
    return OpWeights(w.op, False, "out", w.out_channels, 1, w.first_out), out


def _fewest_slices(b: _Block, i: int, out_room: int | None,
                   in_fits: Callable[[int], bool]) -> OpWeights:
    """Op i streamed in the fewest slices (ties to output-channel slices): output-channel
    slices of at most `out_room` weight elements (None: not allowed), or input-channel slices
    of the most channels c with `in_fits(c)` (fitting is monotone in c)."""
    w = b.layout.weighted[i]
    best: tuple[int, str, int] | None = None  # (slices, split, chunk)
    c = _largest_chunk(out_room, w.elems, w.out_channels) if out_room is not None else 0
    if c:
        s = -(-w.out_channels // c)
        best = (s, "out", -(-w.out_channels // s))
    if w.in_channels and in_fits(1):
        lo, hi = 1, w.in_channels  # in_fits(lo) holds, find the largest c
        while hi > lo:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if in_fits(mid) else (lo, mid - 1)
        s = -(-w.in_channels // lo)
        if best is None or s < best[0]:
            best = (s, "in", -(-w.in_channels // s))
    assert best is not None, "a fitting configuration streams every op in some slices"
    s, split, chunk = best
    chans = w.out_channels if split == "out" else w.in_channels
    return OpWeights(w.op, False, split, s, chunk, slice_elems(w.elems, chans, 0, chunk))


def _input_sliced(b: _Block, i: int) -> Callable[[int], int]:
    """Op i's position held input-sliced, by the channels c of a slice: the activations
    (its input slice, partial sums and the rest), at the tile that holds most."""
    base, per = b.sliced(i) if b.layout.weighted[i].in_channels else (None, None)
    return lambda c: int((base + c * per).max())


def _slices(b: _Block, i: int, budget: int) -> tuple[OpWeights, int]:
    """Op i streamed in the fewest slices whose largest fits `budget` (the buffer less the
    resident weights) next to what its position holds; ties to output-channel slices."""
    w = b.layout.weighted[i]
    acts = _input_sliced(b, i)
    plan = _fewest_slices(
        b, i, budget - int(b.held_w[i]),
        lambda c: acts(c) + slice_elems(w.elems, w.in_channels, 0, c) <= budget)
    held = int(b.held_w[i]) if plan.split == "out" else acts(plan.chunk)
    return plan, held + plan.slice_elems


# --- split buffers: weights in one buffer, activations in the other ---------------------------


def _split_caps(hw: HardwareConfig) -> tuple[int, int]:
    """(weight buffer, activation buffer) in elements."""
    return hw.weight_capacity // hw.dtype_bytes, hw.activation_capacity // hw.dtype_bytes


def _split_cost(graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig,
                incompatible: str) -> GroupCost:
    """`group_cost` with split buffers (docs/cost-model.md 4.2, "Split buffers"): the same
    configurations (tile count, residency, slices), each op position's weights (the resident
    ones and its own slice) held in the weight buffer and its activations in the activation
    buffer. F_beta is the weight buffer's peak plus the activation buffer's."""
    layout = _Layout(graph, ops, row_deps(graph), accumulator_elems(hw.dtype_bytes))
    caps = _split_caps(hw)
    if incompatible:
        one = _blocks(layout, (1,))[1]
        t = _configure_split(one, caps)[0]
        return _as_group_cost(graph, ops, hw, t, layout.write_elems,
                              Failure.BRR_INCOMPATIBLE, incompatible, layout)
    t, fits = _search_split(layout, caps)
    d, reason = hw.dtype_bytes, ""
    if not fits:
        w = t.weight_buffer_elems
        reason = (f"needs {w * d:,} B of weights (weight buffer {hw.weight_capacity:,} B) "
                  f"and {(t.buffer_elems - w) * d:,} B of activations (activation buffer "
                  f"{hw.activation_capacity:,} B) at best ({t.tiles} tiles, every weight "
                  "streamed in its finest slices)")
    return _as_group_cost(graph, ops, hw, t, layout.write_elems,
                          None if fits else Failure.OVER_BUFFER, reason, layout)


def _search_split(layout: _Layout, caps: tuple[int, int]) -> tuple[TileCost, bool]:
    """`_search` with split buffers: of the tile counts 1, the powers of two below the
    tallest height and that height (then a bisection towards the fewest that fit, as in
    `_search`), the fitting configuration of least F_D (ties: fewer tiles), else the least
    demanding one (not fitting). Returns it and whether it fits."""
    tmax = int(layout.heights.max())
    counts = tuple(sorted({1, tmax, *(1 << k for k in range(tmax.bit_length()))}))
    blocks = _blocks(layout, counts)
    fitting = [t for t in counts if _split_least(blocks[t], caps) is not None]
    if not fitting:
        least = min(blocks.values(), key=lambda b: (b.least, b.tiles))
        return _configure_split(least, caps)
    if fitting[0] > 1:
        lo, hi = max(t for t in counts if t < fitting[0]), fitting[0]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            blocks.update(_blocks(layout, (mid,)))
            fits = _split_least(blocks[mid], caps) is not None
            lo, hi = (lo, mid) if fits else (mid, hi)
            if fits:
                fitting.append(mid)
    best, best_key = None, None
    for t in sorted(fitting):
        config, fits = _configure_split(blocks[t], caps)
        key = (config.act_read_elems + config.weight_read_elems, t)
        if fits and (best_key is None or key < best_key):
            best, best_key = config, key
    assert best is not None
    return best, True


def _split_least(b: _Block, caps: tuple[int, int]) -> list[int] | None:
    """Per op with weights, the fewest weight elements it can stream with at block b (its
    finest slice of a split whose activations fit the activation buffer); None when the
    block cannot fit at all."""
    w_cap, a_cap = caps
    if b.floor > a_cap:
        return None
    least = []
    for i, w in enumerate(b.layout.weighted):
        options = [w.first_out] if b.held_w[i] <= a_cap else []
        if w.in_channels:
            base, per = b.sliced(i)
            if int((base + per).max()) <= a_cap:
                options.append(w.first_in)
        if not options:
            return None
        least.append(min(options))
    return least if max(least, default=0) <= w_cap else None


def _residency_split(b: _Block, least: list[int], caps: tuple[int, int]) -> list[bool]:
    """Which ops keep their weights resident at b's tile count with split buffers: none at
    T = 1; else, for each bound V on the largest streamed slice (0 and every op's least
    slice), the ops whose least slice exceeds V resident, and the others whose activations
    fit next to their whole weights filling the weight buffer less V (`_fill`); the most
    resident weights over the bounds."""
    k = len(b.layout.weighted)
    if b.tiles == 1 or not k:
        return [False] * k
    w_cap, a_cap = caps
    elems = b.layout.w_elems
    eligible = [b.held_w[i] <= a_cap for i in range(k)]
    best_total, best = -1, [False] * k
    for v in sorted({0, *least}):
        forced = [i for i in range(k) if least[i] > v]
        total = sum(elems[i] for i in forced)
        if not all(eligible[i] for i in forced) or total + v > w_cap:
            continue
        free = sorted((i for i in range(k) if least[i] <= v and eligible[i]),
                      key=lambda i: (-elems[i], i))
        added, chosen = _fill([elems[i] for i in free], w_cap - v - total)
        if total + added > best_total:
            best_total = total + added
            best = [False] * k
            for i in [*forced, *(free[j] for j in chosen)]:
                best[i] = True
    return best


def _configure_split(b: _Block, caps: tuple[int, int],
                     resident: list[bool] | None = None) -> tuple[TileCost, bool]:
    """`_configure` with split buffers: streamed ops in the fewest slices whose weights fit
    the weight buffer less the resident weights and whose activations fit the activation
    buffer, or in their finest slices when the configuration does not fit. Returns the
    configuration (``buffer_elems``: the weight peak plus the activation peak) and whether
    it fits."""
    layout = b.layout
    w_cap, a_cap = caps
    least = _split_least(b, caps)
    if resident is None:
        resident = (_residency_split(b, least, caps) if least is not None
                    else [False] * len(layout.weighted))
    total = sum(e for e, r in zip(layout.w_elems, resident, strict=True) if r)
    fits = least is not None and all(
        b.held_w[i] <= a_cap for i, r in enumerate(resident) if r) and total + max(
        (x for x, r in zip(least, resident, strict=True) if not r), default=0) <= w_cap
    w_peak, a_peak, plans = 0, b.floor, []
    for i, w in enumerate(layout.weighted):
        if resident[i]:
            plans.append(OpWeights(w.op, True, "out", 1, w.out_channels, w.elems))
            a_peak = max(a_peak, b.held_w[i])
            continue
        plan, acts = (_slices_split(b, i, w_cap - total, a_cap) if fits
                      else _finest_split(b, i))
        plans.append(plan)
        w_peak, a_peak = max(w_peak, plan.slice_elems), max(a_peak, acts)
    streamed = sum(e for e, r in zip(layout.w_elems, resident, strict=True) if not r)
    return TileCost(b.tiles, streamed > 0, total + w_peak + a_peak, b.act,
                    total + b.tiles * streamed, b.macs, tuple(plans), layout.allowance,
                    layout.acc), fits


def _finest_split(b: _Block, i: int) -> tuple[OpWeights, int]:
    """`_finest` with its activations apart: (plan, activation elements at the position)."""
    plan, need = _finest(b, i)
    return plan, need - plan.slice_elems


def _slices_split(b: _Block, i: int, w_room: int, a_cap: int) -> tuple[OpWeights, int]:
    """Op i streamed in the fewest slices of at most `w_room` weight elements whose
    activations fit `a_cap` (ties: output-channel slices): (plan, activation elements)."""
    w = b.layout.weighted[i]
    acts = _input_sliced(b, i)
    plan = _fewest_slices(
        b, i, w_room if b.held_w[i] <= a_cap else None,
        lambda c: acts(c) <= a_cap and slice_elems(w.elems, w.in_channels, 0, c) <= w_room)
    return plan, int(b.held_w[i]) if plan.split == "out" else acts(plan.chunk)


class _Block:
    """One tile count of a group: its regions, traffic and what each op position holds.

    Attributes:
        rows, live: Rows of every tensor and live activations at every position, per tile.
        act, macs: Entering elements read and MACs over the tiles.
        held_w: Per op with weights (`_Layout.weighted`), the most its position holds in a
            tile, activations and allowances (no weights).
        floor: The same maximum over the positions of the ops without weights.
        finest: Per op with weights, the most its position holds with the op streamed in its
            finest slices (one channel, of the split that needs less).
        sliced_finest: The same input-sliced (output-sliced where the op cannot be).
        least: The requirement with every op streamed in its finest slices, less than any
            other configuration's at this tile count.
    """

    __slots__ = ("act", "finest", "floor", "held_w", "layout", "least", "live", "macs", "rows",
                 "sliced_finest", "tiles")

    def __init__(self, layout: _Layout, tiles: int, rows: np.ndarray, live: np.ndarray,
                 act: int, macs: int, held_w: list[int], floor: int, finest: list[int],
                 sliced_finest: list[int]) -> None:
        self.layout, self.tiles, self.rows, self.live = layout, tiles, rows, live
        self.act, self.macs, self.held_w, self.floor = act, macs, held_w, floor
        self.finest, self.sliced_finest = finest, sliced_finest
        self.least = max(floor, max(finest, default=0))

    def sliced(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Per tile, what op i's position holds input-sliced, less its input slice (base),
        and the elements of one channel of its input region (per)."""
        return _sliced(self.layout, i, self.rows, self.live)

    def weight_reads(self, resident: list[bool]) -> int:
        """Weight elements read from DRAM with the given residency."""
        elems = self.layout.w_elems
        kept = sum(e for e, r in zip(elems, resident, strict=True) if r)
        return kept + self.tiles * (sum(elems) - kept)


def _whole_least(layout: _Layout) -> int:
    """`_Block.least` of one tile holding every tensor whole: at least T = 1's (a tile's
    region of a tensor is at most all its rows, and what a position holds grows with them)."""
    _, (_, _, floor, _, finest, _) = _summaries(layout, layout.heights[:, None], (1,))
    return max(int(floor[0]), int(finest.max()) if finest.size else 0)


def _sliced(layout: _Layout, i: int, rows: np.ndarray,
            live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w = layout.weighted[i]
    x = rows[w.x] * layout.row_elems[w.x]
    o = rows[w.o] * layout.row_elems[w.o]
    base = live[w.pos] - x + (layout.acc - 1) * o + layout.allowance
    return base, rows[w.x] * w.x_channel_elems


def _summaries(layout: _Layout, rows: np.ndarray, counts: tuple[int, ...]) -> tuple:
    """Live elements of `rows` and their per-count summaries (`_k.block_summaries`)."""
    live = _live(layout, rows)  # (positions, all tiles)
    k, op_macs, h = layout.mac_arrays
    sl_i, sl_x, sl_o, sl_xchan, sl_first_in = layout.sliceable_arrays
    return live, _k.block_summaries(
        rows, live, np.array(counts, dtype=np.int64), layout.n_entering, layout.heights,
        layout.row_elems, layout.allowance, k, op_macs, h, layout.weightless, layout.w_pos,
        layout.w_first_out, sl_i, sl_x, sl_o, sl_xchan, sl_first_in, layout.acc)


def _blocks(layout: _Layout, counts: tuple[int, ...],
            rows: np.ndarray | None = None) -> dict[int, _Block]:
    """The `_Block` of several tile counts, from one propagation over all their tiles (or
    from the given `rows` of every tensor in every tile)."""
    if rows is None:
        rows = _Bands(layout, counts).rows
    live, (act, macs, floor, held_w, finest, sliced) = _summaries(layout, rows, counts)
    held_t, finest_t, sliced_t = held_w.T.tolist(), finest.T.tolist(), sliced.T.tolist()
    act, macs, floor = act.tolist(), macs.tolist(), floor.tolist()
    out, start = {}, 0
    for c, tiles in enumerate(counts):
        cols = slice(start, start + tiles)
        start += tiles
        out[tiles] = _Block(layout, tiles, rows[:, cols], live[:, cols], act[c], macs[c],
                            held_t[c], floor[c], finest_t[c], sliced_t[c])
    return out


def dram_lower_bound(graph: ComputeGraph, ops: Sequence[int], hw: HardwareConfig) -> int | None:
    """A lower bound of the group's F_D if it fits the buffer; None if it cannot fit.

    Far cheaper than `group_cost` (no tile regions: one pass over the group's ops, vectorised
    over every tile count). Proof (docs/exact.md, "The BRR fit bound"): at T tiles every tile
    holds at least ``floor(H/T)`` rows of each leaving tensor of height H (its band), and an op
    whose tile needs r rows makes the tile need at least ``min_a(hi[a+r-1] - lo[a] + 1)`` rows
    of each input (a global pooling with a network output downstream, `_useful`:
    ``floor(h/T)`` of its input); these per-tile row counts L_T bound the live activations at
    each op position in every tile (an input-sliced op: one channel of its input region and
    its output as partial sums instead), to which the row allowances, at least the op's
    finest slice of weights and the resident weights add. So a configuration at T fits only if
    every position's floor does, its resident weights are at most the buffer less the largest
    activation floor, and its F_D is at least the entering tensors' ``max(T L_T, H)`` rows,
    the writes, the weights once and the weights that cannot be resident T - 1 more times.
    """
    ops = tuple(sorted(ops))
    if incompatibility(graph, ops):
        return None
    t = _k.graph_tables(graph)
    c_out, first_out, chans, first_in, x_chan, x_node = t.weight_arrays
    dram = _k.bound(np.array(ops, dtype=np.int64), t.n_in, t.in_ptr, t.in_node, t.succ_ptr,
                    t.succ, t.output, t.pool, t.height, t.row_elems, t.tab_off, t.win, t.useful,
                    t.macs, t.weights, c_out, first_out, chans, first_in, x_chan, x_node,
                    t.output_elems, accumulator_elems(hw.dtype_bytes),
                    hw.buffer_bytes // hw.dtype_bytes)
    return None if dram < 0 else int(dram) * hw.dtype_bytes


@dataclass(frozen=True)
class FitFloors:
    """Per-op floors of every BRR group holding the op, on one graph and buffer.

    Attributes:
        tiles: Per op, the fewest tiles with which such a group can fit (0: with none, so no
            group holding the op fits).
        resident_elems: Per op, the fewest activation elements some tile holds at its
            position at any tile count (what resident weights share the buffer with, at
            least).
        streamed_elems: Per op, the fewest weight elements of its own that such a group
            re-reads beyond reading them once: the least, over the tile counts T at which it
            may fit, of max(0, W(o) + act_T(o) - buffer, W(o) - weight buffer) x (T - 1)
            (`search.exact.lazy.streaming_floors`).
    """

    tiles: tuple[int, ...]
    resident_elems: tuple[int, ...]
    streamed_elems: tuple[int, ...] = ()


@lru_cache(maxsize=16)
def fit_floors(graph: ComputeGraph, hw: HardwareConfig) -> FitFloors:
    """The `FitFloors` of `graph` on `hw` (docs/exact.md, "The BRR fit bound"); memoised
    (every search of one instance asks for them).

    Proof sketch: in every BRR group S holding op o and for every tile count T, some tile
    needs at least M_T(o) rows of o's tensor (`_most_rows_any`) and ``win(M_T(o))`` of each
    of o's inputs (`_op_activations`), all held at o's position with at least one output
    channel's slice of o's weights; or, o input-sliced (its input entering, so with its row
    in flight), one channel of its input region, its output as partial sums and one input
    channel's slice. On top of either, the row allowances and tensors S's boundary forces
    next to o (`_boundary_floors`, Lemma 5), and, where that does not let o fit at T, the
    rows each tile needs at their places (`_placed_floors`, Lemma 6). So a fitting
    configuration has T >= tiles[o] for every o of S, and its resident weights are at most
    the buffer less act_T(o) >= resident_elems[o]; the weights that cannot be resident are
    re-read by each of the T - 1 extra tiles.
    """
    act, need = fit_arrays(graph, hw)
    limit = hw.buffer_bytes // hw.dtype_bytes
    fits = need <= limit
    first = np.where(fits.any(axis=1), fits.argmax(axis=1) + 1, 0)
    weights = np.array([op.weight_reads for op in graph], dtype=np.int64)[:, None]
    over = np.maximum(weights + act - limit, 0)
    if hw.is_split:  # resident weights also fit the weight buffer alone
        over = np.maximum(over, weights - hw.weight_capacity // hw.dtype_bytes)
    extra = over * np.arange(act.shape[1], dtype=np.int64)[None, :]  # x (T - 1)
    streamed = np.where(fits, extra, 0).max(axis=1)  # an op that fits nowhere: 0
    streamed = np.where(fits, extra, streamed[:, None]).min(axis=1)
    return FitFloors(tuple(int(t) for t in first), tuple(int(x) for x in act.min(axis=1)),
                     tuple(int(x) for x in streamed))


def fit_arrays(graph: ComputeGraph, hw: HardwareConfig) -> tuple[np.ndarray, np.ndarray]:
    """(act, need)[o, T-1]: the activation elements, and the activation plus weight elements,
    that some tile of T tiles holds at least at o's position in every group holding o that
    fits at T (`fit_floors` reads its floors from them): `_op_floors` raised by
    `_boundary_floors` and `_placed_floors`."""
    act, need, up, ok = _boundary_floors(graph, hw)
    _placed_floors(graph, hw, act, need, up, ok)
    return act, need


BOUNDARY_ROUNDS = 4
"""Rounds of `_boundary_floors`: each round's tile floors decide which ops the next may
leave out of a group that fits."""


def _allowance(deps: RowDeps, ref: int) -> int:
    """R(t): the row allowance of tensor `ref` entering or leaving a group (one row, if it
    has more than one)."""
    return deps.row_elems_of[ref] if deps.height_of[ref] > 1 else 0


def _boundary_floors(graph: ComputeGraph, hw: HardwareConfig
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(act, need, up, ok)[o, T-1]: `_op_floors` with what the group's boundary adds next to
    o in every group S holding o that fits at T (docs/exact.md, Lemma 5); up is U_T(o) below
    and ok whether o may be in a group that fits at T (its need within the buffer). An op
    that cannot fit at T is outside every such S, so:

    * upstream, U_T(o) = the largest over o's inputs x of V_T(x), where V_T(x) = R(x) (the row
      allowance of an entering tensor: one row if it has more than one) when x is a network
      input or its producer p cannot fit at T, else min(R(x), U_T(p)): x enters S, or p is in
      S and its own inputs' terms hold (every term counts an entering tensor read by o or an
      ancestor of o, held throughout every tile);
    * downstream, D_T(o) = R(o) when o's tensor leaves S (a network output, or a reader cannot
      fit at T), else the smaller of R(o) and, for the reader c that makes o's row floor
      (`_most_rows_any`, the smallest over ties), the sum over c's other inputs y that no
      op of o's ancestors (o included) reads: R(y) when y's producer comes before o (y held at
      o's position, or entering with its row in flight) or y must enter (a network input, a
      producer that cannot fit), else 0. In the tile where c needs its rows, c reads rows of
      every y.

    act gains U + D with o's whole input, D input-sliced (that form's entering input already
    holds its row in flight); need the same. Both are then made non-increasing in T (the least
    over every smaller T, at most the floor at T), and the tile floors recomputed,
    BOUNDARY_ROUNDS times at most."""
    acc = accumulator_elems(hw.dtype_bytes)
    deps = row_deps(graph)
    most = _most_rows_any(graph)
    n, tallest = most.shape
    tiles = np.arange(1, tallest + 1, dtype=np.int64)
    whole, w_need, s_act, s_need = _op_forms(graph, acc)
    act, need = (a.copy() for a in _op_floors(graph, acc))  # raised in place after (cached)
    limit = hw.buffer_bytes // hw.dtype_bytes
    above = _read_above(graph)
    rows_of = {(c, o): _read_by(graph, c, o, most[c], tiles) for o in range(n)
               for c in graph.successors(o)}
    up = np.zeros((n, tallest), dtype=np.int64)
    for _ in range(BOUNDARY_ROUNDS):
        ok = need <= limit
        up = np.zeros((n, tallest), dtype=np.int64)
        entering: dict[int, np.ndarray] = {}  # V_T of each tensor
        for op in graph:
            o = op.id
            for ref in dict.fromkeys(op.inputs):
                if ref not in entering:  # a network input
                    entering[ref] = np.full(tallest, _allowance(deps, ref), dtype=np.int64)
                np.maximum(up[o], entering[ref], out=up[o])
            r = _allowance(deps, o)
            entering[o] = np.where(ok[o], np.minimum(r, up[o]), r)
        down = np.zeros((n, tallest), dtype=np.int64)
        for op in graph:
            o, r = op.id, _allowance(deps, op.id)
            cs = graph.successors(o)
            if o in graph.output_set:
                down[o] = r
                continue
            if not cs or not r:
                continue
            reads = np.array([rows_of[(c, o)] for c in cs])
            top = reads.max(axis=0)
            side = np.full(tallest, r, dtype=np.int64)
            for k, c in enumerate(cs):
                held = np.zeros(tallest, dtype=np.int64)
                for y in dict.fromkeys(graph[c].inputs):
                    if y == o or y in above[o]:
                        continue
                    if 0 <= y < o:
                        held += _allowance(deps, y)
                    else:
                        held += np.where(ok[y] if y >= 0 else False, 0, _allowance(deps, y))
                side = np.where((reads[k] == top) & (top > 0), np.minimum(side, held), side)
            side = np.where(top > 0, side, 0)
            down[o] = np.where(~ok[list(cs)].all(axis=0), r, side)
        new_act = np.minimum.accumulate(np.minimum(whole + up + down, s_act + down), axis=1)
        new_need = np.minimum.accumulate(np.minimum(w_need + up + down, s_need + down), axis=1)
        new_act, new_need = np.maximum(act, new_act), np.maximum(need, new_need)
        if (new_need == need).all() and (new_act == act).all():
            break
        act, need = new_act, new_need
    return act, need, up, need <= limit


@lru_cache(maxsize=8)
def _read_above(graph: ComputeGraph) -> tuple[frozenset[int], ...]:
    """Per op o, the tensors that o or an ancestor of o reads."""
    above: list[frozenset[int]] = []
    for op in graph:
        mine = set(op.inputs)
        for ref in op.inputs:
            if ref >= 0:
                mine |= above[ref]
        above.append(frozenset(mine))
    return tuple(above)


PLACED_SCAN = (2, 6, 16)
"""The tile counts `_placed_floors` tries per op, from its first fitting one: the first 2,
then up to 6, then up to 16, each round for the ops the rounds before left unable to fit (a
count it does not try keeps the other floors: each is a floor on its own)."""


def _placed_floors(graph: ComputeGraph, hw: HardwareConfig, act: np.ndarray,
                   need: np.ndarray, up: np.ndarray, ok: np.ndarray) -> None:
    """Raise `act` and `need` (in place) with the rows every tile needs at their places
    (docs/exact.md, Lemma 6), at each op's tile counts from its first fitting one
    (PLACED_SCAN).

    Tile j of T needs, in every group S holding o, at least the rows I_j(o) of o's tensor:
    band j, [jH/T, (j+1)H/T), if o is a network output; else band j intersected with the hull
    of what o's readers' rows I_j(c) read of it (a useful global pooling: its input's band j),
    as o's tensor either leaves S (the tile needs its band) or every reader is in S (the tile
    needs what they read; the propagation only widens). At o's position that tile holds those
    rows of o, the input rows they read, U_T(o), and D_j: R(o) if o's tensor must leave, else
    the least of R(o) and the sum over the other inputs y of o's readers (no ancestor of o
    reading them) of R(y) where y must enter, or y comes before o and a reader of o reading y
    needs rows of tile j (y held at o's position, or its row in flight). The floor is the
    largest over the tiles with o's whole input, and the same input-sliced, the smaller of
    the two."""
    limit = hw.buffer_bytes // hw.dtype_bytes
    first = np.where(ok.any(axis=1), ok.argmax(axis=1) + 1, 0)
    tallest = act.shape[1]
    deps = row_deps(graph)

    def most_at_one(op: Op) -> int:
        """What o's position may hold at most in one tile: every row of its tensor and
        inputs, U_1 and R(o), and its whole weights (the placed floor cannot exceed it)."""
        elems = deps.height_of[op.id] * deps.row_elems_of[op.id] + sum(
            deps.height_of[x] * deps.row_elems_of[x] for x in set(op.inputs))
        return elems + int(up[op.id, 0]) + _allowance(deps, op.id) + op.weight_reads

    # at one tile no weight is re-read, so the floor matters there only if it may not fit
    left = [op.id for op in graph if first[op.id] and op.kind is not OpKind.GLOBAL_POOL
            and (first[op.id] > 1 or most_at_one(op) > limit)]
    acc = accumulator_elems(hw.dtype_bytes)
    done = 0
    for upto in PLACED_SCAN:
        todo = {o: range(int(first[o]) + done, min(int(first[o]) + upto, tallest + 1))
                for o in left}
        todo = {o: ts for o, ts in todo.items() if len(ts)}
        counts = sorted({t for ts in todo.values() for t in ts})
        if not counts:
            return
        cols = _Columns(counts)
        rows = _tile_rows(graph, cols)
        left = []
        for o, ts in todo.items():
            a, nd = _placed_at(graph, deps, acc, o, cols, rows, ts, up[o], ok)
            at = np.arange(ts.start - 1, ts.stop - 1)
            act[o, at] = np.maximum(act[o, at], a)
            need[o, at] = np.maximum(need[o, at], nd)
            if (need[o, at] > limit).all():
                left.append(o)
        done = upto


class _Columns:
    """The tiles of several tile counts side by side: column k is tile jj[k] of tt[k] tiles;
    the tiles of count T are the columns start[T] .. start[T] + T - 1."""

    def __init__(self, counts: Sequence[int]) -> None:
        self.tt = np.repeat(np.array(counts, dtype=np.int64), counts)
        self.start: dict[int, int] = {}
        at = 0
        for t in counts:
            self.start[t] = at
            at += t
        self.jj = np.arange(at, dtype=np.int64) - np.repeat(
            np.array([self.start[t] for t in counts], dtype=np.int64), counts)

    def band(self, h: int) -> tuple[np.ndarray, np.ndarray]:
        """Band j of a tensor of height h in every column: [jh/T, (j+1)h/T)."""
        return (self.jj * h) // self.tt, ((self.jj + 1) * h) // self.tt


def _tile_rows(graph: ComputeGraph, cols: _Columns) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """I_j(o) for every op o and column of `cols` (Lemma 6): (first, end) arrays over the
    columns, the rows [first, end) every group holding o needs of its tensor in that tile
    (empty where first >= end)."""
    deps = row_deps(graph)
    useful = _useful(graph)
    width = len(cols.tt)
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for op in reversed(list(graph)):
        o, h = op.id, deps.height_of[op.id]
        band = cols.band(h)
        if o in graph.output_set:
            out[o] = band
            continue
        if op.kind is OpKind.GLOBAL_POOL:  # one row, in every tile once it is needed
            out[o] = (np.zeros(width, dtype=np.int64),
                      np.full(width, int(o in useful), dtype=np.int64))
            continue
        lo_hull = np.full(width, h, dtype=np.int64)
        hi_hull = np.zeros(width, dtype=np.int64)
        for c in graph.successors(o):
            reader = graph[c]
            if reader.kind is OpKind.GLOBAL_POOL:
                if c in useful:
                    np.minimum(lo_hull, band[0], out=lo_hull)
                    np.maximum(hi_hull, band[1], out=hi_hull)
                continue
            cf, ce = out[c]
            needed = cf < ce
            if not needed.any():
                continue
            hc = deps.height_of[c]
            a = np.clip(cf, 0, hc - 1)
            z = np.clip(ce - 1, 0, hc - 1)
            for slot, ref in enumerate(reader.inputs):
                if ref == o:
                    lo, hi = deps.lo[c][slot], deps.hi[c][slot]
                    lo_hull = np.where(needed, np.minimum(lo_hull, lo[a]), lo_hull)
                    hi_hull = np.where(needed, np.maximum(hi_hull, hi[z] + 1), hi_hull)
        out[o] = (np.maximum(band[0], lo_hull), np.minimum(band[1], hi_hull))
    return out


def _placed_at(graph: ComputeGraph, deps: RowDeps, acc: int, o: int, cols: _Columns,
               rows: dict[int, tuple[np.ndarray, np.ndarray]], ts: range, up: np.ndarray,
               ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(act, need) of op o at the tile counts `ts` from the rows of Lemma 6
    (`_placed_floors`), each the largest over that count's tiles."""
    op = graph[o]
    lo_col = cols.start[ts.start]
    sel = slice(lo_col, cols.start[ts.stop - 1] + ts.stop - 1)
    tt = cols.tt[sel]
    f, e = rows[o][0][sel], rows[o][1][sel]
    needed = f < e
    count = np.where(needed, e - f, 0)
    h = deps.height_of[o]
    a = np.clip(f, 0, h - 1)
    z = np.clip(e - 1, 0, h - 1)
    inputs: dict[int, np.ndarray] = {}
    for slot, ref in enumerate(op.inputs):
        lo, hi = deps.lo[o][slot], deps.hi[o][slot]
        span = np.where(needed, hi[z] - lo[a] + 1, 0)
        inputs[ref] = np.maximum(inputs.get(ref, 0), span)
    # D_j: what the far side of o's tensor holds next to it
    r = _allowance(deps, o)
    readers = graph.successors(o)
    fits_at = ok[:, tt - 1]  # per op, per column: may be in a group that fits at that count
    if o in graph.output_set:
        down = np.full(len(tt), r, dtype=np.int64)
    elif not readers or not r:
        down = np.zeros(len(tt), dtype=np.int64)
    else:
        above = _read_above(graph)[o]
        held = np.zeros(len(tt), dtype=np.int64)
        seen: set[int] = set()
        for c in readers:
            for y in graph[c].inputs:
                if y == o or y in above or y in seen:
                    continue
                seen.add(y)
                ry = _allowance(deps, y)
                enters = np.ones(len(tt), dtype=bool) if y < 0 else ~fits_at[y]
                if 0 <= y < o:  # held while a reader of both needs rows of the tile
                    for c2 in readers:
                        if y in graph[c2].inputs:
                            enters |= rows[c2][0][sel] < rows[c2][1][sel]
                held += np.where(enters, ry, 0)
        leaves = ~fits_at[list(readers)].all(axis=0)
        down = np.where(leaves, r, np.minimum(r, held))
    whole = count * deps.row_elems_of[o] + sum(
        v * deps.row_elems_of[ref] for ref, v in inputs.items()) + down
    offsets = np.array([cols.start[t] - lo_col for t in ts], dtype=np.int64)
    act = np.maximum.reduceat(whole, offsets) + up[ts.start - 1:ts.stop - 1]
    need = act.copy()
    if op.weight_reads:
        need += slice_elems(op.weight_reads, channels(op.output_shape), 0, 1)
        chans = _in_sliceable(op)
        if chans:
            sliced = _sliced_act(deps, acc, op, chans, count, inputs[op.inputs[0]]) + down
            s_act = np.maximum.reduceat(sliced, offsets)
            need = np.minimum(need, s_act + slice_elems(op.weight_reads, chans, 0, 1))
            act = np.minimum(act, s_act)
    return act, need


@lru_cache(maxsize=8)
def _op_floors(graph: ComputeGraph, acc: int) -> tuple[np.ndarray, np.ndarray]:
    """(act, need)[o, T-1]: the fewest activation elements (act), and activation plus weight
    elements (need), some tile of T tiles holds at o's position in any group holding o and
    in any configuration, T = 1 .. the tallest tensor of the graph; non-increasing in T.
    Whole input: `_op_activations` and one output channel's slice of weights; input-sliced
    (an op of `_in_sliceable`): its output as partial sums (`acc` elements each), one channel
    of its input region, its input's row in flight and one input channel's slice of weights.
    """
    whole, w_need, s_act, s_need = _op_forms(graph, acc)
    return np.minimum(whole, s_act), np.minimum(w_need, s_need)


@lru_cache(maxsize=8)
def _op_forms(graph: ComputeGraph, acc: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`_op_floors`' two forms apart: (act and need with the whole input, act and need
    input-sliced; `_NO_SLICES` for an op that cannot be), for `_boundary_floors` to raise."""
    whole = _op_activations(graph)
    most = _most_rows_any(graph)
    tiles = np.arange(1, whole.shape[1] + 1, dtype=np.int64)
    return (whole, *_slice_forms(graph, acc, most, whole,
                                 lambda op, x: _read_by(graph, op.id, x, most[op.id], tiles)))


def _with_slices(graph: ComputeGraph, acc: int, rows: np.ndarray, act: np.ndarray,
                 read: Callable[[Op, int], np.ndarray | int]) -> tuple[np.ndarray, np.ndarray]:
    """(act, need) from the whole-input activation floors `act` of each op at `rows` rows of
    its own (per op, per column): need adds one output channel's slice of its weights; an op
    that can run input-sliced may instead hold its output as partial sums (`acc` elements
    each), one channel of its input's `read(op, input)` rows, the input's row in flight and
    one input channel's slice of weights, whichever is less (docs/exact.md, Lemmas 3 and 4).
    """
    need, s_act, s_need = _slice_forms(graph, acc, rows, act, read)
    return np.minimum(act, s_act), np.minimum(need, s_need)


_NO_SLICES = np.iinfo(np.int64).max // 4
"""The input-sliced floors of an op that cannot run input-sliced (never the smaller form)."""


def _slice_forms(graph: ComputeGraph, acc: int, rows: np.ndarray, act: np.ndarray,
                 read: Callable[[Op, int], np.ndarray | int]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_with_slices`' two forms apart: (need with the whole input, act input-sliced, need
    input-sliced); the input-sliced ones are `_NO_SLICES` for an op that cannot be."""
    deps = row_deps(graph)
    need = act.copy()
    s_act = np.full_like(act, _NO_SLICES)
    s_need = s_act.copy()
    for op in graph:
        if not op.weight_reads:
            continue
        need[op.id] += slice_elems(op.weight_reads, channels(op.output_shape), 0, 1)
        chans = _in_sliceable(op)
        if chans:
            s_act[op.id] = _sliced_act(deps, acc, op, chans, rows[op.id], read(op, op.inputs[0]))
            s_need[op.id] = s_act[op.id] + slice_elems(op.weight_reads, chans, 0, 1)
    return need, s_act, s_need


def _sliced_act(deps: RowDeps, acc: int, op: Op, chans: int, rows: np.ndarray | int,
                read: np.ndarray | int) -> np.ndarray | int:
    """Lemma 3's input-sliced activations of `op` holding `rows` rows of its tensor: its
    output as partial sums (`acc` elements each), one of its `chans` input channels of the
    `read` rows of its input, and that input's row in flight."""
    x = op.inputs[0]
    return (acc * rows * deps.row_elems_of[op.id] + read * (deps.row_elems_of[x] // chans)
            + _allowance(deps, x))


def whole_tensor_rule(graph: ComputeGraph, hw: HardwareConfig) -> dict[int, int]:
    """Pairs of ops no BRR group that fits holds together: {m: bitmask of the ops o} (docs/
    exact.md, "The whole-tensor rule").

    m reads an input p whole for each of its rows (a matrix product's second operand: one
    row of m needs every row of p) and is useful, so some tile needs a row of m and with it
    every row of p (Lemma 0); o reaches p along ops each of which reads every row of its input
    to produce every row of its own (not a global pooling, which folds its input band by
    band), so that tile needs every row of o; and o's floor with every row of its tensor
    (`_whole_floors`: its whole tensor, the inputs' rows all of it reads and a slice of its
    weights; with split buffers, its activations alone against the activation buffer) exceeds
    the buffer. In a convex group holding o and m the path o -> p -> m lies in the group, so no
    convex superset of {o, m} fits: the exact solver prunes such sets with their supersets.
    """
    deps = row_deps(graph)
    act, need = _whole_floors(graph, accumulator_elems(hw.dtype_bytes))
    big = need > hw.buffer_bytes // hw.dtype_bytes
    if hw.is_split:
        big |= act > hw.activation_capacity // hw.dtype_bytes
    if not big.any():
        return {}
    useful = _useful(graph)
    rule: dict[int, int] = {}
    for m in graph:
        if m.id not in useful or m.kind is OpKind.GLOBAL_POOL:
            continue
        for slot, p in enumerate(m.inputs):
            if p < 0 or _least_window(graph, m.id, slot)[1] < deps.height_of[p]:
                continue
            reach, stack = {p}, [p]
            while stack:  # the ops whose every row the whole of p needs
                c = stack.pop()
                if graph[c].kind is OpKind.GLOBAL_POOL:
                    continue
                for k, o in enumerate(graph[c].inputs):
                    if o >= 0 and o not in reach and _least_window(
                            graph, c, k)[deps.height_of[c]] >= deps.height_of[o]:
                        reach.add(o)
                        stack.append(o)
            mask = sum(1 << o for o in reach if big[o])
            if mask:
                rule[m.id] = rule.get(m.id, 0) | mask
    return rule


def one_tile_floor(graph: ComputeGraph, ops: Sequence[int], ordered: bool = False) -> int:
    """The fewest activation elements a BRR group of `ops` run in one tile (T = 1) holds at its
    busiest op position (docs/exact.md, "One tile"): the sum, over the tensors whose lifetimes
    cover the position, of the rows the tile needs at least (M_1 of each op, `_most_rows_any`;
    of each entering tensor, the most its readers in the group read, but nothing for one read by
    a single op that may run input-sliced, which may hold one channel of it) times their row
    elements. One tile needs all of them at once, so a group whose floor exceeds the buffer
    does not fit at T = 1, nor does any convex superset: its tensors, their lifetimes and the
    rows of its entering tensors only grow with the set (compiled: `_k.one_tile`). `ordered`:
    `ops` are ascending already."""
    if not len(ops):
        return 0
    t = _k.graph_tables(graph)
    most, read1, sliced_in = _one_tile_rows(graph)
    ops = np.array(ops if ordered else sorted(ops), dtype=np.int64)
    return int(_k.one_tile(ops, t.n_in, t.in_ptr, t.in_node, t.succ_ptr, t.succ, t.pool,
                           t.row_elems, most, read1, sliced_in))


@lru_cache(maxsize=8)
def _one_tile_rows(graph: ComputeGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """M_1 of every op (the rows the one tile of T = 1 needs at least, in any group); per
    input slot (the kernels' ``in_node`` order), the rows of that input its op reads for M_1
    rows of its own; per op, the node of its input where it may run input-sliced (Lemma 3:
    then it holds one channel of that input, if the input enters the group and no other op of
    it reads it), else -1."""
    most = _most_rows_any(graph)[:, 0].copy()
    one = np.ones(1, dtype=np.int64)
    read1 = [int(_read_by(graph, op.id, ref, most[op.id:op.id + 1], one)[0])
             for op in graph for ref in op.inputs]
    n_in = len(graph.input_shapes)
    sliced_in = [op.inputs[0] + n_in if _in_sliceable(op) else -1 for op in graph]
    return most, np.array(read1, dtype=np.int64), np.array(sliced_in, dtype=np.int64)


@lru_cache(maxsize=8)
def _whole_floors(graph: ComputeGraph, acc: int) -> tuple[np.ndarray, np.ndarray]:
    """(act, need)[o]: `_op_floors` of o for a tile that needs every row of o's tensor: the
    whole tensor and the rows of each input all of it reads (input-sliced: partial sums, one
    channel of the input region and its row in flight), with one slice of its weights."""
    deps = row_deps(graph)
    rows = np.array([deps.height_of[op.id] for op in graph], dtype=np.int64)
    reads: list[dict[int, int]] = []
    for op in graph:
        r: dict[int, int] = {}
        for slot, ref in enumerate(op.inputs):
            got = (0 if op.kind is OpKind.GLOBAL_POOL  # folds its input in band by band
                   else int(_least_window(graph, op.id, slot)[rows[op.id]]))
            r[ref] = max(r.get(ref, 0), got)
        reads.append(r)
    act = np.array([rows[op.id] * deps.row_elems_of[op.id]
                    + sum(n * deps.row_elems_of[ref] for ref, n in reads[op.id].items())
                    for op in graph], dtype=np.int64)
    act, need = _with_slices(graph, acc, rows[:, None], act[:, None],
                             lambda op, x: reads[op.id][x])
    return act[:, 0], need[:, 0]


@lru_cache(maxsize=8)
def _weight_info(graph: ComputeGraph) -> tuple[dict[int, tuple[int, ...]], dict[int, int]]:
    """Per op with weights: (weight elements, output channels, elements of its first
    one-output-channel slice, input channels if it can be input-sliced (else 0), elements of
    its first one-input-channel slice, elements of one channel of one row of its input); and
    the input of every op that can be input-sliced."""
    deps = row_deps(graph)
    info, inputs = {}, {}
    for op in graph:
        if not op.weight_reads:
            continue
        c_out, chans = channels(op.output_shape), _in_sliceable(op)
        info[op.id] = (op.weight_reads, c_out, slice_elems(op.weight_reads, c_out, 0, 1), chans,
                       slice_elems(op.weight_reads, chans, 0, 1) if chans else 0,
                       deps.row_elems_of[op.inputs[0]] // chans if chans else 0)
        if chans:
            inputs[op.id] = op.inputs[0]
    return info, inputs


def _in_sliceable(op: Op) -> int:
    """Input channels of an op that can run in input-channel slices (0 if it cannot): a
    convolution of one group on a 4-d input, or a linear layer on an N,C input, with weights,
    one distinct input of at least two channels."""
    if not op.weight_reads or len(set(op.inputs)) != 1:
        return 0
    shape = op.input_shapes[0]
    if not ((op.kind is OpKind.CONV and op.groups == 1 and len(shape) == 4
             and len(op.output_shape) == 4)
            or (op.kind is OpKind.LINEAR and len(shape) == 2 and len(op.output_shape) == 2)):
        return 0
    chans = channels(shape)
    return chans if chans > 1 else 0


@lru_cache(maxsize=8)
def _op_activations(graph: ComputeGraph) -> np.ndarray:
    """a[o, T-1] = a_T(o): the fewest activation elements some tile of T tiles holds at o's
    position, in any group holding o (T = 1 .. the tallest tensor of the graph): M_T(o) rows
    of o's tensor plus win(M_T(o)) rows of each distinct input (a useful global pooling: the
    largest band, ceil(h/T), of its input), where M_T(o) (`_most_rows_any`) bounds the rows
    of o some tile needs in any group: the tile that needs them holds all of these at o's
    position. Non-increasing in T."""
    deps = row_deps(graph)
    most = _most_rows_any(graph)
    tiles = np.arange(1, most.shape[1] + 1, dtype=np.int64)
    act = most * np.array([deps.row_elems_of[op.id] for op in graph], dtype=np.int64)[:, None]
    for op in graph:
        for ref in dict.fromkeys(op.inputs):  # each distinct input once
            act[op.id] += _read_by(graph, op.id, ref, most[op.id], tiles) * deps.row_elems_of[ref]
    return act


@lru_cache(maxsize=8)
def _most_rows_any(graph: ComputeGraph) -> np.ndarray:
    """M[o, T-1] <= the rows of o's tensor that some tile of T tiles needs, in every BRR group
    holding o: ``ceil(H/T)``, the largest band, where o's tensor leaves the group (which it
    always does for a network output); else every reader c of it is in the group (a tensor
    leaves when one of its readers is outside), and the tile that needs M_T(c) rows of c
    needs at least ``win_c(M_T(c))`` of o (a useful global pooling: the largest band of its
    input), so the largest of these over the readers; the smaller of the two (0 for an op
    nobody reads). At least the rows every tile needs (the least band, floor(H/T)), and far
    more where one reader needs few rows of a tensor: after a class-token slice of one row,
    or a 1-row network output, no tile but one needs anything, yet that one needs it all."""
    deps = row_deps(graph)
    tallest = max([*deps.height_of.values(), 1])
    tiles = np.arange(1, tallest + 1, dtype=np.int64)
    most = np.zeros((len(graph), tallest), dtype=np.int64)
    for op in reversed(list(graph)):
        own = -(-deps.height_of[op.id] // tiles)
        readers = list(graph.successors(op.id))
        if op.id in graph.output_set or not readers:
            most[op.id] = own if op.id in graph.output_set else 0
            continue
        row = np.zeros_like(own)
        for c in readers:
            row = np.maximum(row, _read_by(graph, c, op.id, most[c], tiles))
        most[op.id] = np.minimum(own, row)
    return most


def _read_by(graph: ComputeGraph, c: int, ref: int, rows: np.ndarray,
             tiles: np.ndarray) -> np.ndarray:
    """The fewest rows of tensor `ref` a tile needing `rows` rows of op `c` reads from it (a
    useful global pooling: the largest band of its input, which some tile reads)."""
    if graph[c].kind is OpKind.GLOBAL_POOL:
        return -(-row_deps(graph).height_of[ref] // tiles) * (c in _useful(graph))
    reads = [_least_window(graph, c, slot)[rows]
             for slot, r in enumerate(graph[c].inputs) if r == ref]
    return reads[0] if len(reads) == 1 else np.max(reads, axis=0)  # one slot: the usual case


def _least_rows(graph: ComputeGraph, layout: _Layout, tiles: np.ndarray) -> np.ndarray:
    """Rows of every tensor (rows) that every tile of T tiles needs at least (columns: T in
    `tiles`): the leaving bands' least height, propagated to the inputs by `_least_window`
    (compiled: `_k.least_rows`)."""
    t = layout.tables
    return _k.least_rows(layout.nodes, layout.n_entering, layout.leaving_rows,
                         np.asarray(tiles, dtype=np.int64),
                         t.n_in, t.in_ptr, t.in_node, t.tab_off, t.win, t.pool, t.useful,
                         t.height)


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
        key = (lo.tobytes(), hi.tobytes())  # ops of one shape share their table
        w = tables.get(key)
        if w is None:
            w = tables[key] = _window_table(np.asarray(lo, dtype=np.int64),
                                            np.asarray(hi, dtype=np.int64))
        tables[(o, slot)] = w
    return w


_WINDOW_CHUNK = 1 << 22
"""Elements of the (start row, window) differences `_window_table` holds at once."""


def _window_table(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """w[r] = max(0, min over a of hi[a+r-1] - lo[a] + 1) for r = 1..h (w[0] = 0), the
    windows of every length at once: row a of ``hi`` padded past its end and viewed h wide
    holds hi[a + k] at column k, so the minimum over the rows of that less lo[a] is the
    least window of k + 1 rows (the padding, above every row, never wins); rows in chunks."""
    h = len(lo)
    padded = np.concatenate((hi, np.full(h, np.iinfo(np.int64).max // 2, dtype=np.int64)))
    view = np.lib.stride_tricks.sliding_window_view(padded, h)[:h]
    least = np.full(h, np.iinfo(np.int64).max, dtype=np.int64)
    step = max(1, _WINDOW_CHUNK // max(h, 1))
    for a in range(0, h, step):
        np.minimum(least, (view[a:a + step] - lo[a:a + step, None]).min(axis=0), out=least)
    w = np.zeros(h + 1, dtype=np.int64)
    w[1:] = np.maximum(least + 1, 0)
    return w


@dataclass(frozen=True, slots=True)
class _Weighted:
    """An op with weights in one group: its position, op id, weight elements, output
    channels, input channels if it can be input-sliced here (else 0: its one input must enter
    the group and be read by no other op of it), the rows (in `_Layout.refs`) of its input and
    of itself, and the elements of one channel of one row of its input."""

    pos: int
    op: int
    elems: int
    out_channels: int
    in_channels: int
    x: int
    o: int
    x_channel_elems: int
    first_out: int
    first_in: int


class _Bands:
    """First / last row of every tensor (rows) each tile needs (columns), for the tiles of
    several tile counts side by side (the columns of one count are independent of the
    others'); a tensor a tile does not need has the sentinels first = H, last = -1. The
    propagation runs from the leaving bands back to the entering tensors, last op first (a
    global pooling folds in its input band by band: each tile reads only its band, and the
    one-row accumulator is held in every tile of a count where it is needed), compiled
    (`simulator.cost._brr_kernels.bands`)."""

    def __init__(self, layout: _Layout, counts: tuple[int, ...]) -> None:
        self.layout, self.counts = layout, counts
        t = layout.tables
        self.first, self.last, self.rows = _k.bands(
            layout.nodes, layout.n_entering, layout.leaving_rows,
            np.array(counts, dtype=np.int64), t.n_in, t.in_ptr, t.in_node, t.tab_off,
            t.tab_len, t.lo, t.hi, t.pool, t.height)


class _Layout:
    """What the tile regions of one group share whatever the tile count: its tensors, their
    heights and row sizes, the tensors' lifetimes and the weights (`_k.layout`)."""

    def __init__(self, graph: ComputeGraph, ops: tuple[int, ...], deps: RowDeps,
                 acc: int = 1) -> None:
        self.graph, self.ops, self.deps, self.acc = graph, ops, deps, acc
        self.tables = t = _k.graph_tables(graph)
        self.op_array = np.array(ops, dtype=np.int64)
        (self.nodes, self.n_entering, self.leaving_rows, self.born, self.dies,
         allowance) = _k.layout(self.op_array, t.n_in, t.in_ptr, t.in_node, t.succ_ptr,
                                t.succ, t.output, t.pool, t.height, t.row_elems)
        self.allowance = int(allowance)
        self.heights = t.height[self.nodes]
        self.row_elems = t.row_elems[self.nodes]
        self.positions = len(ops)
        self.weights = t.weights[self.op_array]
        self.weight_sum = int(self.weights.sum())

    @property
    def write_elems(self) -> int:
        """Elements of the tensors leaving the group (written once)."""
        return int(self.tables.output_elems[self.nodes[self.leaving_rows]
                                            - self.tables.n_in].sum())

    @cached_property
    def entering(self) -> tuple[int, ...]:
        """References of the tensors entering the group, ascending."""
        n_in = self.tables.n_in
        return tuple(int(u) - n_in for u in self.nodes[:self.n_entering])

    @cached_property
    def refs(self) -> tuple[int, ...]:
        """The entering tensors, then the group's ops: the rows of every per-tensor array."""
        return (*self.entering, *self.ops)

    @cached_property
    def index(self) -> dict[int, int]:
        """Row of each reference in `refs`."""
        return {ref: k for k, ref in enumerate(self.refs)}

    @cached_property
    def leaving(self) -> tuple[tuple[int, int], ...]:
        """(row, height) of every tensor leaving the group."""
        return tuple((int(k), int(self.heights[k])) for k in self.leaving_rows)

    @cached_property
    def spans(self) -> list[tuple[int, int]]:
        """Per row, the first and last op position at which a tile holds the tensor: from its
        producer (an entering tensor: its first consumer) to its last consumer; a global
        pooling's running sum from the first op to the last."""
        return list(zip(self.born.tolist(), self.dies.tolist(), strict=True))

    @cached_property
    def _w(self) -> tuple[np.ndarray, ...]:
        """The ops with weights as arrays (`weighted`'s fields): position, op, elements,
        output channels, input channels where it can be input-sliced here (else 0: its one
        input must enter the group and be read by no other op of it), row of its input,
        elements of one channel of one input row, first output slice, first input slice."""
        t = self.tables
        weights = t.weights[self.op_array]
        pos = np.flatnonzero(weights)
        ops = self.op_array[pos]
        c_out, first_out, chans, first_in, x_chan, x_node = (a[ops] for a in t.weight_arrays)
        entering = self.nodes[:self.n_entering]
        k = np.searchsorted(entering, x_node)
        kk = np.minimum(k, max(self.n_entering - 1, 0))
        ok = ((k < self.n_entering) & (entering[kk] == x_node) & (self.born[kk] == pos)
              & (self.dies[kk] == pos)) if self.n_entering else np.zeros(len(pos), bool)
        ok &= chans > 0
        x = np.where(ok, k, 0)
        return (pos, ops, weights[pos], c_out, np.where(ok, chans, 0), x,
                np.where(ok, x_chan, 0), first_out, np.where(ok, first_in, 0))

    @cached_property
    def weighted(self) -> tuple[_Weighted, ...]:
        """The ops with weights, in position order, with how they can be sliced here."""
        pos, ops, elems, c_out, chans, x, x_chan, first_out, first_in = (
            a.tolist() for a in self._w)
        n_in = self.n_entering
        return tuple(_Weighted(*f, n_in + f[0], *g) for f, g in zip(
            zip(pos, ops, elems, c_out, chans, x, strict=True),
            zip(x_chan, first_out, first_in, strict=True), strict=True))

    @cached_property
    def w_pos(self) -> np.ndarray:
        """Positions of the ops with weights."""
        return self._w[0]

    @cached_property
    def weightless(self) -> np.ndarray:
        """Positions of the ops without weights."""
        return np.flatnonzero(self.tables.weights[self.op_array] == 0)

    @cached_property
    def w_first_out(self) -> np.ndarray:
        """Weight elements of each weighted op's one-output-channel slice."""
        return self._w[7]

    @cached_property
    def in_sliceable(self) -> tuple[int, ...]:
        """Indices (in `weighted`) of the ops that can run input-sliced here."""
        return tuple(np.flatnonzero(self._w[4]).tolist())

    @cached_property
    def sliceable_arrays(self) -> tuple[np.ndarray, ...]:
        """The input-sliceable ops as five arrays: index in `weighted`, rows of the input and
        of the op, elements of one channel of one input row, elements of the first input
        slice."""
        pos, _, _, _, chans, x, x_chan, _, first_in = self._w
        i = np.flatnonzero(chans)
        return i, x[i], pos[i] + self.n_entering, x_chan[i], first_in[i]

    @cached_property
    def mac_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every op with MACs: its row, MACs and height."""
        macs = self.tables.macs[self.op_array]
        rows = np.flatnonzero(macs) + self.n_entering
        return rows, macs[rows - self.n_entering], self.heights[rows]

    @cached_property
    def w_elems(self) -> list[int]:
        """Weight elements of the ops with weights."""
        return [w.elems for w in self.weighted]

    @cached_property
    def macs(self) -> tuple[tuple[int, int, int], ...]:
        """(row of o, o's MACs, o's height) of every op with MACs."""
        return tuple(zip(*(a.tolist() for a in self.mac_arrays), strict=True))


def _live(layout: _Layout, rows: np.ndarray) -> np.ndarray:
    """Live activation elements at each op position (rows) in each tile (columns): the sum of
    the tile's rows of every tensor whose lifetime covers the position."""
    return _k.live(rows, layout.row_elems, layout.born, layout.dies, layout.positions)


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
