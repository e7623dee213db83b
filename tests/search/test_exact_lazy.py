"""The exact solver's lazy search (search.exact.lazy): down-sets reached from the A* frontier,
the partial order reduction, the closed-form heuristic, and the fallback of `optimum` to it
on graphs with wide antichains (zoo-independent)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.exact import optimum
from search.exact.candidates import _Closure, bits, evaluate_set
from search.exact.lazy import _Search
from search.exact.solver import DEFAULT_CAPS, ExactCaps, _Budget, baseline_incumbents
from simulator.cost import CostCache, evaluate_plan
from simulator.workload.graph import ComputeGraph
from simulator.workload.synthetic import hrnet_like, parallel_branches
from tests.search.conftest import SMALL_NETS, Net
from tests.search.test_exact import BUFFERS, SCHEMES, _brute, small_dags


def _lazy(graph: ComputeGraph, cache: CostCache, caps: ExactCaps = DEFAULT_CAPS, **kw):
    res = optimum(graph, cache, caps=caps, search="lazy", **kw)
    cost = evaluate_plan(graph, res.plan, cache.hw, cache.scheme, cache)
    assert cost.valid, cost.violations
    assert cost.dram_bytes == res.dram_bytes and cost.cycles == res.cycles
    return res


def _check_brute(graph: ComputeGraph, cache: CostCache) -> None:
    res = _lazy(graph, cache, incumbents=())
    assert res.optimal and res.search == "lazy" and res.cap_reason == ""
    plans = _brute(graph, cache)
    best = min(c.dram_bytes for _, c in plans)
    assert res.dram_bytes == best
    assert res.cycles == min(c.cycles for _, c in plans if c.dram_bytes == best)


# --- the same optimum as the eager search and as brute force ---------------------------------


@pytest.mark.parametrize("name", sorted(SMALL_NETS))
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("buffer", BUFFERS)
def test_lazy_equals_eager_on_paper_graphs(name, scheme, buffer, hw):
    graph = SMALL_NETS[name]()
    eager = optimum(graph, CostCache(graph, hw(buffer), scheme), search="eager", incumbents=())
    lazy = _lazy(graph, CostCache(graph, hw(buffer), scheme), incumbents=())
    assert eager.search == "eager" and lazy.search == "lazy"
    assert eager.optimal and lazy.optimal
    assert (lazy.dram_bytes, lazy.cycles) == (eager.dram_bytes, eager.cycles)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=small_dags(), scheme=st.sampled_from(SCHEMES), buffer=st.sampled_from(BUFFERS))
def test_lazy_equals_brute_force_on_random_dags(graph, scheme, buffer):
    from simulator.hw import load_hw

    _check_brute(graph, CostCache(graph, load_hw("edge-npu", {"buffer": buffer}), scheme))


def _small_wide() -> ComputeGraph:
    """11 ops: a stem, three parallel conv-relu branches, a concat and a 1x1 merge."""
    return parallel_branches(stages=1, branches=3, depth=1, width=4, resolution=8)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("buffer", BUFFERS)
def test_lazy_equals_brute_force_on_a_small_wide_graph(scheme, buffer, hw):
    graph = _small_wide()
    assert len(graph) == 11
    _check_brute(graph, CostCache(graph, hw(buffer), scheme))


def _branches(branches: int, depth: int, stages: int = 1, channels: int = 16) -> ComputeGraph:
    """A stem conv, then `stages` times `branches` chains of `depth` 3x3 convs joined by a
    chain of concats and a 1x1 conv (each 3x3 conv: 2,320 weights)."""
    net = Net("branches", (1, channels, 8, 8))
    x = net.conv("stem", "x", channels)
    for s in range(stages):
        outs = []
        for i in range(branches):
            y = x
            for k in range(depth):
                y = net.conv(f"s{s}b{i}c{k}", y, channels)
            outs.append(y)
        cat = outs[0]
        for i, o in enumerate(outs[1:]):
            cat = net.concat(f"s{s}cat{i}", cat, o)
        x = net.conv(f"s{s}merge", cat, channels, k=1)
    return net.build(x)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("buffer", [3_000, 6_000, 1 << 20])
def test_lazy_equals_eager_on_parallel_branches(scheme, buffer, hw):
    """Four branches of three convs, two stages (4^4 down-sets a stage): both searches run to
    the end, with the same optimum."""
    graph = _branches(4, 3, stages=2)
    eager = optimum(graph, CostCache(graph, hw(buffer), scheme), search="eager")
    lazy = _lazy(graph, CostCache(graph, hw(buffer), scheme))
    assert eager.optimal and lazy.optimal
    assert (lazy.dram_bytes, lazy.cycles) == (eager.dram_bytes, eager.cycles)


# --- wide antichains: proven within the default work caps ------------------------------------


def test_a_wide_graph_the_listing_cannot_hold_proves_within_the_default_caps(hw):
    """Eight branches of four convs: 5^8 = 390,625 down-sets, beyond the default state cap, so
    the eager search gives up (as every solve did before the lazy search); `optimum` falls back
    to the lazy search, which proves the optimum within the default caps, at least as good as
    the eager search's answer."""
    graph = _branches(8, 4)
    cache = CostCache(graph, hw(6_000), "lbdf")
    eager = optimum(graph, CostCache(graph, hw(6_000), "lbdf"), search="eager")
    assert not eager.optimal and "state cap (200,000 down-sets listed)" in eager.cap_reason
    res = optimum(graph, cache)
    assert res.optimal and res.search == "lazy" and res.cap_reason == "" and res.reproducible
    assert res.candidates <= DEFAULT_CAPS.max_sets and res.listed <= DEFAULT_CAPS.max_states
    assert res.costed <= DEFAULT_CAPS.max_costed
    assert res.dram_bytes <= eager.dram_bytes
    assert evaluate_plan(graph, res.plan, cache.hw, "lbdf", cache).dram_bytes == res.dram_bytes


