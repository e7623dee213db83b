"""Candidate fusion groups of the exact solver: weakly connected, convex sets that may run.

A valid plan (DESIGN.md, "Fusion group, partition plan") is a partition into weakly connected
groups with an acyclic graph of groups, each fitting the buffer; an acyclic graph of groups
makes every group *convex* (a path leaving a group and re-entering it would be a cycle). Ops
that do not fit even alone (`CostCache.unfusable`) run alone, layer by layer, as everywhere in
the project: they form singleton groups and never join a larger one.

**Growth.** Every connected convex set C is reached from any of its ops by repeatedly adding a
neighbour v in C of the current set S and taking the convex closure: the closure of S + v lies in
C (C is convex), it is connected (each added op lies on a path between two members), and it is
larger than S. With bitmasks the closure is ``desc(S) & anc(S)`` (reflexive descendants and
ancestors), itself convex, so one step costs a few integer operations. The growth costs no
group: it only decides which sets exist. The solver costs a set (through the `CostCache`) only
when it could improve a path (`search.exact.solver`), using the lower bound kept here.

**Pruning, per dataflow.** A set is discarded *with all its supersets* only when no superset
can fit. F_beta itself is not monotone (adding an op can lower it), so "does not fit" is never
a reason to stop growing; only these rules are:

* all dataflows: a set with an unfusable op and another op (the project's convention above);
* LBDF: all weights of a group stay on chip for the whole group, so F_beta(S) >= weights(S),
  and weights only grow with the set. Besides, a set holding an op g with one output row that
  reads a whole multi-row tensor x, and another reader m of x downstream of g (the global pool
  and the multiply of a squeeze-and-excitation block), holds x whole when g computes its row
  (`squeeze_pairs`), so F_beta(S) >= weights(S) + max over such pairs in S of (x + g's row);
  and every op o of S holds, when it computes a row, all but one of the input rows its window
  reads (`simulator.cost.lbdf.window_floors`), so F_beta(S) >= weights(S) + max over S of
  o's window floor. Both bounds only grow with the set. A set over the buffer by either is
  pruned with its supersets;
* BRR: weights may be streamed, so no cheap bound on F_beta grows with the set; BRR-incompatibility
  (`simulator.cost.brr.incompatibility`: a single-row tensor computed from a whole map broadcast
  onto a map) persists in every superset (the broadcasting op, its input and the whole-map
  dependence stay, and more in-group edges only spread the dependence), so an incompatible set
  is pruned with its supersets. Everything else is kept: the enumeration is complete without any
  look-ahead, at the price of more sets, which the solver's lazy costing handles;
* LBL: only singletons (the layer-by-layer dataflow runs no larger group).

**Lower bound.** For each set the compulsory traffic of its boundary (what
`simulator.cost.traffic.compulsory_bytes` computes, here from bitmasks: entering tensors once,
leaving tensors once, weights once; a test holds the two equal) bounds F_D from below (LBDF's
F_D equals it; BRR adds halo re-reads and weight streaming), and the analytic cycles of that
traffic with the ops' MACs bound the cycles from below (BRR recomputes halos, never less;
upstream of an op that leaves input rows unread, such as ViT's class-token slice, BRR computes
only the rows read, so those ops' MACs are left out of the bound).
Under BRR each set also gets `lb_fit`, a bound of its F_D *if it runs*: the weights that cannot
stay resident next to the least live activations are streamed, and the per-op fit floors
(`simulator.cost.brr.fit_floors`) say at least how many tiles re-read them (docs/exact.md, "The
BRR fit bound"); `fit_bound` gives the solver a tighter per-set bound, or rules a set out. The
solver checks them all against every set it costs.

A cap (`max_sets`, `time_limit`) stops the growth early; singletons are always enumerated
first, so a plan exists, and the solver's answer is then optimal among the sets found
(`CandidateSpace.complete` is False and `cap_reason` says which cap).
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from simulator.cost import CostCache
from simulator.cost.brr import (
    dram_lower_bound,
    fit_floors,
    incompatibility,
    one_tile_floor,
    whole_tensor_rule,
)
from simulator.cost.lbdf import window_floors
from simulator.cost.rows import row_deps
from simulator.cost.types import roofline
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph, OpKind

__all__ = ["Candidate", "CandidateSpace", "SqueezePair", "bits", "costed_candidates",
           "enumerate_space", "evaluate_set", "fit_bound", "lbdf_buffer_bound", "squeeze_pairs"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A group that runs, with the figures the solvers need.

    Attributes:
        ops: Op ids, ascending.
        mask: Bitmask of `ops` (bit o set for op o).
        pred_mask: Producers of the group outside it (they must run before it).
        dram_bytes: F_D.
        buffer_bytes: F_beta.
        cycles: Analytic cycles.
        fused: False for an unfusable op running alone (left out of the paper's MBU).
    """

    ops: tuple[int, ...]
    mask: int
    pred_mask: int
    dram_bytes: int
    buffer_bytes: int
    cycles: int
    fused: bool


