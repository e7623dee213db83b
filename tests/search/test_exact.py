"""Exact solver (search.exact): brute force, MILP cross-check, heuristics, caps, fronts."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.baselines import segment_dp
from search.exact import costed_candidates, enumerate_space, front, optimum, solve
from search.exact.candidates import bits, lbdf_buffer_bound, squeeze_pairs
from search.exact.milp import solve_milp
from search.exact.solver import ExactCaps
from simulator.cost import CostCache, evaluate_plan
from simulator.cost.traffic import compulsory_bytes
from simulator.hw import load_hw
from simulator.partition import is_convex
from simulator.plan import FusionGroup, PartitionPlan
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load_zoo
from tests.search.conftest import SMALL_NETS, Net, draw_dag

BUFFERS = (1_500, 3_000, 6_000, 1 << 20)
SCHEMES = ("lbdf", "brr")


# --- brute force -----------------------------------------------------------------------------


def _runs(cache: CostCache, ops: tuple[int, ...]) -> bool:
    unfusable = set(cache.unfusable)
    if len(ops) == 1 and ops[0] in unfusable:
        return True
    return not unfusable.intersection(ops) and cache.group(ops).fits


def _runnable_sets(graph: ComputeGraph, cache: CostCache) -> list[tuple[int, ...]]:
    """Every weakly connected op set that runs (unfusable ops only alone)."""
    n = len(graph)
    found = []
    for size in range(1, n + 1):
        for ops in itertools.combinations(range(n), size):
            if graph.is_weakly_connected(ops) and _runs(cache, ops):
                found.append(ops)
    return found


def _all_plans(graph: ComputeGraph, cache: CostCache):
    """Every partition into runnable connected sets that `evaluate_plan` calls valid."""
    by_first: dict[int, list[tuple[int, ...]]] = {}
    for ops in _runnable_sets(graph, cache):
        by_first.setdefault(ops[0], []).append(ops)
    n = len(graph)

    def rec(covered: frozenset[int], groups: list[tuple[int, ...]]):
        if len(covered) == n:
            yield list(groups)
            return
        first = min(set(range(n)) - covered)
        for ops in by_first.get(first, ()):
            if covered.isdisjoint(ops):
                yield from rec(covered | set(ops), [*groups, ops])

    for groups in rec(frozenset(), []):
        plan = PartitionPlan.of(groups)
        cost = evaluate_plan(graph, plan, cache.hw, cache.scheme, cache)
        if cost.valid:
            yield plan, cost


def _brute(graph: ComputeGraph, cache: CostCache):
    plans = list(_all_plans(graph, cache))
    assert plans, "layer by layer is always valid"
    return plans


def _pareto(points):
    pts = sorted(set(points))
    out = []
    for a, b in pts:
        if not out or b < out[-1][1]:
            out.append((a, b))
    return out


def _check_optimum(graph: ComputeGraph, cache: CostCache):
    res = optimum(graph, cache)
    cost = evaluate_plan(graph, res.plan, cache.hw, cache.scheme, cache)
    assert cost.valid, cost.violations
    assert cost.dram_bytes == res.dram_bytes and cost.cycles == res.cycles
    assert res.optimal and res.cap_reason == ""
    plans = _brute(graph, cache)
    best = min(c.dram_bytes for _, c in plans)
    assert res.dram_bytes == best
    assert res.cycles == min(c.cycles for _, c in plans if c.dram_bytes == best)
    return res, plans


# --- random small DAGs -----------------------------------------------------------------------


@st.composite
def small_dags(draw) -> ComputeGraph:
    """Convolutions, activations, residual adds and concats over 5-8 ops."""
    return draw_dag(draw, "random", (5, 8), ["conv", "conv", "unary", "add", "concat"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=small_dags(), scheme=st.sampled_from(SCHEMES), buffer=st.sampled_from(BUFFERS))
def test_exact_equals_brute_force_on_random_dags(graph, scheme, buffer):
    _check_optimum(graph, CostCache(graph, load_hw("edge-npu", {"buffer": buffer}), scheme))


@pytest.mark.parametrize("name", sorted(SMALL_NETS))
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("buffer", BUFFERS)
def test_exact_equals_brute_force_on_paper_graphs(name, scheme, buffer, hw):
    graph = SMALL_NETS[name]()
    cache = CostCache(graph, hw(buffer), scheme)
    res, _ = _check_optimum(graph, cache)
    milp = solve_milp(graph, costed_candidates(cache, enumerate_space(graph, cache)))
    assert milp.dram_bytes == res.dram_bytes


@pytest.mark.parametrize("name", sorted(SMALL_NETS))
@pytest.mark.parametrize("scheme", SCHEMES)
def test_one_group_at_its_compulsory_traffic_is_proven_at_once(name, scheme, hw):
    """Where the whole network runs as one group at exactly its compulsory traffic, `optimum`
    answers with it after costing that one set, proven: brute force finds it the only plan of
    that DRAM. Where it does not fit, the search runs as before."""
    graph = SMALL_NETS[name]()
    cache = CostCache(graph, hw(1 << 20), scheme)
    whole = cache.run(range(len(graph)))
    compulsory = compulsory_bytes(graph, range(len(graph)), cache.hw.dtype_bytes)
    res = optimum(graph, cache)
    plans = _brute(graph, cache)
    best = min(c.dram_bytes for _, c in plans)
    assert res.optimal and res.dram_bytes == best
    if whole.fits and whole.dram_bytes == compulsory:
        assert res.search == "one_group" and res.costed == 1 and res.cap_reason == ""
        assert res.plan.groups == (FusionGroup(tuple(range(len(graph)))),)
        assert sum(c.dram_bytes == best for _, c in plans) == 1
    else:  # (the squeeze-and-excitation block under BRR re-reads the tensor it scales)
        assert res.costed > 1
    small = optimum(graph, CostCache(graph, hw(1_500), scheme))
    assert small.optimal and small.costed > 1 and len(small.plan.groups) > 1


@pytest.mark.parametrize("name", sorted(SMALL_NETS))
@pytest.mark.parametrize("scheme", SCHEMES)
def test_fronts_equal_brute_force(name, scheme, hw):
    graph = SMALL_NETS[name]()
    cache = CostCache(graph, hw(3_000), scheme)
    plans = _brute(graph, cache)
    space = enumerate_space(graph, cache)
    cyc = front(graph, cache, space, "dram,cycles")
    assert [(p.dram_bytes, p.second) for p in cyc] == _pareto(
        (c.dram_bytes, c.cycles) for _, c in plans)
    mbu = front(graph, cache, space, "dram, mbu")
    assert [(p.dram_bytes, p.second) for p in mbu] == _pareto(
        (c.dram_bytes, max((g.buffer_bytes for g in c.groups if len(g.ops) > 1), default=0))
        for _, c in plans)
    for p in (*cyc, *mbu):
        assert evaluate_plan(graph, p.plan, cache.hw, scheme, cache).valid


def test_unknown_front_objectives_rejected(hw):
    graph = SMALL_NETS["fire"]()
    cache = CostCache(graph, hw(3_000), "lbdf")
    with pytest.raises(ValueError, match="dram,energy"):
        front(graph, cache, enumerate_space(graph, cache), "dram,energy")


# --- the candidate space ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SMALL_NETS))
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("buffer", BUFFERS)
def test_space_holds_every_runnable_convex_set(name, scheme, buffer, hw):
    """Completeness of the enumeration and its pruning, against all subsets."""
    graph = SMALL_NETS[name]()
    cache = CostCache(graph, hw(buffer), scheme)
    space = enumerate_space(graph, cache)
    masks = set(space.masks)
    assert len(masks) == len(space.masks) and space.complete
    for ops in _runnable_sets(graph, cache):
        if is_convex(graph, ops):
            assert sum(1 << o for o in ops) in masks, ops
    for m in space.masks:  # everything enumerated is connected and convex
        assert graph.is_weakly_connected(bits(m)) and is_convex(graph, bits(m))


@pytest.mark.parametrize("name", sorted(SMALL_NETS))
@pytest.mark.parametrize("scheme", SCHEMES)
def test_lower_bounds_hold(name, scheme, hw):
    graph = SMALL_NETS[name]()
    cache = CostCache(graph, hw(1 << 20), scheme)
    space = enumerate_space(graph, cache)
    for k, m in enumerate(space.masks):
        ops = bits(m)
        assert space.lb_dram[k] == compulsory_bytes(graph, ops, cache.hw.dtype_bytes)
        cost = cache.group(ops)
        assert cost.dram_bytes >= space.lb_dram[k] and cost.timing.cycles >= space.lb_cycles[k]
        if scheme == "lbdf":
            assert cost.dram_bytes == space.lb_dram[k]


def test_lbdf_prunes_on_weights_only(hw):
    graph = SMALL_NETS["residual"]()
    cache = CostCache(graph, hw(1_500), "lbdf")
    space = enumerate_space(graph, cache)
    weights = [op.weight_elems * cache.hw.dtype_bytes for op in graph]
    assert space.pruned > 0
    assert all(sum(weights[o] for o in bits(m)) <= 1_500 for m in space.masks[len(graph):])


def _grown_convex(graph: ComputeGraph, start: int, steps: list[int]) -> tuple[int, ...]:
    """A connected convex set grown from `start`: add a neighbour (picked by each step), close."""
    group = {start}
    for pick in steps:
        nbrs = sorted({v for o in group for v in (*graph.predecessors(o), *graph.successors(o))}
                      - group)
        if not nbrs:
            break
        group.add(nbrs[pick % len(nbrs)])
        below = set().union(*(nx_desc(graph, o) for o in group))
        above = set().union(*(nx_anc(graph, o) for o in group))
        group = below & above
    return tuple(sorted(group))


def nx_desc(graph: ComputeGraph, o: int) -> set[int]:
    import networkx as nx
    return {o, *nx.descendants(graph.nx, o)}


def nx_anc(graph: ComputeGraph, o: int) -> set[int]:
    import networkx as nx
    return {o, *nx.ancestors(graph.nx, o)}


_SE_ZOO = ("mobilenet_v3_small", "efficientnet_b0", "deeplabv3_mobilenet_v3_large")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(_SE_ZOO), at=st.integers(0, 10_000),
       steps=st.lists(st.integers(0, 50), min_size=1, max_size=40))
def test_lbdf_buffer_bound_never_exceeds_f_beta(model, at, steps):
    """The pruning bound (weights + a squeeze pair's whole tensor) <= the real LBDF F_beta, on
    random convex groups of zoo networks with SE blocks, grown from SE pools half the time."""
    graph = load_zoo(model)
    pairs = squeeze_pairs(graph)
    start = pairs[at % len(pairs)].g if at % 2 else at % len(graph)
    ops = _grown_convex(graph, start, steps)
    hw = load_hw("edge-npu", {"buffer": "1MiB"})
    cost = CostCache(graph, hw, "lbdf").group(ops)
    assert lbdf_buffer_bound(graph, ops, hw.dtype_bytes, pairs) <= cost.buffer_bytes


def test_lbdf_buffer_bound_on_whole_se_blocks():
    """Each SE block of a zoo network, from the held tensor's producer to the multiply: the
    bound exceeds the weights (the pair holds a whole map) and stays within F_beta."""
    graph = load_zoo("mobilenet_v3_small")
    hw = load_hw("edge-npu", {"buffer": "1MiB"})
    cache = CostCache(graph, hw, "lbdf")
    pairs = squeeze_pairs(graph)
    assert len(pairs) == 9  # one per SE block: (avgpool, mul)
    for p in pairs:
        assert p.x >= 0
        ops = tuple(sorted(nx_desc(graph, p.x) & nx_anc(graph, p.m)))
        bound = lbdf_buffer_bound(graph, ops, hw.dtype_bytes, pairs)
        weights = sum(graph[o].weight_elems for o in ops) * hw.dtype_bytes
        assert bound == weights + p.elems * hw.dtype_bytes
        assert weights < bound <= cache.group(ops).buffer_bytes


def test_lbdf_squeeze_rule_prunes_se_sets(hw):
    """On the SE test graph the pair rule prunes sets whose weights fit (so it does more than
    the weights rule), and every runnable convex set is still enumerated."""
    graph = SMALL_NETS["se"]()
    pairs = squeeze_pairs(graph)
    assert [(graph[p.g].name, graph[p.m].name) for p in pairs] == [("gp", "mul")]
    everything = enumerate_space(graph, CostCache(graph, hw(1 << 30), "lbdf")).masks
    newly_pruned = 0
    for buffer in BUFFERS:
        cache = CostCache(graph, hw(buffer), "lbdf")
        kept = set(enumerate_space(graph, cache).masks)
        for m in everything:
            ops = bits(m)
            weights = sum(graph[o].weight_elems for o in ops) * cache.hw.dtype_bytes
            over = lbdf_buffer_bound(graph, ops, cache.hw.dtype_bytes, pairs) > buffer
            assert (m in kept) == (len(ops) == 1 or not over)
            newly_pruned += over and weights <= buffer and len(ops) > 1
        for ops in _runnable_sets(graph, cache):
            if is_convex(graph, ops):
                assert sum(1 << o for o in ops) in kept
    assert newly_pruned > 0


# --- a cycle of convex groups ----------------------------------------------------------------


def crossed_net() -> ComputeGraph:
    """Two chains a1 -> a2, b1 -> b2 crossed (a1 -> b2, b1 -> a2): the convex groups
    {a1, b2} and {b1, a2} form a cycle."""
    n = Net("crossed")
    a1, b1 = n.conv("a1", "x", 8), n.conv("b1", "x", 8)
    return n.build(n.add("a2", a1, b1), n.add("b2", b1, a1))


def test_cyclic_pair_of_convex_groups(hw):
    graph = crossed_net()
    cache = CostCache(graph, hw(1 << 20), "lbdf")
    a1, b1, a2, b2 = (graph.id_of(x) for x in ("a1", "b1", "a2", "b2"))
    keep = {1 << o for o in range(len(graph))} | {1 << a1 | 1 << b2, 1 << b1 | 1 << a2}
    space = enumerate_space(graph, cache)
    assert keep <= set(space.masks)
    idx = [k for k, m in enumerate(space.masks) if m in keep]
    pick = {f.name: tuple(getattr(space, f.name)[k] for k in idx)
            for f in dataclasses.fields(space) if isinstance(getattr(space, f.name), tuple)}
    restricted = dataclasses.replace(space, **pick)
    cands = costed_candidates(cache, restricted)
    both = sum(c.dram_bytes for c in cands if len(c.ops) == 2)  # the cyclic cover
    milp = solve_milp(graph, cands)
    res = solve(graph, cache, restricted)
    assert milp.cuts >= 1, "the cyclic pair is the cheapest cover: the MILP must cut it"
    assert milp.dram_bytes == res.dram_bytes > both
    assert evaluate_plan(graph, res.plan, cache.hw, "lbdf", cache).valid


# --- MILP cross-check on the zoo -------------------------------------------------------------


def _zoo_agree(model: str, hw) -> None:
    from simulator.workload.loader import load_zoo

    graph = load_zoo(model)
    cache = CostCache(graph, hw(128 * 1024), "lbdf")
    space = enumerate_space(graph, cache)
    res = solve(graph, cache, space)
    milp = solve_milp(graph, costed_candidates(cache, space))
    assert milp.dram_bytes == res.dram_bytes
    cost = evaluate_plan(graph, res.plan, cache.hw, "lbdf", cache)
    assert cost.valid and cost.dram_bytes == res.dram_bytes
    assert segment_dp(graph, cache).dram_bytes >= res.dram_bytes


@pytest.mark.slow
@pytest.mark.parametrize("model", ["resnet18", "squeezenet1_0", "mobilenet_v2"])
def test_milp_agrees_on_zoo(model, hw):
    _zoo_agree(model, hw)


# --- heuristics never beat the optimum -------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SMALL_NETS))
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("algo", ["rs", "ls"])
def test_no_heuristic_beats_exact(name, scheme, algo, hw):
    from search import SearchProblem, make_algorithm, run_search

    graph = SMALL_NETS[name]()
    hardware = hw(3_000)
    cache = CostCache(graph, hardware, scheme)
    best = optimum(graph, cache).dram_bytes
    assert segment_dp(graph, cache).dram_bytes >= best
    for seed in range(3):
        result = run_search(SearchProblem(graph, hardware, scheme), make_algorithm(algo), 40,
                            np.random.default_rng(seed))
        assert result.cost.dram_bytes >= best


# --- caps, determinism -----------------------------------------------------------------------


def test_costing_cap_is_reported(hw):
    graph = SMALL_NETS["fire"]()
    cache = CostCache(graph, hw(3_000), "brr")
    full = optimum(graph, CostCache(graph, hw(3_000), "brr"))
    capped = optimum(graph, cache, caps=ExactCaps(max_costed=len(graph)),  # singletons only
                     incumbents=())
    assert not capped.optimal and "costing cap" in capped.cap_reason
    assert capped.costed == len(graph)
    assert evaluate_plan(graph, capped.plan, cache.hw, "brr", cache).valid
    assert capped.bound_bytes is not None
    assert capped.bound_bytes <= full.dram_bytes < capped.dram_bytes
    assert full.optimal and full.bound_bytes is None
    assert f"the optimum is >= {capped.bound_bytes:,} B" in capped.cap_reason


def test_both_caps_claim_no_bound(hw):
    """With the enumeration capped too, the costing cap's key bounds only the sets found: no
    bound is claimed (bert_base BRR claimed 'the optimum is >= 86,235,648 B' and local search
    then found 85,449,216 B)."""
    graph = SMALL_NETS["fire"]()
    cache = CostCache(graph, hw(3_000), "brr")
    space = enumerate_space(graph, cache, max_sets=len(graph) + 3)
    capped = solve(graph, cache, space, max_costed=len(graph))
    assert "set cap" in capped.cap_reason and "costing cap" in capped.cap_reason
    assert capped.bound_bytes is None and ">=" not in capped.cap_reason


def _three_branches() -> ComputeGraph:
    """A stem conv, three branches of two 3x3 convs, two concats and a 1x1 conv (10 ops)."""
    net = Net("three_branches", (1, 16, 8, 8))
    x = net.conv("stem", "x", 16)
    outs = [net.conv(f"b{i}c1", net.conv(f"b{i}c0", x, 16), 16) for i in range(3)]
    cat = net.concat("cat1", net.concat("cat0", outs[0], outs[1]), outs[2])
    return net.build(net.conv("merge", cat, 16, k=1))


@pytest.mark.parametrize("extra, proven", [(2, False), (4, True)])
def test_set_cap_is_reported_with_a_proven_lower_bound(extra, proven, hw):
    """A set cap stops the solve: the answer is valid, says which cap cut it and comes with a
    lower bound of the optimum (the capped lazy search's frontier); it is claimed optimal
    only where that bound reaches it (with 4 sets beyond the singletons it does). (On the
    paper's residual graph the lazy search's chains bound proves every capped answer.)"""
    graph = _three_branches()
    cache = CostCache(graph, hw(3_000), "lbdf")
    capped = optimum(graph, cache, caps=ExactCaps(max_sets=len(graph) + extra))
    full = optimum(graph, CostCache(graph, hw(3_000), "lbdf"))
    assert full.optimal and "set cap" in capped.cap_reason
    assert evaluate_plan(graph, capped.plan, cache.hw, "lbdf", cache).valid
    assert capped.bound_bytes is not None
    assert capped.bound_bytes <= full.dram_bytes <= capped.dram_bytes
    assert capped.optimal == (capped.bound_bytes >= capped.dram_bytes) == proven
    if proven:
        assert f"proven optimal all the same (the optimum is >= {capped.bound_bytes:,} B)" \
            in capped.cap_reason
    else:
        assert f"the optimum is >= {capped.bound_bytes:,} B" in capped.cap_reason


def test_deterministic(hw):
    graph = SMALL_NETS["fire"]()
    a = optimum(graph, CostCache(graph, hw(3_000), "brr"))
    b = optimum(graph, CostCache(graph, hw(3_000), "brr"))
    assert a.plan == b.plan and a.to_dict()["costed"] == b.to_dict()["costed"]


def test_bad_caps_rejected(hw):
    graph = SMALL_NETS["fire"]()
    with pytest.raises(ValueError, match="max_sets"):
        enumerate_space(graph, CostCache(graph, hw(3_000), "lbdf"), max_sets=0)


# --- the ask-and-tell adapter ----------------------------------------------------------------


@pytest.mark.parametrize("objectives", ["dram", "dram,mbu"])
def test_exact_search_through_driver(objectives, hw):
    from search import SearchProblem, run_search
    from search.algorithms.base import SearchAlgorithm
    from search.exact.algorithm import ExactSearch

    graph = SMALL_NETS["fire"]()
    hardware = hw(3_000)
    algo = ExactSearch()
    assert isinstance(algo, SearchAlgorithm)
    result = run_search(SearchProblem(graph, hardware, "brr", objectives), algo, 5,
                        np.random.default_rng(0))
    best = optimum(graph, CostCache(graph, hardware, "brr"))
    assert algo.done and result.cost.dram_bytes == best.dram_bytes
    assert result.plan == best.plan


def _wide_net():
    """Twenty parallel branches: 2^20 down-sets (a fissioned op's pieces form such antichains)."""
    net = Net("wide", (1, 8, 8, 8))
    stem = net.conv("stem", "x", 8, k=1)
    branches = [net.conv(f"b{k}", stem, 2, k=1) for k in range(20)]
    out = branches[0]
    for k, b in enumerate(branches[1:]):
        out = net.concat(f"cat{k}", out, b)
    return net.build(out)


def test_a_state_space_too_wide_for_the_state_cap_gives_the_best_baseline(hw):
    """Listing 2^20 down-sets would take minutes: the state cap (counted work) stops the
    listing and the answer is the best baseline plan, valid, not claimed optimal (the capped
    search's lower bound stays below it), and the same on every run. (800 B: the whole
    network does not fit one group, which `optimum` would prove at once.)"""
    graph = _wide_net()
    answers = []
    for _ in range(2):
        cache = CostCache(graph, hw(800), "lbdf")
        res = optimum(graph, cache, caps=ExactCaps(max_sets=20_000, max_states=5_000))
        assert "state cap (5,000 down-sets listed)" in res.cap_reason
        assert not res.optimal and res.bound_bytes < res.dram_bytes
        assert f"the optimum is >= {res.bound_bytes:,} B" in res.cap_reason
        assert res.reproducible and res.source in ("segment_dp", "greedy_fit")
        cost = evaluate_plan(graph, res.plan, cache.hw, "lbdf", cache)
        assert cost.valid and cost.dram_bytes == res.dram_bytes
        assert res.dram_bytes <= segment_dp(graph, cache).dram_bytes
        answers.append((res.plan, res.dram_bytes, res.cap_reason))
    assert answers[0] == answers[1]


def test_an_opt_in_time_limit_cuts_the_listing_and_says_it_is_not_reproducible(hw):
    import time

    graph = _wide_net()
    cache = CostCache(graph, hw(800), "lbdf")  # the network does not fit one group
    started = time.perf_counter()
    res = optimum(graph, cache, caps=ExactCaps(max_sets=20_000), time_limit=0.5)
    assert time.perf_counter() - started < 30.0  # listing all 2^20 takes minutes
    # Where the clock stops it depends on the machine: the eager listing (slow machine) or the
    # lazy search after the eager one listed its share (fast machine); either says so.
    assert not res.optimal and "time cap" in res.cap_reason
    assert not res.reproducible
    cost = evaluate_plan(graph, res.plan, cache.hw, "lbdf", cache)
    assert cost.valid and cost.dram_bytes == res.dram_bytes <= segment_dp(graph, cache).dram_bytes


# --- incumbents ------------------------------------------------------------------------------


def test_a_capped_solve_is_never_worse_than_the_baselines(hw):
    """The costing cap leaves the A* with the singletons only; the segment plan the solver
    starts from is better, so it is the answer, said so and valid."""
    graph = SMALL_NETS["fire"]()
    cache = CostCache(graph, hw(3_000), "brr")
    raw = optimum(graph, cache, caps=ExactCaps(max_costed=len(graph)), incumbents=())
    res = optimum(graph, cache, caps=ExactCaps(max_costed=len(graph)))
    dp = segment_dp(graph, cache).dram_bytes
    assert raw.dram_bytes > dp  # the capped A* alone is worse than the segment DP
    assert res.dram_bytes <= dp and res.source in ("segment_dp", "greedy_fit")
    assert "plan is better than that and is the answer" in res.cap_reason
    assert evaluate_plan(graph, res.plan, cache.hw, "brr", cache).dram_bytes == res.dram_bytes


def test_a_capped_solve_whose_bound_reaches_the_answer_is_proven(hw):
    """Under LBDF a set's lower bound is its F_D, so a cap that stops the A* on the optimal
    path drops a key equal to the optimum: the incumbent (here the optimum itself) is then
    proven all the same. Every cap gives a valid answer no worse than the incumbent."""
    from search.exact.solver import Incumbent

    graph = SMALL_NETS["fire"]()
    # the eager search alone: `auto` proves the one group holding the network at once here
    full = optimum(graph, CostCache(graph, hw(1 << 20), "lbdf"), incumbents=(),
                   search="eager")
    inc = Incumbent(full.plan, full.dram_bytes, full.cycles, full.mbu_bytes, "given")
    proven = []
    for cap in range(len(graph), full.costed):
        res = optimum(graph, CostCache(graph, hw(1 << 20), "lbdf"),
                      caps=ExactCaps(max_costed=cap), incumbents=[inc], search="eager")
        assert res.dram_bytes == full.dram_bytes and "costing cap" in res.cap_reason
        if res.optimal:
            assert res.bound_bytes >= full.dram_bytes
            assert "proven optimal all the same" in res.cap_reason
            proven.append(cap)
    assert proven


@settings(max_examples=300, deadline=None)
@given(ids=st.sets(st.integers(0, 400), max_size=120))
def test_bits_lists_the_set_bits_ascending(ids):
    """`bits` (bit by bit for a few bits, byte by byte for more) gives the op ids of a mask."""
    assert bits(sum(1 << i for i in ids)) == tuple(sorted(ids))