def _hrnet_stages() -> ComputeGraph:
    """HRNet's stages 2 and 3 (two and three branches at halving resolutions, one basic block
    each, and both fuse units) without the stem and head: 58 ops, more than 200,000 connected
    convex sets."""
    return hrnet_like(resolution=16, widths=(2, 4, 8), blocks=1, head=False, stem=False)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_hrnet_stages_prove_where_one_group_holds_them(scheme, hw):
    """The lazy search reaches the plan of one group from the empty state and proves it after
    costing one set; `auto` proves it before any search (it runs at its compulsory traffic)."""
    graph = _hrnet_stages()
    res = optimum(graph, CostCache(graph, hw(1 << 20), scheme), search="lazy")
    assert res.optimal and res.search == "lazy" and res.cap_reason == ""
    assert len(res.plan) == 1 and res.costed == 1
    auto = optimum(graph, CostCache(graph, hw(1 << 20), scheme))
    assert auto.optimal and auto.search == "one_group" and auto.plan == res.plan
    assert (auto.dram_bytes, auto.cycles) == (res.dram_bytes, res.cycles)


@pytest.mark.slow
def test_hrnet_stages_meet_the_eager_set_cap(hw):
    graph = _hrnet_stages()
    res = optimum(graph, CostCache(graph, hw(1 << 20), "lbdf"), search="eager")
    assert not res.optimal and "set cap (200,000)" in res.cap_reason


def _fissioned(pieces: int, channels: int = 8) -> ComputeGraph:
    """A conv, `pieces` output-channel pieces of a 3x3 conv reading it (what the fission stage
    makes of an op whose weights fit no buffer) joined by a chain of concats, and a 1x1 conv."""
    net = Net("fissioned", (1, channels, 8, 8))
    x = net.conv("head", "x", channels)
    outs = [net.conv(f"piece{k}", x, 24) for k in range(pieces)]
    cat = outs[0]
    for k, o in enumerate(outs[1:]):
        cat = net.concat(f"cat{k}", cat, o)
    return net.build(net.conv("tail", cat, channels, k=1))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_pieces_of_a_fissioned_op_give_the_eager_optimum(scheme, hw):
    graph = _fissioned(6)
    eager = optimum(graph, CostCache(graph, hw(3_000), scheme), search="eager")
    lazy = _lazy(graph, CostCache(graph, hw(3_000), scheme))
    assert eager.optimal and lazy.optimal
    assert (lazy.dram_bytes, lazy.cycles) == (eager.dram_bytes, eager.cycles)