@dataclass(frozen=True)
class CandidateSpace:
    """The sets that may run as groups of one (graph, hardware, dataflow), not yet costed.

    Attributes:
        masks: Bitmasks of the sets: singletons first (op order), then in discovery order.
        pred_masks: External producers of each set.
        lb_dram: Lower bound of each set's F_D (bytes): its compulsory traffic.
        lb_cycles: Lower bound of each set's cycles.
        lb_fit: Lower bound of each set's F_D *if it runs* (bytes, at least `lb_dram`): under
            BRR, the re-reads of the weights that cannot be resident, at the tile count the
            per-op fit floors force (`simulator.cost.brr.fit_floors`: docs/exact.md, "The BRR
            fit bound"); elsewhere `lb_dram`.
        complete: True when no cap stopped the growth (only the rigorous pruning rules of the
            module docs left sets out).
        cap_reason: Which cap stopped it ("" when complete).
        pruned: Sets discarded with all their supersets by a pruning rule.
        seconds: Wall time of the enumeration.
        max_sets: The set cap it ran under (None: none).
        timed_out: True when the opt-in wall-clock limit (not the set cap) stopped it: the
            sets found then depend on the machine and its load.
    """

    masks: tuple[int, ...]
    pred_masks: tuple[int, ...]
    lb_dram: tuple[int, ...]
    lb_cycles: tuple[int, ...]
    lb_fit: tuple[int, ...]
    complete: bool
    cap_reason: str
    pruned: int
    seconds: float
    max_sets: int | None = None
    timed_out: bool = False

    def __len__(self) -> int:
        return len(self.masks)


@dataclass(frozen=True, slots=True)
class SqueezePair:
    """Two ops that make an LBDF group holding both of them hold a whole tensor.

    `g` computes its single output row from every row of tensor `x` (a global pool); `m` is
    another reader of `x`, downstream of `g` (the multiply of a squeeze-and-excitation block).

    Attributes:
        g, m: The two op ids.
        x: The tensor (op id, or negative for a network input).
        mask: Bitmask of {g, m}.
        elems: Elements live when `g` computes its row: every row of `x` plus `g`'s row.
    """

    g: int
    m: int
    x: int
    mask: int
    elems: int


def squeeze_pairs(graph: ComputeGraph) -> tuple[SqueezePair, ...]:
    """Every (g, x, m) of `graph` that forces an LBDF group holding g and m to hold x whole.

    Why the bound is rigorous, in the LBDF schedule of `simulator.cost.lbdf` (every row
    event is ranked after the rows it reads; a row is live from its production, or earlier
    for an entering row, until the last in-group row that reads it, except that a global pool
    folds its input rows in as they arrive and so does not keep them). Let a convex group hold
    g and m. (1) g's only row reads every row of x, so each row of x is ranked before g's row.
    (2) m is downstream of g, and the group is convex, so a path g -> ... -> m lies inside it;
    every row of an op reads at least one row of each input and g has a single row, so every
    row of m depends on g's row and is ranked after it. (3) m is not a global pool, so each
    row i of x stays live until the row of m that last reads it. Hence at g's row every row of
    x is live, and g's own row too (it is live at its own event): F_beta >= weights + x + g's
    row. Any convex superset holds g and m as well, so the bound only grows with the set.
    """
    deps = row_deps(graph)
    readers: dict[int, list[int]] = {}
    for op in graph:
        for ref in set(op.inputs):
            readers.setdefault(ref, []).append(op.id)
    below = _Closure.of(graph).desc
    out = []
    for op in graph:
        if deps.height_of[op.id] != 1:
            continue
        for slot, x in enumerate(op.inputs):
            h = deps.height_of[x]
            if h == 1 or deps.lo[op.id][slot][0] != 0 or deps.hi[op.id][slot][0] != h - 1:
                continue  # g's row does not read all of x
            elems = h * deps.row_elems_of[x] + deps.row_elems_of[op.id]
            out.extend(SqueezePair(op.id, m, x, 1 << op.id | 1 << m, elems)
                       for m in readers[x] if m != op.id and below[op.id] >> m & 1
                       and graph[m].kind is not OpKind.GLOBAL_POOL)
    return tuple(sorted(set(out), key=lambda p: (p.g, p.m, p.x)))


