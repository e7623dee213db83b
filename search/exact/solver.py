"""Exact partition solver: shortest path (lazy A*) over the down-sets of the DAG.

Plan DRAM is the sum of per-group F_D, so the least-DRAM valid plan is an exact set partition
over the candidate groups (`search.exact.candidates`) whose graph of groups is acyclic. Such a
plan has a topological order of its groups; placing them in that order, every group is placed
when all its producers already are. So the states are the sets of placed ops reachable this way
(each one closed under predecessors, a *down-set*), and an arc adds one candidate disjoint from
the state whose external producers all lie in it. The graph of groups of any path from the empty
set to all ops is acyclic by construction (every edge between groups goes from an earlier arc to
a later one), and every valid plan is a path, so the shortest path is the optimum.

Applicable sets are found through their smallest op, which is a source of the group and so lies
on the state's frontier (unplaced ops whose producers are all placed). Groups are costed
*lazily* by an A* search over the down-sets: an arc enters the queue priced at its set's lower
bound (`search.exact.candidates`: F_D >= compulsory traffic, cycles >= their roofline), with
the heuristic h(S) = least lower-bound cost to complete S over all sets (fitting or not), which
is consistent. Only when a lower-bound entry reaches the front of the queue is its set costed
through the `CostCache` (dropped if it does not fit, else re-queued at its true cost); a state
is settled when a costed entry reaches it. Every arc of a cheaper path would have been popped
first, so the first settled full state is optimal, as with costing every set first, at a
fraction of the group evaluations. Under BRR the costing is deferred further behind the fit
bounds (`_LazyAStar`; `search.exact.candidates.fit_bound`) without changing the order in which
sets are costed and states settled, so the plan is the same, ties included. Keys are (DRAM,
cycles) tuples (lower bounds hold for both components, so the lexicographic order is
respected), ties broken by push order: least DRAM, then least cycles, then deterministically.

Caps count work, never time, by default: sets found by the enumeration (`max_sets`), down-sets
listed (`max_states`) and sets costed (`max_costed`; `DEFAULT_CAPS`), so an answer is a function
of the inputs alone, the same on any machine, under any load. With `max_costed` reached, sets
not yet costed count as not running; the plan is then optimal among the sets costed, and the
key where the cap first dropped a set is a proven lower bound on the optimum (every path, the
optimal one included, had an entry in the queue at or above it): a plan at or below that bound
is proven optimal all the same. A wall-clock limit (`time_limit`) is an explicit opt-in safety;
an answer it cut says so (``reproducible=False``).

Wide antichains (the pieces of a fissioned op, HRNet's branches) make the down-sets, and
transformers under BRR at large buffers the connected convex sets, too many to list: where the
eager search meets its half of the set or state cap, `optimum` runs the lazy search of
`search.exact.lazy` (down-sets reached from the A* frontier, a partial order reduction, a
closed-form heuristic) with the rest of the caps.

Incumbents: `optimum` starts from the best valid plan it is given or computes cheaply (the
optimal segment plan and the greedy fusion plan, `search.baselines`, costed through the same
cache) and never returns a worse one: when a cap leaves the A*'s answer above the incumbent, the
incumbent is the answer (``source`` says which), proven optimal when the cap's lower bound
reaches it.

Two-objective fronts:

* ``dram,cycles``: both are additive over groups, so a label-setting DP over the same states
  with Pareto sets of (DRAM, cycles) labels gives the exact front.
* ``dram,mbu``: the search's ``mbu`` objective (`search.problem.PlanScore.fused_mbu_bytes`: the
  largest F_beta over groups of two or more ops, 0 layer by layer) is not additive; an epsilon
  constraint solves the DRAM problem with the multi-op candidates of F_beta <= t (singletons
  always allowed), for t walking down the distinct F_beta values of the multi-op candidates
  (each step below the MBU of the last optimum, down to layer by layer), and keeps the
  non-dominated points.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from search.exact.candidates import (
    Candidate,
    CandidateSpace,
    costed_candidates,
    enumerate_space,
    evaluate_set,
    fit_bound,
)
from search.exact.descent import descend
from search.exact.lazy import lazy_search
from search.exact.relax import labelling_bound
from search.registry import DEFAULT_EXACT_MAX_COSTED
from simulator.cost import CostCache
from simulator.cost.traffic import compulsory_bytes
from simulator.plan import FusionGroup, PartitionPlan, layer_by_layer
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

__all__ = ["DEFAULT_CAPS", "ExactCaps", "ExactResult", "FrontPoint", "Incumbent", "StateCap",
           "baseline_incumbents", "enumerate_space", "front", "optimum", "plan_incumbent",
           "solve"]


@dataclass(frozen=True)
class ExactCaps:
    """Counted work the exact solver may do (None: no cap); never wall-clock time.

    Attributes:
        max_sets: Candidate sets the enumeration may find and the lazy search may grow
            (together; `optimum` gives the enumeration half).
        max_states: Down-sets the eager search may list and the lazy search may reach
            (together; beyond it: the best incumbent, not proven).
        max_costed: Sets the A* may cost through the cost cache.
    """

    max_sets: int | None = None
    max_states: int | None = None
    max_costed: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_sets", "max_states", "max_costed"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value <= 0):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")

    def to_dict(self) -> dict[str, int | None]:
        """The three caps by name."""
        return {"max_sets": self.max_sets, "max_states": self.max_states,
                "max_costed": self.max_costed}


DEFAULT_CAPS = ExactCaps(max_sets=200_000, max_states=200_000, max_costed=DEFAULT_EXACT_MAX_COSTED)
"""The work caps of `exact`, `auto` and every run's optimum. Every instance of the CNN zoo (13
networks x 64 KiB-2 MiB x LBDF/BRR, as imported and fused: 312) proves inside them with at most
72,190 sets found, 547 down-sets listed and 1,567 sets costed, and every one of the
transformers' (ViT-B/16, DeiT-S, BERT-base, the same grid: 66 that run) with at most 155,283
sets found and grown, 1,233 down-sets listed and 7,420 costed (docs/exact.md, "Benchmark")."""


@dataclass(frozen=True)
class Incumbent:
    """A valid plan known before the solve: an upper bound the solver never returns above.

    Attributes:
        plan: The plan.
        dram_bytes, cycles, mbu_bytes: Its figures (`ExactResult`'s meaning).
        source: Where it came from (``segment_dp``, ``greedy_fit``, a search's name).
        reproducible: False when a wall-clock limit cut the solve that found it (a mixed
            scheme's member optimum, `search.exact.mixed`): an answer it becomes says so.
    """

    plan: PartitionPlan
    dram_bytes: int
    cycles: int
    mbu_bytes: int
    source: str
    reproducible: bool = True

    @property
    def key(self) -> tuple[int, int]:
        """(DRAM, cycles): the solver's order."""
        return self.dram_bytes, self.cycles


class StateCap(RuntimeError):
    """The down-set DP met more states than its cap allows."""


@dataclass(frozen=True)
class ExactResult:
    """The least-DRAM valid plan among the candidate sets.

    Attributes:
        plan: The plan.
        dram_bytes: Its DRAM traffic, whole network (the sum of its groups' F_D).
        cycles: Its analytic cycles.
        mbu_bytes: Its largest F_beta over fused groups.
        candidates: Candidate sets the solver chose from (connected, convex, not pruned).
        costed: Sets the lazy DP costed through the cost cache.
        states: Down-sets the A* settled.
        seconds: Wall time (enumeration + DP).
        enumeration_seconds: Part of `seconds` spent enumerating the sets.
        optimal: True when the plan is proven optimal over all valid plans (no cap cut the
            solve, or its lower bound reaches the plan).
        cap_reason: Why the answer is only optimal among some sets ("" when no cap was hit).
        bound_bytes: With a work cap, a proven lower bound on the optimum's DRAM (the A*
            key where the costing cap first dropped a set; after a lazy search a cap
            stopped, the least key of its frontier, or the labelling relaxation's bound
            where that is higher); None otherwise.
        source: ``exact`` when the plan is the A*'s, else the incumbent's source
            (``segment_dp``, ``greedy_fit``, ...; ``relaxation``: the labelling relaxation's
            plan, `search.exact.relax`): the A*'s capped answer was worse.
        reproducible: False when a wall-clock limit cut the solve (the answer then depends on
            the machine and its load); True for every answer of the work caps.
        caps: The work caps the solve ran under.
        search: ``eager`` (every down-set listed first, `solve`), ``lazy`` (down-sets reached
            from the A* frontier, `search.exact.lazy`) or ``one_group`` (the whole network as
            one group at its compulsory traffic, proven without a search: `_one_group`).
        listed: Down-sets listed (eager) or reached (lazy); None when the listing was cut.
    """

    plan: PartitionPlan
    dram_bytes: int
    cycles: int
    mbu_bytes: int
    candidates: int
    costed: int
    states: int
    seconds: float
    enumeration_seconds: float
    optimal: bool
    cap_reason: str
    bound_bytes: int | None = None
    source: str = "exact"
    reproducible: bool = True
    caps: ExactCaps = ExactCaps()
    search: str = "eager"
    listed: int | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready figures (the plan is left out)."""
        return {"dram_bytes": self.dram_bytes, "cycles": self.cycles,
                "mbu_bytes": self.mbu_bytes, "groups": len(self.plan),
                "candidates": self.candidates, "costed": self.costed, "states": self.states,
                "seconds": round(self.seconds, 4), "optimal": self.optimal,
                "cap_reason": self.cap_reason, "bound_bytes": self.bound_bytes,
                "source": self.source, "reproducible": self.reproducible,
                "caps": self.caps.to_dict()}


@dataclass(frozen=True)
class FrontPoint:
    """A point of an exact two-objective front and one plan attaining it.

    Attributes:
        plan: A plan attaining the point.
        dram_bytes: Its DRAM traffic.
        second: Its second objective (cycles or MBU bytes).
    """

    plan: PartitionPlan
    dram_bytes: int
    second: int


class _Arcs:
    """Sets of a space indexed by their smallest op, and the frontier of a down-set."""

    def __init__(self, graph: ComputeGraph, masks: Sequence[int], order: Sequence[int]) -> None:
        self.n = len(graph)
        self.pred = [sum(1 << p for p in graph.predecessors(v)) for v in range(self.n)]
        self.by_op: list[list[int]] = [[] for _ in range(self.n)]
        for k in order:
            m = masks[k]
            self.by_op[(m & -m).bit_length() - 1].append(k)

    def frontier(self, placed: int) -> list[int]:
        pred = self.pred
        return [v for v in range(self.n) if not placed >> v & 1 and pred[v] & ~placed == 0]


def _path(back: dict[int, Candidate], full: int) -> list[Candidate]:
    if full not in back and full:
        raise ValueError("no plan covers every op with these candidates")
    path, state = [], full
    while state:
        c = back[state]
        path.append(c)
        state ^= c.mask
    return path[::-1]


@dataclass
class _Budget:
    """Caps on the sets the lazy DP costs; once hit, sets not yet costed count as not running."""

    max_costed: int | None
    deadline: float | None
    reason: str = ""

    @property
    def timed_out(self) -> bool:
        """True when the wall-clock limit (not a work cap) stopped the costing."""
        return self.reason.startswith("time cap")

    def exhausted(self, costed: int) -> bool:
        if not self.reason and self.max_costed is not None and costed >= self.max_costed:
            self.reason = f"costing cap ({self.max_costed:,} sets)"
        if not self.reason and self.deadline is not None and time.perf_counter() > self.deadline:
            self.reason = "time cap"
        return bool(self.reason)


class _ListingCap(StateCap):
    """The listing of the down-sets met its cap (a graph with wide antichains, e.g. the pieces
    of a fissioned op, has exponentially many).

    Attributes:
        timed_out: The wall-clock limit (not the work cap) stopped it."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


def _successors(arcs: _Arcs, space: CandidateSpace, max_states: int | None,
                deadline: float | None = None) -> dict[int, list[int]]:
    """Every down-set reachable with the sets of `space` (fitting or not): its arcs.

    Raises:
        _ListingCap: more than `max_states` down-sets, or `deadline` passed."""
    masks, preds = space.masks, space.pred_masks
    out: dict[int, list[int]] = {}
    stack = [0]
    while stack:
        placed = stack.pop()
        if placed in out:
            continue
        if max_states is not None and len(out) >= max_states:
            raise _ListingCap(f"state cap ({max_states:,} down-sets listed)")
        if deadline is not None and len(out) % 1024 == 1023 and time.perf_counter() > deadline:
            raise _ListingCap(f"time cap while listing the down-sets ({len(out):,} listed)",
                              timed_out=True)
        ks = [k for v in arcs.frontier(placed) for k in arcs.by_op[v]
              if masks[k] & placed == 0 and preds[k] & ~placed == 0]
        out[placed] = ks
        stack.extend(placed | masks[k] for k in ks if placed | masks[k] not in out)
    return out


def _heuristic(succ: dict[int, list[int]], space: CandidateSpace) -> dict[int, tuple[int, int]]:
    """Least lower-bound (DRAM, cycles) to complete each down-set (a consistent heuristic)."""
    masks, lbd, lbc = space.masks, space.lb_dram, space.lb_cycles
    h: dict[int, tuple[int, int]] = {}
    for placed in sorted(succ, key=int.bit_count, reverse=True):
        best = (0, 0) if not succ[placed] else None
        for k in succ[placed]:
            rest = h[placed | masks[k]]
            cand = (lbd[k] + rest[0], lbc[k] + rest[1])
            if best is None or cand < best:
                best = cand
        h[placed] = best
    return h


_MISSING = object()


_LAZY, _PENDING, _COSTED = 0, 1, 2  # stages of a queue entry


class _LazyAStar:
    """A* over the down-sets; a set is costed only when an entry keyed by a bound of its cost
    reaches the front of the queue.

    Entries are ``(DRAM key, cycles key, seq, state, set, stage)``. The order in which sets
    are costed and states settled is that of the plain lazy A* (every set costed the first
    time an entry at its compulsory bound pops, then re-queued at its cost with a new seq);
    the fit bounds only defer that work: when the compulsory entry pops, the set is *touched*
    and re-queued, with the seq its costed entry would get, at its fit bound (`_PENDING`, key
    <= the cost's key); only when that entry pops is the set bounded (`fit_bound`: re-queued
    higher with the same seq, or ruled out) and then costed and re-queued at its cost, still
    with the same seq. A pending entry never pops later than its costed entry would, so the
    costed entries and the settled states come in the plain A*'s order, ties included; sets
    whose pending entries never reach the front are never costed.
    """

    def __init__(self, graph: ComputeGraph, cache: CostCache, space: CandidateSpace,
                 max_states: int | None, budget: _Budget) -> None:
        self.cache, self.space, self.budget = cache, space, budget
        order = sorted(range(len(space)), key=lambda k: space.masks[k])
        arcs = _Arcs(graph, space.masks, order)
        self.full = (1 << arcs.n) - 1
        self.succ = _successors(arcs, space, max_states, budget.deadline)
        self.h = _heuristic(self.succ, space)
        singletons = [k for k in range(len(space)) if space.masks[k].bit_count() == 1]
        self.known: dict[int, Candidate | None] = {
            k: evaluate_set(cache, space, k) for k in singletons}  # a plan exists under caps
        self.costed = len(singletons)
        self.touched: set[int] = set()  # sets whose compulsory entry popped
        self.fit: dict[int, int | None] = {}  # best set bound computed (None: cannot run)
        self.g: dict[int, tuple[int, int]] = {0: (0, 0)}
        self.back: dict[int, Candidate] = {}
        self.heap: list[tuple[int, int, int, int, int, int]] = []
        self.seq = 0
        self.bound: int | None = None  # least key dropped by a cap: a bound on the optimum

    def _key(self, placed: int, k: int, dram: int, cycles: int) -> tuple[int, int]:
        g, h = self.g[placed], self.h[placed | self.space.masks[k]]
        return g[0] + dram + h[0], g[1] + cycles + h[1]

    def _push(self, placed: int, k: int, seq: int | None = None) -> None:
        """Queue arc (placed, k) at the best key known for it; `seq` keeps a deferred entry's
        place among equal keys (a new one is drawn when None)."""
        if placed | self.space.masks[k] in self.back:
            return
        c = self.known.get(k, _MISSING)
        if c is None:
            return
        if c is not _MISSING:
            key, stage = self._key(placed, k, c.dram_bytes, c.cycles), _COSTED
        else:
            dram = self.fit.get(k, self.space.lb_fit[k]) if k in self.touched \
                else self.space.lb_dram[k]
            stage = _PENDING if k in self.touched else _LAZY
            key = self._key(placed, k, dram, self.space.lb_cycles[k])
        if seq is None:
            self.seq += 1
            seq = self.seq
        heapq.heappush(self.heap, (*key, seq, placed, k, stage))

    def _settle(self, placed: int, k: int) -> None:
        c = self.known[k]
        assert c is not None
        g = self.g[placed]
        nxt = placed | c.mask
        self.g[nxt], self.back[nxt] = (g[0] + c.dram_bytes, g[1] + c.cycles), c
        for k2 in self.succ[nxt]:
            self._push(nxt, k2)

    def _resolve(self, key: int, seq: int, placed: int, k: int) -> None:
        """A pending entry popped: bound the set more tightly (re-queue higher, or rule it
        out), else cost it; re-queue at the cost with the same seq when it runs."""
        if k not in self.known:
            if self.budget.exhausted(self.costed):
                self.bound = key if self.bound is None else self.bound
                return
            if k not in self.fit:
                self.fit[k] = fit_bound(self.cache, self.space, k)
            fit = self.fit[k]
            if fit is None:
                self.known[k] = None  # the set cannot run: costing it would say so
                return
            if self._key(placed, k, fit, 0)[0] > key:
                self._push(placed, k, seq)
                return
            self.known[k] = evaluate_set(self.cache, self.space, k, fit)
            self.costed += 1
        self._push(placed, k, seq)

    def run(self) -> tuple[list[Candidate], int]:
        for k in self.succ[0]:
            self._push(0, k)
        while self.heap and self.full not in self.back:
            key, _, seq, placed, k, stage = heapq.heappop(self.heap)
            if placed | self.space.masks[k] in self.back:
                continue
            if stage == _COSTED:
                self._settle(placed, k)
            elif stage == _PENDING:
                self._resolve(key, seq, placed, k)
            else:  # the plain A* would cost the set here and re-queue it at its cost
                self.touched.add(k)
                self._push(placed, k)
        return _path(self.back, self.full), len(self.back) + 1


def _plan(path: Sequence[Candidate]) -> PartitionPlan:
    return PartitionPlan(tuple(sorted((FusionGroup(c.ops) for c in path),
                                      key=lambda g: g.ops[0])))


def _mbu(path: Sequence[Candidate]) -> int:
    return max((c.buffer_bytes for c in path if c.fused), default=0)


def baseline_incumbents(graph: ComputeGraph, cache: CostCache, caps: ExactCaps | None = None,
                        time_limit: float | None = None) -> list[Incumbent]:
    """The valid plans of the cheap baselines (`search.baselines`: the optimal segment plan,
    the greedy fusion plan without mapping rules), costed through `cache` (the run's baselines
    then cost nothing more), and under a mixed scheme each member's optimum
    (`search.exact.mixed`: solved under `caps`, None: `DEFAULT_CAPS`, and within
    `time_limit` seconds, if any), best first."""
    from search.baselines import greedy_fusion, segment_dp
    from search.exact.mixed import member_plans

    deadline = None if time_limit is None else time.perf_counter() + time_limit
    plans = (("segment_dp", segment_dp(graph, cache).plan, True),
             ("greedy_fit", greedy_fusion(graph, cache, False), True),
             *member_plans(graph, cache, caps, deadline))
    return sorted((inc for name, plan, reproducible in plans
                   if (inc := plan_incumbent(graph, cache, plan, name, reproducible)) is not None),
                  key=lambda inc: inc.key)


def plan_incumbent(graph: ComputeGraph, cache: CostCache, plan: PartitionPlan,
                   source: str, reproducible: bool = True) -> Incumbent | None:
    """`plan` as an incumbent named `source`, costed through `cache` (None when it is not
    valid): its DRAM, cycles and largest F_beta over the groups that do not run alone."""
    from simulator.cost import evaluate_plan

    cost = evaluate_plan(graph, plan, cache.hw, cache.scheme, cache)
    if not cost.valid:
        return None
    mbu = max((g.buffer_bytes for g in cost.groups if not g.runs_alone), default=0)
    return Incumbent(plan, int(cost.dram_bytes), int(cost.cycles), int(mbu), source,
                     reproducible)


def _left(budget: _Budget) -> float | None:
    """The seconds left to `budget`'s deadline (None: no deadline)."""
    return None if budget.deadline is None else max(1e-9, budget.deadline - time.perf_counter())


def _best_incumbent(incumbents: Iterable[Incumbent]) -> Incumbent | None:
    return min(incumbents, key=lambda inc: inc.key, default=None)


class _Deferred:
    """`baseline_incumbents`, computed when first asked for: a solve that proves its optimum
    without a cap never compares it with an incumbent (every valid plan, the incumbents'
    included, is a path of its search, so none is below the optimum), and the segment DP
    costs far more groups than such a solve (docs/exact.md, "Incumbents")."""

    def __init__(self, graph: ComputeGraph, cache: CostCache, caps: ExactCaps) -> None:
        self.graph, self.cache, self.caps = graph, cache, caps
        self.found: tuple[Incumbent, ...] | None = None

    def __iter__(self):  # noqa: ANN204 - an iterator of incumbents
        if self.found is None:
            self.found = tuple(baseline_incumbents(self.graph, self.cache, self.caps))
        return iter(self.found)


def _from_incumbent(inc: Incumbent, space: CandidateSpace, *, costed: int, states: int,
                    seconds: float, optimal: bool, cap_reason: str, bound: int | None,
                    reproducible: bool, caps: ExactCaps, **fields: object) -> ExactResult:
    """`inc` as the answer; `fields` override the other `ExactResult` fields."""
    base: dict[str, object] = dict(
        plan=inc.plan, dram_bytes=inc.dram_bytes, cycles=inc.cycles, mbu_bytes=inc.mbu_bytes,
        candidates=len(space), costed=costed, states=states, seconds=seconds,
        enumeration_seconds=space.seconds, optimal=optimal, cap_reason=cap_reason,
        bound_bytes=bound, source=inc.source, reproducible=reproducible and inc.reproducible,
        caps=caps)
    base.update(fields)
    return ExactResult(**base)  # type: ignore[arg-type]


def solve(graph: ComputeGraph, cache: CostCache, space: CandidateSpace, *,
          max_costed: int | None = None, time_limit: float | None = None,
          max_states: int | None = None,
          incumbents: Iterable[Incumbent] = ()) -> ExactResult:
    """The least-DRAM plan over the sets of `space` (module docs); cycles break DRAM ties.

    This is the eager search alone (every down-set listed first); `optimum` falls back to the
    lazy search (`search.exact.lazy`) where the listing or the enumeration meets its cap.

    Args:
        graph: The network.
        cache: Group costs of (graph, hardware, dataflow), the same `space` was built with.
        space: The candidate sets (`enumerate_space`).
        max_costed: Cost at most this many sets; the rest then count as not running, and the
            plan is optimal among the sets costed (``optimal=False`` unless the cap's lower
            bound reaches it).
        time_limit: The same with a wall-clock limit (seconds, for the DP; opt-in: an answer
            it cut is ``reproducible=False``).
        max_states: List at most this many down-sets; beyond it the answer is the best
            incumbent (not proven optimal), or the optimal segment plan when none is given.
        incumbents: Valid plans known before the solve: the answer is never worse than the
            best of them.
    """
    return _solve_eager(graph, cache, space, max_costed=max_costed, time_limit=time_limit,
                        max_states=max_states, incumbents=incumbents)


def _solve_eager(graph: ComputeGraph, cache: CostCache, space: CandidateSpace, *,
                 max_costed: int | None, time_limit: float | None, max_states: int | None,
                 incumbents: Iterable[Incumbent], raise_listing_cap: bool = False,
                 member_caps: ExactCaps | None = None) -> ExactResult:
    """`solve`; with `raise_listing_cap`, the listing's work cap raises `_ListingCap` instead
    of answering with the best incumbent (`optimum` then runs the lazy search).
    `member_caps`: the caps of a mixed scheme's member solves where no incumbent is given
    (`optimum`'s caps; None: these)."""
    t = time.perf_counter()
    caps = ExactCaps(space.max_sets, max_states, max_costed)
    budget = _Budget(max_costed, None if time_limit is None else t + time_limit)
    try:
        search = _LazyAStar(graph, cache, space, max_states, budget)
    except _ListingCap as cap:
        if raise_listing_cap and not cap.timed_out:
            raise
        best = _best_incumbent(incumbents)
        if best is None:
            best = _best_incumbent(baseline_incumbents(graph, cache, member_caps or caps,
                                                       _left(budget)))
        assert best is not None, "the optimal segment plan is always valid"
        reason = "; ".join(r for r in (space.cap_reason, f"{cap}: the best plan known "
                                       f"({best.source}) instead") if r)
        return _from_incumbent(best, space, costed=0, states=0,
                               seconds=space.seconds + time.perf_counter() - t, optimal=False,
                               cap_reason=reason, bound=None,
                               reproducible=not (cap.timed_out or space.timed_out)
                               and best.reproducible, caps=caps)
    path, states = search.run()
    costed = search.costed
    # the first key a cap dropped bounds the optimum only over a complete enumeration
    bound = search.bound if space.complete else None
    dram, cycles = sum(c.dram_bytes for c in path), sum(c.cycles for c in path)
    reproducible = not (budget.timed_out or space.timed_out)
    # proven without a cap, the path is the optimum: no incumbent can be below it
    best = None if space.complete and not budget.reason else _best_incumbent(incumbents)
    chosen = best if best is not None and best.key < (dram, cycles) else None
    answer = chosen.dram_bytes if chosen is not None else dram
    if not budget.reason:
        optimal = space.complete
    else:  # capped: still proven when the cap's lower bound reaches the answer
        optimal = bound is not None and bound >= answer
        claim = (f"; proven optimal all the same (the optimum is >= {bound:,} B)" if optimal
                 else f"; the optimum is >= {bound:,} B" if bound is not None else "")
        budget.reason = f"{budget.reason}: optimal among the {costed:,} sets costed{claim}"
    reason = "; ".join(r for r in (space.cap_reason, budget.reason) if r)
    seconds = space.seconds + time.perf_counter() - t
    if chosen is not None:
        reason = f"{reason}; the {chosen.source} plan is better than that and is the answer"
        return _from_incumbent(chosen, space, costed=costed, states=states, seconds=seconds,
                               optimal=optimal, cap_reason=reason, bound=bound,
                               reproducible=reproducible, caps=caps)
    return ExactResult(
        plan=_plan(path), dram_bytes=dram, cycles=cycles, mbu_bytes=_mbu(path),
        candidates=len(space), costed=costed, states=states, seconds=seconds,
        enumeration_seconds=space.seconds, optimal=optimal, cap_reason=reason,
        bound_bytes=bound, reproducible=reproducible, caps=caps, listed=len(search.succ))


def _solve_lazy(graph: ComputeGraph, cache: CostCache, space: CandidateSpace, *,
                caps: ExactCaps, time_limit: float | None, incumbents: Iterable[Incumbent],
                why: str, listed: int = 0) -> ExactResult:
    """The lazy search (`search.exact.lazy`) under `caps`, after the eager search met a cap
    (`why`: which) having found the sets of `space` and listed `listed` down-sets (they count
    against the caps too); the answer is never worse than the best incumbent."""
    t = time.perf_counter()
    best = _best_incumbent(incumbents)
    budget = _Budget(caps.max_costed, None if time_limit is None else t + time_limit)
    out = lazy_search(graph, cache, max_sets=caps.max_sets, max_states=caps.max_states,
                      budget=budget, upper=None if best is None else best.dram_bytes,
                      sets_used=len(space), states_used=listed, found=frozenset(space.masks))
    seconds = space.seconds + time.perf_counter() - t
    reproducible = not (out.timed_out or budget.timed_out)
    common = dict(candidates=out.sets, costed=out.costed, states=out.states, seconds=seconds,
                  enumeration_seconds=space.seconds, reproducible=reproducible, caps=caps,
                  search="lazy", listed=out.listed)
    path = out.path
    key = None if path is None else (sum(c.dram_bytes for c in path),
                                     sum(c.cycles for c in path))
    if best is None and (key is None or budget.reason):
        best = _best_incumbent(baseline_incumbents(graph, cache, caps, _left(budget)))
    chosen = best if best is not None and (key is None or best.key < key) else None
    answer = chosen.dram_bytes if chosen is not None else key[0]
    bound = out.bound
    if out.reason and not out.timed_out and out.store is not None:
        # a work cap stopped it: answer as the eager search does with a capped enumeration,
        # the best plan over every set either search found (never worse than before it)
        found = _merge(graph, cache, space, out.store)
        left = None if time_limit is None else max(1e-9, time_limit - (time.perf_counter() - t))
        # its listing counts against the same state cap as the searches before it
        states_left = None if caps.max_states is None else max(
            1, caps.max_states - listed - out.listed)
        salvage = _solve_eager(graph, cache, found, max_costed=caps.max_costed,
                               time_limit=left, max_states=states_left,
                               incumbents=incumbents, member_caps=caps)
        tail = salvage.cap_reason.lstrip("; ")
        # the lazy search's frontier bounds the optimum (`_Search._lower`); under LBDF the
        # labelling relaxation may bound it higher, and its plan may be better
        lower = out.lower
        # (under the work caps only: HiGHS's node cap counts work, a deadline would not)
        relaxed = None if time_limit is not None or (
            lower is not None and lower >= salvage.dram_bytes) else labelling_bound(graph, cache)
        by = ""
        if relaxed is not None:
            if lower is None or relaxed.bound_bytes > lower:
                lower, by = relaxed.bound_bytes, "the labelling relaxation: "
            inc = None if relaxed.plan is None else plan_incumbent(graph, cache, relaxed.plan,
                                                                   "relaxation")
            if inc is not None and inc.key < (salvage.dram_bytes, salvage.cycles):
                salvage = _from_incumbent(inc, found, costed=salvage.costed,
                                          states=salvage.states, seconds=salvage.seconds,
                                          optimal=False, cap_reason=salvage.cap_reason,
                                          bound=None, reproducible=salvage.reproducible,
                                          caps=caps, search="lazy")
                tail = (f"{tail}: the labelling relaxation's plan is better" if tail
                        else "the labelling relaxation's plan is better")
        # merges and moves that no set found offered (unless the bound proves the answer): a
        # descent from each plan known, and from layer by layer (a greedy fusion from scratch,
        # often another local optimum)
        descended, spent, start = (None, 0, "") if lower is not None \
            and lower >= salvage.dram_bytes else _descents(graph, cache, [
                ("that plan", salvage.plan), *((inc.source, inc.plan) for inc in incumbents),
                *(() if relaxed is None or relaxed.plan is None
                  else (("the relaxation's plan", relaxed.plan),)),
                ("layer by layer", layer_by_layer(graph))])
        if descended is not None and descended.key < (salvage.dram_bytes, salvage.cycles):
            salvage = _from_incumbent(descended, found, costed=salvage.costed,
                                      states=salvage.states, seconds=salvage.seconds,
                                      optimal=False, cap_reason=salvage.cap_reason, bound=None,
                                      reproducible=salvage.reproducible, caps=caps,
                                      search="lazy")
            tail = f"{tail}: a descent from {start} is better" if tail \
                else f"a descent from {start} is better"
        salvage = replace(salvage, costed=salvage.costed + spent)
        optimal = lower is not None and lower >= salvage.dram_bytes
        claim = (f"; proven optimal all the same ({by}the optimum is >= {lower:,} B)" if optimal
                 else f"; {by}the optimum is >= {lower:,} B" if lower is not None else "")
        reason = "; ".join(r for r in (why, f"lazy search: {out.reason}",
                                       f"the best plan over the {len(found):,} sets found"
                                       + (f": {tail}" if tail else "") + claim) if r)
        return replace(salvage, cap_reason=reason, optimal=optimal, bound_bytes=lower,
                       search="lazy", listed=out.listed, states=out.states,
                       costed=out.costed + salvage.costed,
                       seconds=space.seconds + time.perf_counter() - t)
    if out.reason:
        optimal, reason = False, "; ".join(r for r in (why, f"lazy search: {out.reason}") if r)
    elif budget.reason:  # the costing cap: proven when its lower bound reaches the answer
        optimal = bound is not None and bound >= answer
        claim = (f"; proven optimal all the same (the optimum is >= {bound:,} B)" if optimal
                 else f"; the optimum is >= {bound:,} B" if bound is not None else "")
        reason = "; ".join(r for r in (why, f"lazy search: {budget.reason}: optimal among the "
                                           f"{out.costed:,} sets costed{claim}") if r)
    else:
        # complete: every set the incumbent's bound pruned belongs to no plan at or below the
        # incumbent, so the better of the two is the optimum
        optimal, reason = True, ""
    if chosen is not None:
        if reason:
            reason = f"{reason}: the best plan known ({chosen.source}) instead"
        return _from_incumbent(chosen, space, optimal=optimal, cap_reason=reason,
                               bound=bound if budget.reason else None, **common)
    assert path is not None
    return ExactResult(plan=_plan(path), dram_bytes=key[0], cycles=key[1], mbu_bytes=_mbu(path),
                       optimal=optimal, cap_reason=reason,
                       bound_bytes=bound if budget.reason else None, **common)


def _descents(graph: ComputeGraph, cache: CostCache, plans: Iterable[tuple[str, PartitionPlan]],
              ) -> tuple[Incumbent | None, int, str]:
    """The best plan of a descent (`search.exact.descent`) from each of the named `plans`
    (valid; a plan named twice descends once), as an incumbent named ``descent``, the groups
    the descents costed, and the name of the plan it descended from (the first, on a tie)."""
    best, spent, start, seen = None, 0, "", set()
    for name, plan in plans:
        if plan in seen:
            continue
        seen.add(plan)
        better, costed = descend(graph, cache, plan)
        spent += costed
        inc = plan_incumbent(graph, cache, better, "descent")
        if inc is not None and (best is None or inc.key < best.key):
            best, start = inc, name
    return best, spent, start


def _merge(graph: ComputeGraph, cache: CostCache, space: CandidateSpace,
           store) -> CandidateSpace:
    """The sets of `space` and of the lazy search's `store` (each once) and every singleton,
    as an incomplete space (singletons first, as the enumeration lists them)."""
    from search.exact.candidates import _Growth

    rows = {m: (m, p, d, y, f) for m, p, d, y, f in zip(
        space.masks, space.pred_masks, space.lb_dram, space.lb_cycles, space.lb_fit,
        strict=True)}
    for row in zip(store.masks, store.pred_masks, store.lb_dram, store.lb_cycles,
                   store.lb_fit, strict=True):
        rows.setdefault(row[0], row)
    missing = [o for o in range(len(graph)) if 1 << o not in rows]
    if missing:
        growth = _Growth(graph, cache, None, None)
        for o in missing:
            e = growth._single(o)
            rows[1 << o] = (1 << o, e[4] & ~(1 << o), *growth._bounds(e))
    ordered = sorted(rows.values(), key=lambda r: r[0].bit_count() != 1)  # stable
    masks, preds, lbd, lbc, lbf = (tuple(col) for col in zip(*ordered, strict=True))
    return CandidateSpace(masks, preds, lbd, lbc, lbf, False, "", space.pruned, space.seconds,
                          space.max_sets, space.timed_out)


def optimum(graph: ComputeGraph, cache: CostCache, *, caps: ExactCaps | None = DEFAULT_CAPS,
            time_limit: float | None = None,
            incumbents: Iterable[Incumbent] | None = None, search: str = "auto") -> ExactResult:
    """The least-DRAM valid plan of the (graph, hardware, dataflow) of `cache`.

    Enumerates the candidate sets (`enumerate_space`, capped by ``caps.max_sets``) and solves
    the down-set shortest path (`solve`, listing at most ``min(caps.max_states,
    EAGER_LISTING)`` down-sets, costing at most ``caps.max_costed`` sets), starting from the
    incumbents (None: `baseline_incumbents`, a mixed scheme's member optima solved under the
    same caps and time limit; pass ``()`` for none). Where the enumeration or the
    listing meets its work cap (wide antichains, or more connected convex sets than the cap),
    the lazy search (`search.exact.lazy`) solves it instead, under the same caps. Every cap
    counts work, so the answer is the same on any machine under any load. `time_limit`
    (seconds, opt-in, None by default) bounds both parts as well, the enumeration taking at
    most `ENUMERATION_SHARE` of it; an answer it cut says ``reproducible=False``. With a cap
    hit the result says ``optimal=False`` (unless the cap's lower bound proves it) and why;
    the plan is valid and never worse than an incumbent.

    Args:
        search: ``auto`` (above), ``eager`` (never the lazy search: the behaviour before it)
            or ``lazy`` (the lazy search alone, no enumeration first).
    """
    if search not in ("auto", "eager", "lazy"):
        raise ValueError(f"search must be auto, eager or lazy, got {search!r}")
    caps = caps or ExactCaps()
    t = time.perf_counter()

    def left() -> float | None:
        return None if time_limit is None else max(1e-9, time_limit - (time.perf_counter() - t))

    def known() -> tuple[Incumbent, ...]:
        # a mixed scheme's members are solved under the same caps and time limit
        return tuple(baseline_incumbents(graph, cache, caps, left()) if incumbents is None
                     else incumbents)

    def answer(result: ExactResult) -> ExactResult:
        # a member optimum the clock cut may have pruned or be the answer
        cut = isinstance(incumbents, tuple) and not all(i.reproducible for i in incumbents)
        return replace(result, reproducible=False) if cut else result

    if search == "lazy":
        space = CandidateSpace((), (), (), (), (), True, "", 0, 0.0)  # nothing enumerated
        incumbents = known()
        return answer(_solve_lazy(graph, cache, space, caps=caps, time_limit=left(),
                                  incumbents=incumbents, why=""))
    if search == "auto":
        whole = _one_group(graph, cache, caps, t)
        if whole is not None:
            return whole
    # the eager search may use half of each work cap, the lazy search what is left
    eager = search == "eager"
    sets = caps.max_sets if eager or caps.max_sets is None else caps.max_sets // 2
    listing = caps.max_states if eager else min(
        EAGER_LISTING, EAGER_LISTING if caps.max_states is None else caps.max_states // 2)
    space = enumerate_space(graph, cache, max_sets=sets,
                            time_limit=None if time_limit is None
                            else time_limit * ENUMERATION_SHARE)
    incumbents = _Deferred(graph, cache, caps) if incumbents is None and time_limit is None \
        else known()
    why, listed = space.cap_reason, 0
    if search == "eager" or space.complete or time_limit is not None:
        try:
            result = _solve_eager(graph, cache, space, max_costed=caps.max_costed,
                                  time_limit=left(), max_states=listing, incumbents=incumbents,
                                  raise_listing_cap=search == "auto", member_caps=caps)
        except _ListingCap as cap:  # a work cap (the clock answers inside)
            why, listed = str(cap), listing
        else:
            if search == "eager" or space.complete or not result.reproducible:
                return answer(replace(result, caps=caps))
    result = _solve_lazy(graph, cache, space, caps=caps, time_limit=left(),
                         incumbents=incumbents, why=why, listed=listed)
    # the eager try too
    return answer(replace(result, caps=caps, seconds=time.perf_counter() - t))


def _one_group(graph: ComputeGraph, cache: CostCache, caps: ExactCaps,
               started: float) -> ExactResult | None:
    """The plan of one group holding the whole network, proven optimal before any search
    when it runs at exactly its compulsory traffic (its weights, one read of each network
    input, one write of each network output): every other plan has two groups or more, so in
    a weakly connected network some tensor leaves one group for another, and that group reads
    it on top of the compulsory traffic every group pays (`evaluate_set` checks each set it
    costs against it); so the plan is the unique optimum by DRAM and the cycles decide
    nothing. None otherwise (or where an op must run alone, or the scheme searches nothing).

    It costs one group; a buffer that holds a whole transformer otherwise pays the
    enumeration and the incumbents first (about 5 s)."""
    ops = tuple(range(len(graph)))
    if (len(ops) < 2 or cache.unfusable or not Scheme.parse(cache.scheme).searchable
            or not graph.is_weakly_connected(ops)):
        return None
    cost = cache.run(ops)
    if not cost.fits or cost.dram_bytes > compulsory_bytes(graph, ops, cache.hw.dtype_bytes):
        return None
    return ExactResult(plan=PartitionPlan((FusionGroup(ops),)), dram_bytes=int(cost.dram_bytes),
                       cycles=int(cost.timing.cycles), mbu_bytes=int(cost.buffer_bytes),
                       candidates=1, costed=1, states=1,
                       seconds=time.perf_counter() - started, enumeration_seconds=0.0,
                       optimal=True, cap_reason="", caps=caps, search="one_group", listed=0)


EAGER_LISTING = 20_000
"""The most down-sets the eager search lists (and at most half of ``max_states``) before the
lazy search takes over (the zoo needs at most 1,029: the transformers as fused; the CNNs 547).
The eager enumeration may find half of ``max_sets`` (the zoo needs at most 87,120: DeiT-S LBDF
at 2 MiB as fused; the CNNs 72,190)."""


ENUMERATION_SHARE = 2 / 3
"""The part of an opt-in time limit the enumeration may take (a capped enumeration still
leaves the solver time to find a plan better than layer by layer among the sets found)."""


def front(graph: ComputeGraph, cache: CostCache, space: CandidateSpace, objectives: str,
          max_labels: int = 1_000_000) -> list[FrontPoint]:
    """The exact front of ``"dram,cycles"`` or ``"dram,mbu"`` over the sets of `space`.

    Every set is costed first. Points are sorted by DRAM ascending (the second objective then
    descends); one plan each.

    Raises:
        ValueError: unknown objectives, or more than `max_labels` labels (dram,cycles).
    """
    key = objectives.replace(" ", "").lower()
    if key not in ("dram,cycles", "dram,mbu"):
        raise ValueError(f"unknown objectives {objectives!r}; choose dram,cycles or dram,mbu")
    cands = costed_candidates(cache, space)
    if key == "dram,cycles":
        return _front_cycles(graph, cands, max_labels)
    return _front_mbu(graph, cands)


def _shortest(graph: ComputeGraph, cands: Sequence[Candidate]) -> list[Candidate]:
    """Least (DRAM, cycles) path over costed candidates (the eager DP of the MBU front)."""
    arcs = _Arcs(graph, [c.mask for c in cands], range(len(cands)))
    best: dict[int, tuple[int, int]] = {0: (0, 0)}
    back: dict[int, Candidate] = {}
    buckets: dict[int, set[int]] = {0: {0}}
    for size in range(arcs.n):
        for placed in sorted(buckets.pop(size, ())):
            d0, c0 = best[placed]
            for c in _applicable(arcs, cands, placed):
                nxt = placed | c.mask
                cost, old = (d0 + c.dram_bytes, c0 + c.cycles), best.get(nxt)
                if old is None:
                    buckets.setdefault(size + len(c.ops), set()).add(nxt)
                if old is None or cost < old:
                    best[nxt], back[nxt] = cost, c
    return _path(back, (1 << arcs.n) - 1)


def _applicable(arcs: _Arcs, cands: Sequence[Candidate], placed: int):
    for v in arcs.frontier(placed):
        for k in arcs.by_op[v]:
            c = cands[k]
            if c.mask & placed == 0 and c.pred_mask & ~placed == 0:
                yield c


_Label = tuple[int, int, int, Candidate | None]  # dram, cycles, parent label index, arc


def _nondominated(labels: list[_Label]) -> list[_Label]:
    labels.sort(key=lambda x: (x[0], x[1]))
    out: list[_Label] = []
    for lab in labels:
        if not out or lab[1] < out[-1][1]:
            out.append(lab)
    return out


def _front_cycles(graph: ComputeGraph, cands: Sequence[Candidate],
                  max_labels: int) -> list[FrontPoint]:
    """Label-setting DP: Pareto (DRAM, cycles) labels per down-set, with back pointers."""
    arcs = _Arcs(graph, [c.mask for c in cands], range(len(cands)))
    labels: dict[int, list[_Label]] = {0: [(0, 0, -1, None)]}
    pending: dict[int, list[_Label]] = {}
    buckets: dict[int, set[int]] = {0: {0}}
    count = 1
    for size in range(arcs.n):
        for placed in sorted(buckets.pop(size, ())):
            if placed:
                labels[placed] = _nondominated(pending.pop(placed))
            for c in _applicable(arcs, cands, placed):
                nxt = placed | c.mask
                if nxt not in pending:
                    pending[nxt] = []
                    buckets.setdefault(size + len(c.ops), set()).add(nxt)
                pending[nxt].extend((d + c.dram_bytes, y + c.cycles, k, c)
                                    for k, (d, y, _, _) in enumerate(labels[placed]))
                count += len(labels[placed])
                if count > max_labels:
                    raise ValueError(f"more than {max_labels:,} labels")
    full = (1 << arcs.n) - 1
    labels[full] = _nondominated(pending.pop(full))
    return [FrontPoint(_plan(_trace(labels, full, k)), d, y)
            for k, (d, y, _, _) in enumerate(labels[full])]


def _trace(labels: dict[int, list[_Label]], state: int, k: int) -> list[Candidate]:
    path = []
    while state:
        _, _, parent, c = labels[state][k]
        path.append(c)
        state, k = state ^ c.mask, parent
    return path[::-1]


def _fused_mbu(path: Sequence[Candidate]) -> int:
    return max((c.buffer_bytes for c in path if len(c.ops) > 1), default=0)


def _front_mbu(graph: ComputeGraph, cands: Sequence[Candidate]) -> list[FrontPoint]:
    """Epsilon constraint on the MBU, walking down the distinct F_beta of multi-op groups."""
    levels = sorted({c.buffer_bytes for c in cands if len(c.ops) > 1}, reverse=True)
    points: list[FrontPoint] = []
    limit = levels[0] if levels else 0
    while True:
        path = _shortest(graph, [c for c in cands if len(c.ops) == 1 or c.buffer_bytes <= limit])
        dram, mbu = sum(c.dram_bytes for c in path), _fused_mbu(path)
        if points and points[-1].dram_bytes == dram:
            points.pop()  # the same DRAM at a lower MBU dominates the previous point
        points.append(FrontPoint(_plan(path), dram, mbu))
        if mbu == 0:
            return points
        limit = next((x for x in levels if x < mbu), -1)  # -1: singletons only