def test_the_pieces_of_a_fissioned_op_are_not_interleaved(hw):
    """20 pieces (1,752 weights each; two do not fit 3,000 B under LBDF, which is why the
    fission stage cut the op) reading one tensor: 2^20 down-sets. The partial order reduction
    reaches a few thousand."""
    graph = _fissioned(20)
    res = _lazy(graph, CostCache(graph, hw(3_000), "lbdf"))
    assert res.optimal and res.listed < 20_000


# --- the heuristic and the caps ---------------------------------------------------------------


def _down_sets(graph: ComputeGraph) -> list[int]:
    pred = _Closure.of(graph).pred
    out = []
    for r in range(len(graph) + 1):
        for ops in itertools.combinations(range(len(graph)), r):
            m = sum(1 << o for o in ops)
            if all(pred[o] & ~m == 0 for o in ops):
                out.append(m)
    return out


@pytest.mark.parametrize("name", sorted(SMALL_NETS))
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("buffer", [1_500, 6_000])
def test_heuristic_is_consistent_over_every_group_that_runs(name, scheme, buffer, hw):
    """h(S) <= F_D(G) + h(S + G) and the same for the cycles, for every down-set S and every
    connected group G that runs with S + G a down-set; h(all) = 0."""
    graph = SMALL_NETS[name]()
    _check_consistent(graph, CostCache(graph, hw(buffer), scheme))


def _check_consistent(graph, cache: CostCache) -> None:
    """h(all) = 0, and h(S) <= F_D(G) + h(S + G) (and the same for the cycles) for every
    down-set S and every connected group G that runs with S + G a down-set."""
    unfusable = set(cache.unfusable)
    inc = baseline_incumbents(graph, cache)
    search = _Search(graph, cache, None, None, _Budget(None, None), inc[0].dram_bytes)
    full = (1 << len(graph)) - 1
    assert search.h(full) == (0, 0)
    downs = list(_down_sets(graph))
    for placed in downs:
        for mask in downs:
            if mask & placed != placed or mask == placed:
                continue
            group = bits(mask & ~placed)
            if not graph.is_weakly_connected(group):
                continue
            if len(group) > 1 and set(group) & unfusable:
                continue
            cost = cache.run(group)
            if not cost.fits:
                continue
            here, there = search.h(placed), search.h(mask)
            assert here[0] <= cost.dram_bytes + there[0], (placed, group)
            assert here[1] <= cost.timing.cycles + there[1], (placed, group)


def test_lazy_caps_give_a_valid_reproducible_answer(hw):
    """Each work cap stops the lazy search with a valid plan no worse than the baselines, not
    claimed optimal, the same on every run. (The set cap comes with a state cap: the best plan
    over the sets found lists its down-sets within what is left of it, where eight branches
    of four ops have 5^8 of them.)"""
    graph = _branches(8, 4)
    answers = []
    for caps in (ExactCaps(max_sets=200, max_states=20_000), ExactCaps(max_states=300),
                 ExactCaps(max_costed=20)):
        for _ in range(2):
            cache = CostCache(graph, hw(6_000), "lbdf")
            res = _lazy(graph, cache, caps=caps)
            assert not res.optimal and res.reproducible and res.cap_reason
            if caps.max_sets:  # the set cap stops the search, the rest of the state cap the
                # listing over the sets found
                assert res.cap_reason.startswith("lazy search: set cap (200 ")
                assert "state cap (7,693 down-sets listed)" in res.cap_reason
            assert res.dram_bytes <= min(i.dram_bytes for i in baseline_incumbents(graph, cache))
            answers.append((caps, res.plan, res.dram_bytes, res.cap_reason))
    assert answers[0::2] == answers[1::2]