def lbdf_buffer_bound(graph: ComputeGraph, ops: Iterable[int], dtype_bytes: int,
                      pairs: Iterable[SqueezePair] | None = None) -> int:
    """A lower bound of the LBDF F_beta of the convex set `ops` that only grows with the set:
    its weights, plus the larger of its ops' window floors (`simulator.cost.lbdf.
    window_floors`) and the largest tensor a squeeze pair in it forces it to hold whole."""
    mask = sum(1 << o for o in ops)
    pairs = squeeze_pairs(graph) if pairs is None else pairs
    held = max((p.elems for p in pairs if p.mask & mask == p.mask), default=0)
    window = max((window_floors(graph)[o] for o in bits(mask)), default=0)
    return (sum(graph[o].weight_reads for o in bits(mask)) + max(held, window)) * dtype_bytes


class _Above:
    """Ops by a value each: `above(t)` is the mask of the ops whose value exceeds t."""

    __slots__ = ("masks", "values")

    def __init__(self, values: Iterable[int]) -> None:
        by: dict[int, int] = {}
        for o, v in enumerate(values):
            by[v] = by.get(v, 0) | 1 << o
        self.values = sorted(by)
        masks, acc = [], 0
        for v in reversed(self.values):  # masks[i]: the ops of value >= values[i]
            acc |= by[v]
            masks.append(acc)
        self.masks = masks[::-1] + [0]

    def above(self, t: int) -> int:
        return self.masks[bisect.bisect_right(self.values, t)]


_BYTE_BITS = tuple(tuple(i for i in range(8) if b >> i & 1) for b in range(256))


def bits(mask: int) -> tuple[int, ...]:
    """The set bits of `mask`, ascending (the op ids of a group mask): bit by bit for a few
    bits, else byte by byte from the lowest set bit (2-3x faster on the groups of a few dozen
    ops the exact solver grows)."""
    if mask.bit_count() <= 12:
        out = []
        while mask:
            low = mask & -mask
            out.append(low.bit_length() - 1)
            mask ^= low
        return tuple(out)
    low = (mask & -mask).bit_length() - 1
    mask >>= low
    n = (mask.bit_length() + 7) // 8
    return tuple(base + i for base, byte in zip(range(low, low + 8 * n, 8),
                                                mask.to_bytes(n, "little"), strict=True)
                 if byte for i in _BYTE_BITS[byte])


def evaluate_set(cache: CostCache, space: CandidateSpace, k: int,
                 fit_bound: int | None = None) -> Candidate | None:
    """Cost set `k` of `space`: the candidate if it runs, else None.

    Args:
        cache: Group costs.
        space: The sets.
        k: Index of the set in `space`.
        fit_bound: `fit_bound(cache, space, k)` when it was computed: the F_D of a set that
            runs is checked against it (and against ``space.lb_fit[k]``) too.

    Raises:
        RuntimeError: the cost model undercuts the set's lower bound (a broken contract
            that would make the lazy solver unsound).
    """
    ops = bits(space.masks[k])
    cost = cache.run(ops)
    if cost.dram_bytes < space.lb_dram[k] or cost.timing.cycles < space.lb_cycles[k]:
        raise RuntimeError(f"cost of group {ops} below its lower bound: DRAM "
                           f"{cost.dram_bytes} < {space.lb_dram[k]} or cycles "
                           f"{cost.timing.cycles} < {space.lb_cycles[k]}")
    if not cost.fits:
        return None
    floor = max(space.lb_fit[k], fit_bound or 0)
    if cost.dram_bytes < floor:
        raise RuntimeError(f"cost of group {ops} below its fit bound: DRAM "
                           f"{cost.dram_bytes} < {floor}")
    return Candidate(ops, space.masks[k], space.pred_masks[k], int(cost.dram_bytes),
                     int(cost.buffer_bytes), int(cost.timing.cycles), not cost.runs_alone)


