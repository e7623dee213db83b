"""The exact solver's lazy search: down-sets reached from the A* frontier, not listed up front.

The eager search of `search.exact.solver` lists every down-set reachable with the candidate sets
before it starts, for its heuristic (the least lower-bound cost to complete each one). That is
cheap on chain-like networks (at most 1,029 down-sets on the zoo) and hopeless on wide
antichains: the pieces of a fissioned op, HRNet's branches and exchange units, or a network
whose connected convex sets alone exceed the set cap (a transformer under BRR at 2 MiB: about
500,000 sets for about 1,000 down-sets). This search needs neither list:

* **States from the frontier.** A down-set is created when an arc reaches it; a settled state
  is expanded by growing its *increments* there and then: the weakly connected sets G of
  unplaced ops with S + G a down-set (every such set is convex), grown from one op by adding a
  successor v and every unplaced ancestor of v. Every increment of S is grown so (each step
  stays inside it), the pruning rules of `search.exact.candidates` prune a set with all its
  supersets, so an increment that may run is never missed, and a plan's group is an increment
  of the state it is placed at.
* **A partial order reduction.** Groups placed one after another in any order reach the same
  states through every interleaving: with k independent pieces, 2^k states. At a state S with
  frontier F, let v be the least unplaced op (ids are topological, so v is on F). Every plan
  that completes S has a group G_v holding v. If G_v can be placed at S, move it to the front
  (the groups of a plan are disjoint, and one whose producers are placed can go first).
  Otherwise its least unplaced ancestor outside it, w (on F: its producers are ancestors of
  G_v and not in G_v by convexity, so placed), has a group G_w that precedes G_v; repeat
  with G_w (the graph of groups is acyclic, so this ends at a group that can go first). So it
  is enough to expand, at S, the increments holding an op of Z: v and every op of F that can
  be such a w for a set holding an op of Z (`_reduced`: the set is connected, so z and w are
  linked through ops of it whose earlier frontier ancestors it must hold too; where the
  pruning rules rule those ops out together, w is not added). The reduced graph keeps, for
  every plan, a path with the same groups, so the optimum is unchanged; the pieces of a
  fissioned op are then placed nearly in order instead of in every order.
* **A closed-form heuristic** (`_Heuristic`): the compulsory traffic of the unplaced fusable
  ops (their weights, network outputs, one read of every tensor they read), plus a write and a
  read of every tensor whose producer cannot share a group with one of its consumers, and one
  read per member of a clique of consumers that pairwise cannot share a group, and under BRR
  the weights each unplaced op must stream at least (`streaming_floors`); and, where it is
  larger, the chains' bound (`search.exact.chains`: the cuts that weights force along paths
  of ops). Both are consistent over the arcs that may run (proofs in docs/exact.md), and so is
  their maximum, so the A* of the eager search runs as it is: lazy costing of sets, BRR fit
  bounds, caps counting work.
* **The incumbent's bound** (BRR): a plan holding a set S' of two or more ops placed at a
  settled state S costs at least g(S) + h(S) + (weights that cannot stay resident) x (tiles -
  1) of any subset of S' (`CandidateSpace.lb_fit`: both factors only grow with the set); a set
  whose bound exceeds the best incumbent is pruned with its supersets. The answer never
  exceeds the incumbent, so no plan it could be is lost.

Caps count work: distinct sets grown (``max_sets``), down-sets reached (``max_states``) and sets
costed (``max_costed``), each with what the eager search already did; an opt-in deadline stays
available. docs/exact.md, "Lazy search", has the proofs.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from search.exact.candidates import (
    Candidate,
    _Entry,
    _Growth,
    _sum_over,
    bits,
    evaluate_set,
    fit_bound,
)
from search.exact.chains import ChainBound
from simulator.cost import CostCache
from simulator.workload.graph import ComputeGraph

__all__ = ["LazyOutcome", "lazy_search"]


class _SetStore:
    """The sets the lazy search has grown, indexed like a `CandidateSpace` (what
    `evaluate_set` and `fit_bound` read)."""

    def __init__(self) -> None:
        self.masks: list[int] = []
        self.pred_masks: list[int] = []
        self.lb_dram: list[int] = []
        self.lb_cycles: list[int] = []
        self.lb_fit: list[int] = []
        self.index: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.masks)

    def add(self, mask: int, pred: int, bounds: tuple[int, int, int]) -> int:
        k = len(self.masks)
        self.index[mask] = k
        self.masks.append(mask)
        self.pred_masks.append(pred)
        self.lb_dram.append(bounds[0])
        self.lb_cycles.append(bounds[1])
        self.lb_fit.append(bounds[2])
        return k


class _Heuristic:
    """A consistent lower bound of the (DRAM, cycles) left to any plan completing a down-set.

    DRAM: the exact cost of every unplaced unfusable op (it runs alone, layer by layer, in
    every plan); over the other unplaced ops, their weights and network outputs, plus for every
    tensor t a lower bound of its traffic still to come (its reads by fusable consumers and its
    write). With K the unplaced fusable consumers of t and Q a fixed clique of its consumers
    that pairwise cannot share a group (`never`):

    * t already written (its producer placed or unfusable, or a network input): max(1 if K,
      |Q & K|) reads, each group holding a consumer reads t once and holds at most one of Q;
    * t's producer p fusable and unplaced: r = max(|Q| - [a member of Q may join p], [a
      consumer cannot join p]) reads, and a write when r > 0 or an unfusable op reads t (unless
      t is a network output, whose write is counted above).

    BRR adds, per unplaced fusable op, its weight streaming floor (`streaming_floors`: every
    group that runs pays at least its compulsory traffic plus its ops' floors, so h stays
    consistent); `compulsory` is the bound without them.

    Cycles: the larger of the MACs of the unplaced fusable ops that are computed whole (not
    upstream of an op that leaves input rows unread) over the MACs per cycle, and the DRAM bound
    over the bandwidth plus one latency (a group's cycles are at least both, `timing`), plus
    the exact cycles of the unplaced unfusable ops.
    """

    def __init__(self, graph: ComputeGraph, growth: _Growth,
                 never: Callable[[int], bool]) -> None:
        n = len(graph)
        d = growth.hw.dtype_bytes
        self.n, self.nbytes = n, (n + 7) // 8
        unf = growth.unfusable_mask
        fus = np.array([not unf >> o & 1 for o in range(n)])
        out = np.array([op.output_elems for op in graph], dtype=np.int64)
        self.base = np.where(fus, (np.array(growth.weights, dtype=np.int64)
                                   + np.where([o in graph.output_set for o in range(n)],
                                              out, 0)) * d, 0)
        # BRR: the weights an op streams at least (`streaming_floors`); 0 elsewhere
        self.stream = np.where(fus, np.array(streaming_floors(growth), dtype=np.int64), 0)
        excluded = 0
        for o in range(n):
            if growth.drop_mask >> o & 1:
                excluded |= growth.maybe_part[o]
        self.macs = np.array([graph[o].macs if fus[o] and not excluded >> o & 1 else 0
                              for o in range(n)], dtype=np.int64)
        self.macs_per_cycle = growth.hw.macs_per_cycle
        self.bandwidth, self.latency = growth.hw.dram_bandwidth, growth.hw.dram_latency
        # an unfusable op runs alone, layer by layer: its (DRAM, cycles) is known exactly
        alone = [growth.cache.run((o,)) if unf >> o & 1 else None for o in range(n)]
        self.alone_dram = np.array([c.dram_bytes if c else 0 for c in alone], dtype=np.int64)
        self.alone_cycles = np.array([c.timing.cycles if c else 0 for c in alone],
                                     dtype=np.int64)
        consumers: dict[int, list[int]] = {}
        for op in graph:
            for ref in dict.fromkeys(op.inputs):
                consumers.setdefault(ref, []).append(op.id)
        flat: dict[str, list[int]] = {"cons": [], "q": [], "near": [], "far": []}
        starts: dict[str, list[int]] = {key: [] for key in flat}
        size, producer, written, unf_reader, netout = [], [], [], [], []
        self.refs: list[int] = []  # the tensor of each term
        for ref, readers in sorted(consumers.items()):
            fusable = [c for c in readers if fus[c]]
            p_fusable = ref >= 0 and bool(fus[ref])
            unfusable_reader = len(fusable) < len(readers)
            if not fusable and not (p_fusable and unfusable_reader):
                continue
            clique: list[int] = []
            for c in fusable:
                if all(never(1 << c | 1 << q) for q in clique):
                    clique.append(c)
            if len(clique) < 2:
                clique = []
            near = [c for c in clique if p_fusable and not never(1 << ref | 1 << c)]
            far = [c for c in fusable if p_fusable and never(1 << ref | 1 << c)]
            for key, items in (("cons", fusable), ("q", clique), ("near", near), ("far", far)):
                starts[key].append(len(flat[key]))
                flat[key].extend(items)
            size.append(graph.tensor_elems(ref) * d)
            self.refs.append(ref)
            producer.append(ref if p_fusable else -1)
            written.append(not p_fusable)
            unf_reader.append(unfusable_reader)
            netout.append(ref >= 0 and ref in graph.output_set)
        self.flat = {k: np.array(v, dtype=np.int64) for k, v in flat.items()}
        self.starts = {k: np.array(v + [len(flat[k])], dtype=np.int64) for k, v in starts.items()}
        self.size = np.array(size, dtype=np.int64)
        self.producer = np.array(producer, dtype=np.int64)
        self.written = np.array(written, dtype=bool)
        self.unf_reader = np.array(unf_reader, dtype=bool)
        self.netout = np.array(netout, dtype=bool)
        self.cache: dict[int, tuple[tuple[int, int], int, int]] = {}
        self.chains: ChainBound | None = None
        self.size_free = self.size  # the terms' sizes with the chains' own tensors left out

    def attach(self, chains: ChainBound) -> None:
        """Take the larger of this bound and the chains' (`search.exact.chains`) from now on:
        the terms of the tensors that are no chain's own, the fixed part and the chains' D."""
        self.chains = chains
        self.size_free = np.where([r in chains.owned_refs for r in self.refs], 0, self.size)
        self.cache.clear()

    def _count(self, key: str, unplaced: np.ndarray) -> np.ndarray:
        cs = np.concatenate(([0], np.cumsum(unplaced[self.flat[key]], dtype=np.int64)))
        st = self.starts[key]
        return cs[st[1:]] - cs[st[:-1]]

    def __call__(self, placed: int) -> tuple[int, int]:
        """(DRAM, cycles) left at least after `placed`, the weight streaming floors
        included in the DRAM, and the chains' bound where it is larger."""
        return self._both(placed)[0]

    def compulsory(self, placed: int) -> int:
        """The DRAM part of the bound without the weight streaming floors (what the
        incumbent's bound adds a set's own streaming to, docs/exact.md)."""
        return self._both(placed)[1]

    def streamed(self, placed: int) -> int:
        """The DRAM part with the weight streaming floors, without the chains' bound: what the
        incumbent's bound (b) takes a set's own floors from (docs/exact.md)."""
        return self._both(placed)[2]

    def _both(self, placed: int) -> tuple[tuple[int, int], int, int]:
        hit = self.cache.get(placed)
        if hit is not None:
            return hit
        raw = np.frombuffer(placed.to_bytes(self.nbytes, "little"), dtype=np.uint8)
        unplaced = 1 - np.unpackbits(raw, bitorder="little")[:self.n].astype(np.int64)
        fixed = int(self.base @ unplaced)
        dram = free = fixed
        if len(self.size):
            any_reader = self._count("cons", unplaced) > 0
            q = self._count("q", unplaced)
            near = self._count("near", unplaced) > 0
            far = self._count("far", unplaced) > 0
            pending = ~self.written & (unplaced[np.maximum(self.producer, 0)] > 0)
            done_reads = np.maximum(any_reader.astype(np.int64), q)
            reads = np.maximum(q - near, far.astype(np.int64))
            write = ((reads > 0) | self.unf_reader) & ~self.netout
            traffic = np.where(pending, reads + write, done_reads)
            dram += int(self.size @ traffic)
            free += int(self.size_free @ traffic)
        # the cycles bound reads the compulsory part only (as proven before the floors)
        cycles = max(int(self.macs @ unplaced) // self.macs_per_cycle,
                     int(dram // self.bandwidth) + (self.latency if dram else 0))
        # the unfusable ops still to run alone, at their exact cost
        alone = int(self.alone_dram @ unplaced)
        dram += alone
        cycles += int(self.alone_cycles @ unplaced)
        full = dram + int(self.stream @ unplaced)
        best = full
        if self.chains is not None:
            best = max(full, free + alone + self.chains(placed))
        self.cache[placed] = out = ((best, cycles), dram, full)
        return out


@dataclass
class LazyOutcome:
    """What the lazy search found.

    Attributes:
        path: The groups of the least-(DRAM, cycles) plan, in placement order; None when a cap
            stopped the search before a plan was settled.
        costed: Sets costed through the cost cache.
        states: Down-sets settled (expanded).
        listed: Down-sets reached (the ``max_states`` count).
        sets: Distinct sets grown (the ``max_sets`` count).
        increments: Increments grown over all expanded states (a set counts once per state).
        reason: Why a cap stopped it ("" when none did).
        bound: With the costing cap, the key where it first dropped a set (a lower bound of the
            optimum); None otherwise.
        lower: With a work cap, a proven lower bound of the optimum's DRAM: the least key of
            the queue, of the state being expanded and of the first set the costing cap
            dropped (every plan at or below the incumbent has a state or an entry there);
            None without a cap or with the deadline.
        timed_out: The opt-in deadline (not a work cap) stopped it.
        pruned_by_incumbent: Sets pruned (with their supersets) by the incumbent's bound.
        store: The sets grown, with their bounds (what a capped solve falls back on).
    """

    path: list[Candidate] | None
    costed: int = 0
    states: int = 0
    listed: int = 0
    sets: int = 0
    increments: int = 0
    reason: str = ""
    bound: int | None = None
    timed_out: bool = False
    pruned_by_incumbent: int = 0
    store: _SetStore | None = None
    lower: int | None = None


class _Stop(Exception):
    """A work cap or the deadline stopped the search."""

    def __init__(self, reason: str, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.timed_out = reason, timed_out


_FRESH, _PENDING, _COSTED = 0, 1, 2  # stages of a queue entry (as in the eager search)


@dataclass
class _Search:
    """One lazy A* run (the mutable bookkeeping behind `lazy_search`)."""

    graph: ComputeGraph
    cache: CostCache
    max_sets: int | None
    max_states: int | None
    budget: object  # search.exact.solver._Budget: max_costed, deadline, exhausted(), reason
    upper: int | None
    sets_used: int = 0
    states_used: int = 0
    found: frozenset[int] = frozenset()
    growth: _Growth = field(init=False)
    store: _SetStore = field(default_factory=_SetStore)

    def __post_init__(self) -> None:
        g = self.growth = _Growth(self.graph, self.cache, None, None, one_tile=True)
        self.n = len(self.graph)
        self.full = (1 << self.n) - 1
        self.d = g.hw.dtype_bytes
        # BRR, or a mixed scheme with a tiled member (which alone may run the sets whose
        # weights the weight-holding members cannot hold: `_Growth._streams`)
        self.brr = g.scheme.tiled
        self.mixed = not g.scheme.tiled and any(m.tiled for m in g.members)
        self.pred = list(g.closure.pred)
        self.succ = [bits(m) for m in g.closure.succ]
        self.anc = g.closure.anc
        self.phi = streaming_floors(g)
        # the incumbent's bounds while the heuristic is built: plan >= 0 + ...
        self.start_h = self.start_full = 0
        self.h = _Heuristic(self.graph, g, self._never)
        self.start_h, self.start_full = self.h.compulsory(0), self.h.streamed(0)
        if not self.mixed:  # the chains' bound (search.exact.chains), asked at full strength
            self.h.attach(ChainBound(self.graph, g, self._never))
        self.known: dict[int, Candidate | None] = {}
        self.fit: dict[int, int | None] = {}
        self.touched: set[int] = set()
        self.g: dict[int, tuple[int, int]] = {0: (0, 0)}
        self.back: dict[int, Candidate] = {}
        self.heap: list[tuple[int, int, int, int, int, int, int]] = []
        self.seq = 0
        self.costed = 0
        self.increments = 0
        self.pruned_by_incumbent = 0
        self.refound = 0  # sets grown that the earlier attempt had found (`found`)
        self.bound: int | None = None
        self.reach: dict[tuple[int, int], int] = {}
        self.expanding: int | None = None  # the state whose increments are being grown

    # --- which ops may share a group ------------------------------------------------------

    def _dead(self, mask: int, weights: int, tiles: int, res: int,
              floor: tuple[int, int] | None = None, phi: int | None = None) -> bool:
        """True when no plan at or below the incumbent holds a set of two or more ops
        containing `mask` (weights, largest fit-floor tiles and resident floor of `mask`) and,
        with `floor` (g + h of a state, without and with the weight streaming floors), placed
        at that state; `phi`: the streaming floors of the set's ops when the caller carries
        their sum (else summed here).

        Such a plan costs at least g + h(S) without the floors plus E(mask), and at least g +
        h(S) with them, less phi of the set's ops, plus E(mask) (docs/exact.md, "Incumbent
        bound"); E - phi only grows with the set once the excess is positive, so a set ruled
        out here is pruned with its supersets."""
        if self.upper is None or not (self.brr or self.mixed):
            return False
        if self.mixed and not self.growth._streams(mask, weights * self.d):
            return False  # a member holding its weights may run it, re-reading nothing
        hw = self.growth.hw
        excess = weights + res - hw.buffer_bytes // self.d
        if hw.is_split:  # resident weights also fit the weight buffer alone
            excess = max(excess, weights - hw.weight_capacity // self.d)
        if excess <= 0 or tiles <= 1:
            return False
        comp, full = (self.start_h, self.start_full) if floor is None else floor
        extra = excess * (tiles - 1) * self.d
        if comp + extra > self.upper:
            return True
        if phi is None:
            phi = _sum_over(self.phi, mask)
        return full + extra - phi > self.upper

    def _never(self, mask: int) -> bool:
        """True when no group of two or more ops that may run holds every op of `mask`.

        Such a group is convex, so it holds the convex hull of `mask` (the ops on a path
        between two of them): every rule below is asked of the hull."""
        g = self.growth
        mask = g.closure.hull(mask)
        if mask & g.unfusable_mask:
            return True
        ops = bits(mask)
        weights = sum(g.weights[o] for o in ops)
        if g.scheme.holds_weights:  # F_beta >= weights + a window floor or a tensor held whole
            return g._over_weights(mask, weights * self.d)
        if self.mixed and not g._streams(mask, weights * self.d):
            return False  # a member holding its weights may run a group holding them
        if g._whole_tensors(mask):  # no group that fits holds them (BRR; {} without it)
            return True
        return self._dead(mask, weights, max(g.floor_tiles[o] for o in ops),
                          max(g.floor_res[o] for o in ops))

    # --- the partial order reduction ------------------------------------------------------

    def _reduced(self, placed: int) -> list[int]:
        """Z: the frontier ops whose increments the state expands (module docs).

        f joins Z when a set G holding some z of Z may have f as its least frontier ancestor
        outside it. Then G is connected: along a path in G from z to an op below f, the
        frontier ancestors of consecutive ops are nested, so z and f are linked through ops m
        of G, each linking its frontier ancestors A(m); every frontier op before f that is an
        ancestor of m is in G (else it, not f, is the least). So f joins only if z and f are
        linked through the ops m for which {z} and the frontier ops of A(m) before f may share
        a group (`_never`, asked of their convex hull)."""
        pred, anc = self.pred, self.anc
        unplaced = self.full & ~placed
        front = [v for v in bits(unplaced) if pred[v] & ~placed == 0]
        if len(front) == 1:
            return front
        fmask = sum(1 << f for f in front)
        links = sorted({a for m in bits(unplaced) if (a := anc[m] & fmask) & (a - 1)})
        chosen, inz, at = [front[0]], 1 << front[0], 0
        while at < len(chosen) and inz != fmask:
            z = chosen[at]
            at += 1
            if self._never(1 << z):
                continue  # an op that runs alone: its only group is itself
            # the largest f each link still serves: the prefix of its members before f, with z,
            # must be able to share a group
            reach = sorted(((self._reach(z, a), a) for a in links), reverse=True)
            parent = {f: f for f in front}
            i = 0
            for f in reversed(front):
                while i < len(reach) and reach[i][0] >= f:
                    members = bits(reach[i][1])
                    r0 = _find(parent, members[0])
                    for m in members[1:]:
                        parent[_find(parent, m)] = r0
                    i += 1
                if not inz >> f & 1 and _find(parent, f) == _find(parent, z):
                    chosen.append(f)
                    inz |= 1 << f
        return sorted(chosen)

    def _reach(self, z: int, a: int) -> int:
        """The first member m of the link `a` (ascending) such that z and the members up to m
        cannot share a group (`_never`), or n when there is none; memoised (it depends on z
        and a alone)."""
        key = (z, a)
        hit = self.reach.get(key)
        if hit is None:
            acc, hit = 1 << z, self.n
            for m in bits(a):
                acc |= 1 << m
                if self._never(acc):
                    hit = m
                    break
            self.reach[key] = hit
        return hit

    # --- growth of increments -------------------------------------------------------------

    def _check(self) -> None:
        if (self.max_sets is not None
                and self.sets_used + len(self.store) - self.refound > self.max_sets):
            raise _Stop(f"set cap ({self.max_sets:,} sets found and grown)")
        if self.max_states is not None and self.states_used + len(self.h.cache) > self.max_states:
            raise _Stop(f"state cap ({self.max_states:,} down-sets listed)")
        deadline = self.budget.deadline
        if deadline is not None and time.perf_counter() > deadline:
            raise _Stop("time cap", timed_out=True)

    def _emit(self, placed: int, e: _Entry) -> None:
        mask = e[0]
        k = self.store.index.get(mask)
        if k is None:
            dram, cycles, fit = self.growth._bounds(e)
            if self.brr and not mask & self.growth.unfusable_mask:
                # every set that runs pays its ops' weight streaming floors on top of its
                # compulsory traffic (`streaming_floors`; the entry carries their sum)
                dram += e[11] * self.d
                fit = max(fit, dram)
            k = self.store.add(mask, e[4] & ~mask, (dram, cycles, fit))
            self.refound += mask in self.found  # counted once, as the earlier attempt's
        self.increments += 1
        self._push(placed, k)
        if self.increments % 256 == 0:
            self._check()

    def _expand(self, placed: int) -> None:
        self.expanding = placed
        self._grow_increments(placed)
        self.expanding = None

    def _grow_increments(self, placed: int) -> None:
        g = self.growth
        c = g.closure
        unfusable = g.unfusable_mask
        seen: set[int] = set()
        # a set placed here costs at least its lower bound, so a plan through here holding it
        # costs at least g + h of here plus the set's weight re-reads (`_dead`)
        floor = (self.g[placed][0] + self.h.compulsory(placed),
                 self.g[placed][0] + self.h.streamed(placed))
        for z in self._reduced(placed):
            e = g._single(z)
            if e[0] not in seen:
                seen.add(e[0])
                self._emit(placed, e)
            if not g.scheme.searchable or unfusable >> z & 1:
                continue
            queue = deque([e])
            while queue:
                e = queue.popleft()
                mask = e[0]
                for v in bits(e[3] & ~mask & ~placed & ~unfusable):
                    add = c.anc[v] & ~placed & ~mask
                    grown = mask | add
                    if grown in seen:
                        continue
                    seen.add(grown)
                    added = bits(add)
                    w2 = e[7] + sum(g.weights[o] for o in added)
                    if g._prune(grown, w2 * self.d):
                        continue
                    e2 = g._extend(e, grown, 0, 0, added, w2)
                    if self._dead(grown, w2, e2[9], e2[10], floor,
                                  e2[11] * self.d if self.brr else 0):
                        self.pruned_by_incumbent += 1
                        continue
                    self._emit(placed, e2)
                    queue.append(e2)
        self._check()

    # --- the A* (as `search.exact.solver._LazyAStar`, over reached states) ------------------

    def _key(self, placed: int, k: int, dram: int, cycles: int) -> tuple[int, int]:
        g, h = self.g[placed], self.h(placed | self.store.masks[k])
        return g[0] + dram + h[0], g[1] + cycles + h[1]

    def _push(self, placed: int, k: int) -> None:
        nxt = placed | self.store.masks[k]
        if nxt in self.back:
            return
        c = self.known.get(k, _MISSING)
        if c is None:
            return
        if c is not _MISSING:
            key, stage = self._key(placed, k, c.dram_bytes, c.cycles), _COSTED
        else:
            touched = k in self.touched
            dram = self.fit.get(k, self.store.lb_fit[k]) if touched else self.store.lb_dram[k]
            stage = _PENDING if touched else _FRESH
            key = self._key(placed, k, dram, self.store.lb_cycles[k])
        self.seq += 1
        # ties: the state nearer the end first (a plateau of equal keys is left depth-first)
        heapq.heappush(self.heap, (key[0], key[1], -nxt.bit_count(), self.seq, placed, k,
                                   stage))

    def _resolve(self, key: int, placed: int, k: int) -> None:
        if k not in self.known:
            if self.budget.exhausted(self.costed):
                self.bound = key if self.bound is None else self.bound
                return
            if k not in self.fit:
                self.fit[k] = fit_bound(self.cache, self.store, k)
            fit = self.fit[k]
            if fit is None:
                self.known[k] = None
                return
            if self._key(placed, k, fit, 0)[0] > key:
                self._push(placed, k)
                return
            self.known[k] = evaluate_set(self.cache, self.store, k, fit)
            self.costed += 1
        self._push(placed, k)

    def _settle(self, placed: int, k: int) -> int:
        c = self.known[k]
        assert c is not None
        g = self.g[placed]
        nxt = placed | c.mask
        self.g[nxt], self.back[nxt] = (g[0] + c.dram_bytes, g[1] + c.cycles), c
        return nxt

    def run(self) -> LazyOutcome:
        reason, timed_out = "", False
        try:
            self._expand(0)
            while self.heap and self.full not in self.back:
                key, _, _, _, placed, k, stage = heapq.heappop(self.heap)
                if placed | self.store.masks[k] in self.back:
                    continue
                if stage == _COSTED:
                    nxt = self._settle(placed, k)
                    if nxt != self.full:
                        self._expand(nxt)
                elif stage == _PENDING:
                    self._resolve(key, placed, k)
                else:
                    self.touched.add(k)
                    self._push(placed, k)
        except _Stop as stop:
            reason, timed_out = stop.reason, stop.timed_out
        lower = self._lower() if reason and not timed_out else None
        path = None
        if not reason and self.full in self.back:
            path, state = [], self.full
            while state:
                c = self.back[state]
                path.append(c)
                state ^= c.mask
            path.reverse()
        return LazyOutcome(path=path, costed=self.costed, states=len(self.back) + 1,
                           listed=len(self.h.cache), sets=len(self.store),
                           increments=self.increments, reason=reason,
                           bound=self.bound if not reason else None, timed_out=timed_out,
                           pruned_by_incumbent=self.pruned_by_incumbent, store=self.store,
                           lower=lower)

    def _lower(self) -> int:
        """A lower bound of the optimum's DRAM when a work cap stops the search.

        Let P be a plan at or below the incumbent along the reduced graph (the optimal plan is
        one), and S its last state that is settled (the empty state is settled first). Its
        keys are lower bounds (h is consistent, an entry's set is keyed by a bound of its
        cost), and no set of P is pruned (the pruning rules only drop sets no plan at or
        below the incumbent holds). If S is being expanded, g(S) + h(S) <= cost(P). Else the
        arc from S to P's next state was pushed and has not settled it, so an entry for it
        is in the queue (a fresh or pending entry is re-queued, at a key still <= cost(P),
        until it is costed and settles), unless the costing cap dropped it (`bound`). So
        cost(P) >= the least of those keys (a key that belongs to no such plan only lowers
        the least), and cost(P) >= h(empty)."""
        keys = [self.heap[0][0]] if self.heap else []
        if self.expanding is not None:
            keys.append(self.g[self.expanding][0] + self.h(self.expanding)[0])
        if self.bound is not None:
            keys.append(self.bound)
        return max(min(keys, default=0), self.h(0)[0])


_MISSING = object()


def streaming_floors(growth: _Growth) -> list[int]:
    """Per op o, bytes that every BRR group holding o reads beyond its compulsory traffic:
    phi(o) = min over the tile counts T >= tiles[o] of max(0, W(o) + act_T(o) - buffer) x
    (T - 1) x dtype bytes, with tiles and act_T the op's fit floors
    (`simulator.cost.brr.fit_floors`: some tile holds at least act_T(o) activations at o's
    position, so resident weights are at most buffer - act_T(o)); all 0 under the other
    dataflows.

    Over the ops of any set S that runs at T tiles, sum phi(o) <= max(0, W(S) + max act_T -
    buffer) x (T - 1), at most the weights S streams re-read T - 1 more times: with P the ops
    of S where W(o) + act_T(o) > buffer, sum over P of (W(o) + act_T(o) - buffer) <= W(P) +
    max_P act_T - buffer (each other term act_T(o) - buffer is <= 0: act_T(o) <= buffer for an
    op that fits at T, and T >= tiles[o]); each op's phi is at most its term at T. The bound
    holds for a singleton as well (an unfusable op, run alone layer by layer, is excluded by
    the caller). So the F_D of every set that runs is at least its compulsory traffic plus the
    sum of its ops' phi, which keeps the heuristic consistent with phi of the unplaced ops
    added (docs/exact.md, "Heuristic").

    Split buffers: an op whose weights exceed the weight buffer W cannot be resident either,
    so its term at T is also at least max(0, W(o) - W) x (T - 1); each op's term stays at most
    its own re-reads, (T - 1) x W(o) when streamed and 0 when resident, so the sum over a set
    that runs stays within its F_D above the compulsory."""
    if not growth.scheme.tiled:
        return [0] * len(growth.weights)
    return [s * growth.hw.dtype_bytes for s in growth.floor_stream]


def _find(parent: dict[int, int], x: int) -> int:
    """Union-find root of `x` (path halving)."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def lazy_search(graph: ComputeGraph, cache: CostCache, *, max_sets: int | None,
                max_states: int | None, budget, upper: int | None = None, sets_used: int = 0,
                states_used: int = 0, found: frozenset[int] = frozenset()) -> LazyOutcome:
    """The least-(DRAM, cycles) plan by the lazy search (module docs).

    Args:
        graph: The network.
        cache: Group costs of (graph, hardware, dataflow).
        max_sets: Grow at most this many distinct sets, `sets_used` included (None: no cap).
        max_states: Reach at most this many down-sets, `states_used` included (None: no cap).
        budget: The costing cap and the opt-in deadline (`search.exact.solver._Budget`).
        upper: DRAM of the best valid plan known: sets that provably cannot be in a plan at or
            below it are pruned (None: none known).
        sets_used, states_used: Work an earlier attempt already did under the same caps (the
            eager search's enumeration and listing).
        found: The sets that attempt found (``sets_used`` of them): a set it found and this
            search grows again counts once against ``max_sets`` (the cap counts distinct
            sets).
    """
    return _Search(graph, cache, max_sets, max_states, budget, upper, sets_used,
                   states_used, found).run()