def test_set_store_evaluates_like_a_space(hw):
    """The lazy search's set store is read by `evaluate_set` like a `CandidateSpace`."""
    graph = SMALL_NETS["fire"]()
    cache = CostCache(graph, hw(3_000), "brr")
    search = _Search(graph, cache, None, None, _Budget(None, None), None)
    out = search.run()
    assert out.path is not None
    for k in range(len(search.store)):
        c = evaluate_set(cache, search.store, k)
        assert c is None or c.mask == search.store.masks[k]


def _wide_middle() -> ComputeGraph:
    """Two small convs, a conv with 64 x 32 x 9 = 18,432 weights (more than a 6,000 B buffer
    holds: unfusable), a skip around it and two small convs after the add."""
    net = Net("wide_middle", (1, 8, 8, 8))
    a = net.conv("a", "x", 8)
    b = net.conv("b", a, 32)
    wide = net.conv("wide", b, 64)
    c = net.conv("c", wide, 32, k=1)
    s = net.add("skip", b, c)
    return net.build(net.conv("d", net.conv("e", s, 8), 8))


def test_heuristic_charges_an_unfusable_op_its_exact_cost(hw):
    """An unfusable op runs alone, layer by layer, at a cost no plan changes: h counts it, so
    placing it alone lowers h by exactly its (DRAM, cycles); h stays consistent and the lazy
    optimum is the eager one. (LBDF: BRR streams the op's weights, so it is fusable there.)"""
    scheme = "lbdf"
    graph = _wide_middle()
    cache = CostCache(graph, hw(6_000), scheme)
    (u,) = cache.unfusable
    alone = cache.run((u,))
    assert alone.fits and alone.dram_bytes > 0
    search = _Search(graph, cache, None, None, _Budget(None, None), None)
    before = (1 << u) - 1  # ids are topological: every op before u, a down-set
    here, there = search.h(before), search.h(before | 1 << u)
    assert here[0] - there[0] == alone.dram_bytes
    assert here[1] - there[1] == alone.timing.cycles
    _check_consistent(graph, cache)
    eager = optimum(graph, CostCache(graph, hw(6_000), scheme), search="eager", incumbents=())
    lazy = _lazy(graph, CostCache(graph, hw(6_000), scheme), incumbents=())
    assert eager.optimal and lazy.optimal
    assert (lazy.dram_bytes, lazy.cycles) == (eager.dram_bytes, eager.cycles)


def test_never_asks_the_convex_hull(hw):
    """Two ops that fit a group together by their own weights, but not with the ops on the
    path between them (a group holding both is convex, so it holds that path), never share a
    group (`_never`, which the reduction and the heuristic's cliques of readers ask), and the
    lazy optimum is still brute force's."""
    net = Net("hull", (1, 8, 8, 8))
    x = net.conv("first", "x", 8, k=1)  # 64 + 8 weights
    mid = net.conv("mid", net.conv("pre", x, 16), 8)  # 8 x 16 x 9 and 16 x 8 x 9 weights
    graph = net.build(net.add("add", x, mid))
    cache = CostCache(graph, hw(2_000), "lbdf")
    search = _Search(graph, cache, None, None, _Budget(None, None), None)
    x_id, add_id = (next(o.id for o in graph if o.name == n) for n in ("first", "add"))
    pre_id = next(o.id for o in graph if o.name == "pre")
    weights = sum(graph[o].weight_reads for o in (x_id, add_id))
    hull = sum(o.weight_reads for o in graph)
    assert weights <= 2_000 < hull  # the pair alone fits, its hull does not
    assert search._never(1 << x_id | 1 << add_id)
    assert search._never(1 << pre_id | 1 << add_id)  # pre -> mid -> add: mid in the hull too
    assert not search._never(1 << x_id | 1 << pre_id)
    _check_brute(graph, CostCache(graph, hw(2_000), "lbdf"))