def fit_bound(cache: CostCache, space: CandidateSpace, k: int) -> int | None:
    """A lower bound of set `k`'s F_D *if it runs*, at least ``space.lb_fit[k]``; None when it
    provably cannot run. Under BRR `simulator.cost.brr.dram_lower_bound` (the set's own tile
    floors, about a fifth of a costing; docs/exact.md, "The BRR fit bound"); elsewhere (and
    for singletons, which may run alone) ``space.lb_fit[k]``."""
    mask = space.masks[k]
    if mask.bit_count() == 1 or not _only_tiled(cache, mask):
        return space.lb_fit[k]
    bound = dram_lower_bound(cache.graph, bits(mask), cache.hw)
    return None if bound is None else max(bound, space.lb_fit[k])


def _only_tiled(cache: CostCache, mask: int) -> bool:
    """True when only tiled members of the scheme may run the set `mask`: every other one
    holds every weight and its weights exceed the buffer."""
    members = cache.scheme.fused
    if not any(m.tiled for m in members):
        return False
    if all(m.tiled for m in members):
        return True
    weight_bytes = sum(cache.graph[o].weight_reads for o in bits(mask)) * cache.hw.dtype_bytes
    return all(m.tiled or (m.holds_weights and weight_bytes > cache.hw.weight_capacity)
               for m in members)


def costed_candidates(cache: CostCache, space: CandidateSpace) -> tuple[Candidate, ...]:
    """Every set of `space` that runs, costed (what the fronts and the MILP need)."""
    found = (evaluate_set(cache, space, k) for k in range(len(space)))
    return tuple(c for c in found if c is not None)


@dataclass(frozen=True)
class _Closure:
    """Reflexive descendant / ancestor masks, producer and neighbour masks of every op."""

    desc: tuple[int, ...]
    anc: tuple[int, ...]
    nbr: tuple[int, ...]
    pred: tuple[int, ...]
    succ: tuple[int, ...]

    @classmethod
    def of(cls, graph: ComputeGraph) -> _Closure:
        n = len(graph)
        anc = [0] * n
        for v in range(n):  # ids are topological
            m = 1 << v
            for p in graph.predecessors(v):
                m |= anc[p]
            anc[v] = m
        desc = [0] * n
        for v in reversed(range(n)):
            m = 1 << v
            for s in graph.successors(v):
                m |= desc[s]
            desc[v] = m
        pred = [sum(1 << p for p in graph.predecessors(v)) for v in range(n)]
        succ = [sum(1 << s for s in graph.successors(v)) for v in range(n)]
        nbr = [p | s for p, s in zip(pred, succ, strict=True)]
        return cls(tuple(desc), tuple(anc), tuple(nbr), tuple(pred), tuple(succ))

    def hull(self, mask: int) -> int:
        """The convex hull of the ops of `mask`: they and every op on a path between two of
        them (a set is convex when it is its own hull)."""
        if not mask & (mask - 1):
            return mask
        desc = anc = 0
        for o in bits(mask):
            desc |= self.desc[o]
            anc |= self.anc[o]
        return desc & anc


def _sum_over(table: list[int], mask: int) -> int:
    """The sum of `table` over the set bits of `mask` (`bits` without the tuple)."""
    total = 0
    while mask:
        low = mask & -mask
        total += table[low.bit_length() - 1]
        mask ^= low
    return total


def _union(table: tuple[int, ...], ops: Iterable[int]) -> int:
    out = 0
    for o in ops:
        out |= table[o]
    return out


def enumerate_space(graph: ComputeGraph, cache: CostCache, *, max_sets: int | None = None,
                    time_limit: float | None = None) -> CandidateSpace:
    """All connected convex sets the module's pruning rules keep, with their lower bounds.

    Args:
        graph: The network (ids topological).
        cache: Group costs of (graph, hardware, dataflow): its dataflow, hardware and
            unfusable ops decide the pruning; nothing is costed here.
        max_sets: Stop once this many sets are found (None: no cap).
        time_limit: Stop after this many seconds (None: no cap; opt-in: the sets found then
            depend on the machine's load, ``timed_out`` says when it stopped the growth).

    Returns:
        The sets; ``complete`` is False when a cap stopped the growth.
    """
    for name, cap in (("max_sets", max_sets), ("time_limit", time_limit)):
        if cap is not None and cap <= 0:
            raise ValueError(f"{name} must be positive or None, got {cap!r}")
    return _Growth(graph, cache, max_sets, time_limit).run()


_Entry = tuple[int, int, int, int, int, int, int, int, int, int, int, int]
"""A grown set: mask, descendants, ancestors, neighbours, producers (all reflexive unions over
its ops), ops whose tensor leaves it, network inputs read (bit k: input k), weight elements,
MACs, and the largest BRR fit floors of its ops (tiles, resident elements). Everything but the
leaving ops is a union, a sum or a maximum, so growth updates it incrementally."""


class _Growth:
    """One enumeration run (the mutable bookkeeping behind `enumerate_space`)."""

    def __init__(self, graph: ComputeGraph, cache: CostCache, max_sets: int | None,
                 time_limit: float | None, one_tile: bool = False) -> None:
        """`one_tile`: raise a BRR set's tile floor to two where it cannot run in one tile
        (`_over_one_tile`); the lazy search's growth asks it (its incumbent bound prunes with
        it), the enumeration does not (there it would only order the costing)."""
        self.graph, self.cache, self.hw = graph, cache, cache.hw
        self.scheme = Scheme.parse(cache.scheme)
        self.unfusable_mask = sum(1 << o for o in cache.unfusable)
        self.max_sets, self.time_limit = max_sets, time_limit
        self.closure = _Closure.of(graph)
        self.out_elems = [op.output_elems for op in graph]
        self.weights = [op.weight_reads for op in graph]
        self.macs = [op.macs for op in graph]
        deps = row_deps(graph)
        # ops that leave input rows unread: upstream of one, a group may compute part of an op
        self.drop_mask = sum(1 << o for o, d in enumerate(deps.drops_rows) if d)
        whole = sum(1 << o for o, w in enumerate(deps.computed_whole) if w)
        self.maybe_part = [a & ~(1 << o) & ~whole for o, a in enumerate(self.closure.anc)]
        self.is_output = [o in graph.output_set for o in range(len(graph))]
        self.netin = [sum(1 << (-r - 1) for r in op.inputs if r < 0) for op in graph]
        self.netin_elems = [graph.tensor_elems(-k - 1) for k in range(
            max((m.bit_length() for m in self.netin), default=0))]
        # ops where a whole-map dependence starts: BRR-incompatibility needs one of them
        self.whole_mask = sum(1 << op.id for op in graph if deps.whole_from_rows(op.id))
        self.masks: list[int] = []
        self.preds: list[int] = []
        self.lb: list[tuple[int, int, int]] = []  # (lb_dram, lb_cycles, lb_fit) per set
        members = self.members = self.scheme.fused  # mixed: a set runs if one member runs it
        self.pairs = squeeze_pairs(graph) if any(m.holds_weights for m in members) else ()
        self.pair_g = sum(1 << p.g for p in self.pairs)
        # per op, the activations an LBDF group holding it holds (0 without such a member)
        self.window = _Above(window_floors(graph) if any(m.holds_weights for m in members)
                             else (0,) * len(graph))
        floors = fit_floors(graph, self.hw) if any(m.tiled for m in members) else None
        self.floor_tiles = list(floors.tiles) if floors else [1] * len(graph)
        self.floor_res = list(floors.resident_elems) if floors else [0] * len(graph)
        self.floor_stream = list(floors.streamed_elems) if floors else [0] * len(graph)
        # BRR: m -> the ops no fitting group holds with m (`whole_tensor_rule`)
        self.whole = whole_tensor_rule(graph, self.hw) if floors else {}
        self.whole_from = sum(1 << m for m in self.whole)
        self.one_tile: dict[int, bool] = {}  # set -> it cannot run in one tile (BRR)
        self.check_one_tile = floors is not None and one_tile
        self.seen: set[int] = set()
        self.pruned = 0
        self.start = time.perf_counter()

    def _single(self, o: int) -> _Entry:
        c, op = self.closure, self.graph[o]
        leaving = 1 << o if self.is_output[o] or c.succ[o] else 0
        return (1 << o, c.desc[o], c.anc[o], c.nbr[o], c.pred[o], leaving, self.netin[o],
                op.weight_reads, op.macs, self.floor_tiles[o], self.floor_res[o],
                self.floor_stream[o])

    def run(self) -> CandidateSpace:
        n = len(self.graph)
        singles = [self._single(o) for o in range(n)]
        for e in singles:
            self.seen.add(e[0])
            self._record(e)
        queue = deque(e for o, e in enumerate(singles)
                      if self.scheme.searchable and not self.unfusable_mask >> o & 1)
        reason = self._grow(queue)
        return CandidateSpace(tuple(self.masks), tuple(self.preds),
                              tuple(d for d, _, _ in self.lb), tuple(y for _, y, _ in self.lb),
                              tuple(f for _, _, f in self.lb), not reason, reason, self.pruned,
                              time.perf_counter() - self.start, self.max_sets,
                              reason.startswith("time cap"))

    def _grow(self, queue: deque[_Entry]) -> str:
        """Breadth-first growth by one neighbour and the convex closure."""
        c = self.closure
        while queue:
            cap = self._cap()
            if cap:
                return cap
            e = queue.popleft()
            mask, desc, anc, nbr = e[0], e[1], e[2], e[3]
            for v in bits(nbr & ~mask & ~self.unfusable_mask):
                d2, a2 = desc | c.desc[v], anc | c.anc[v]
                grown = d2 & a2  # the closure's own closure masks are d2 and a2
                if grown in self.seen:
                    continue
                self.seen.add(grown)
                added = bits(grown & ~mask)
                w2 = e[7] + sum(self.weights[o] for o in added)
                if self._prune(grown, w2 * self.hw.dtype_bytes):
                    self.pruned += 1
                    continue
                entry = self._extend(e, grown, d2, a2, added, w2)
                self._record(entry)
                queue.append(entry)
        return ""

    def _extend(self, e: _Entry, grown: int, d2: int, a2: int, added: tuple[int, ...],
                w2: int) -> _Entry:
        """Entry `e` grown by the ops `added` into the set `grown` (weights `w2`)."""
        c = self.closure
        _, _, _, nbr, pred, leaving, netin, _, macs, tiles, res, stream = e
        is_output, succ = self.is_output, c.succ
        left = 0
        for o in (*bits(leaving), *added):
            if is_output[o] or succ[o] & ~grown:
                left |= 1 << o
        tiles = max(tiles, *(self.floor_tiles[o] for o in added))
        res = max(res, *(self.floor_res[o] for o in added))
        if tiles == 1 and self._over_one_tile(grown, w2, res):
            tiles = 2
        return (grown, d2, a2, nbr | _union(c.nbr, added), pred | _union(c.pred, added),
                left, netin | _union(self.netin, added), w2,
                macs + sum(self.macs[o] for o in added), tiles, res,
                stream + sum(self.floor_stream[o] for o in added))

    def _over_one_tile(self, mask: int, weights: int, res: int) -> bool:
        """BRR: the set cannot run in one tile (`simulator.cost.brr.one_tile_floor` over the
        buffer), so neither can any set grown from it: every group holding it runs at two
        tiles or more. Asked only where it raises a bound: the set's weights are streamed
        (exceed what the buffer leaves next to the least activations)."""
        if not self.check_one_tile:
            return False
        d = self.hw.dtype_bytes
        if weights + res <= self.hw.buffer_bytes // d and not (
                self.hw.is_split and weights * d > self.hw.weight_capacity):
            return False
        hit = self.one_tile.get(mask)
        if hit is None:
            hit = self.one_tile[mask] = (one_tile_floor(self.graph, bits(mask), ordered=True)
                                         > self.hw.buffer_bytes // d)
        return hit

    def _record(self, e: _Entry) -> None:
        mask, pred = e[0], e[4]
        self.masks.append(mask)
        self.preds.append(pred & ~mask)
        self.lb.append(self._bounds(e))

    def _bounds(self, e: _Entry) -> tuple[int, int, int]:
        """(lb_dram, lb_cycles, lb_fit) of the set of entry `e`."""
        mask, _, _, _, pred, leaving, netin, weights, macs, tiles, res, _ = e
        if mask & self.unfusable_mask:
            return 0, 0, 0  # runs layer by layer, tiled: no bound is claimed
        elems = (_sum_over(self.out_elems, pred & ~mask) + _sum_over(self.netin_elems, netin)
                 + _sum_over(self.out_elems, leaving) + weights)
        if mask & self.drop_mask:  # ops upstream of a reader dropping rows may run in part
            part = mask & _union(self.maybe_part, bits(mask & self.drop_mask))
            macs -= _sum_over(self.macs, part)
        d = self.hw.dtype_bytes
        dram = elems * d
        fit = dram
        excess = weights + res - self.hw.buffer_bytes // d
        if self.hw.is_split:  # resident weights also fit the weight buffer alone
            excess = max(excess, weights - self.hw.weight_capacity // d)
        if mask & (mask - 1) and excess > 0 and self._streams(mask, weights * d):
            # at least `excess` weight elements cannot stay resident: streamed, re-read by
            # every extra tile (tiles 0: no group of an op fits)
            fit += excess * max(tiles - 1, 0) * d
        return dram, max(roofline(dram, macs, self.hw)), fit

    def _cap(self) -> str:
        if self.max_sets is not None and len(self.masks) >= self.max_sets:
            return f"set cap ({self.max_sets:,})"
        if self.time_limit is not None and time.perf_counter() - self.start > self.time_limit:
            return f"time cap ({self.time_limit:g} s)"
        return ""

    def _prune(self, mask: int, weight_bytes: int) -> bool:
        """True when no member of the scheme runs the set (nor any set grown from it)."""
        if mask & self.unfusable_mask:
            return True
        return all(self._prunes(m, mask, weight_bytes) for m in self.members)

    def _prunes(self, member: Scheme, mask: int, weight_bytes: int) -> bool:
        if member.holds_weights:  # F_beta >= weights (+ a tensor held whole)
            return self._over_weights(mask, weight_bytes)
        if member.tiled:
            return self._whole_tensors(mask) or (
                bool(mask & self.whole_mask) and bool(incompatibility(self.graph, bits(mask))))
        return False

    def _whole_tensors(self, mask: int) -> bool:
        """BRR: the set holds an op m and an op whose whole tensor some tile would need next to
        m, more than the buffer holds (`simulator.cost.brr.whole_tensor_rule`)."""
        return any(mask & self.whole[m] for m in bits(mask & self.whole_from))

    def _over_weights(self, mask: int, weight_bytes: int) -> bool:
        """A dataflow holding every weight cannot run the set: its weights, with what it holds
        of its activations at least (a window floor of one of its ops, or a tensor a squeeze
        pair holds whole), exceed the buffer; with split buffers, its weights exceed the
        weight buffer or those activations the activation buffer."""
        hw = self.hw
        if weight_bytes > hw.weight_capacity:
            return True
        d = hw.dtype_bytes
        room = (hw.activation_capacity if hw.is_split else hw.buffer_bytes - weight_bytes) // d
        if mask & self.window.above(room):  # an op's window floor alone exceeds the room
            return True
        if mask & self.pair_g:
            held = max((p.elems for p in self.pairs if p.mask & mask == p.mask), default=0)
            return not hw.fits(weight_bytes, held * d)
        return False

    def _streams(self, mask: int, weight_bytes: int) -> bool:
        """True when only tiled members may run the set (every other member holds its weights
        and cannot): then its weights beyond the buffer are streamed, re-read per tile."""
        return all(m.tiled or (m.holds_weights and self._over_weights(mask, weight_bytes))
                   for m in self.members)
