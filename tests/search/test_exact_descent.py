"""The descent a capped exact solve answers with (`search.exact.descent`): valid plans, never
worse, a local optimum of its moves, deterministic, within its cap of groups costed."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.baselines import segment_dp
from search.exact.descent import descend
from simulator.cost import CostCache, evaluate_plan
from simulator.hw import load_hw
from simulator.plan import PartitionPlan
from tests.search.conftest import Net, draw_dag


@st.composite
def dags(draw):
    return draw_dag(draw, "descent", (4, 9), ["conv", "conv", "unary", "add", "concat"],
                    channels=[4, 8, 16])


def _key(graph, cache, plan):
    cost = evaluate_plan(graph, plan, cache.hw, cache.scheme, cache)
    assert cost.valid, cost.violations
    return int(cost.dram_bytes), int(cost.cycles)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=dags(), buffer=st.sampled_from((1_500, 3_000, 6_000, 20_000)),
       scheme=st.sampled_from(("lbdf", "brr")), start=st.sampled_from(("lbl", "segment_dp")))
def test_descent_is_valid_never_worse_and_no_merge_improves_it(graph, buffer, scheme, start):
    """From layer by layer or the segment DP's plan, on random DAGs under LBDF and BRR: the
    plan is valid, at or below the start by (DRAM, cycles), the same on a second run, and no
    merge of two of its groups joined by an edge gives a valid plan below it."""
    cache = CostCache(graph, load_hw("edge-npu", {"buffer": buffer}), scheme)
    plan = (PartitionPlan.of([o] for o in range(len(graph))) if start == "lbl"
            else segment_dp(graph, cache).plan)
    better, costed = descend(graph, cache, plan)
    key = _key(graph, cache, better)
    assert key <= _key(graph, cache, plan)
    assert descend(graph, cache, plan) == (better, costed)
    groups = [set(g.ops) for g in better.groups]
    owner = {o: k for k, g in enumerate(groups) for o in g}
    pairs = {tuple(sorted((owner[u], owner[v]))) for v in range(len(graph))
             for u in graph.predecessors(v) if owner[u] != owner[v]}
    for a, b in pairs:
        merged = [g for k, g in enumerate(groups) if k not in (a, b)] + [groups[a] | groups[b]]
        cost = evaluate_plan(graph, PartitionPlan.of(merged), cache.hw, cache.scheme, cache)
        if cost.valid:
            assert (int(cost.dram_bytes), int(cost.cycles)) >= key


def test_a_convex_merge_that_makes_a_cycle_is_not_taken(hw):
    """a feeds c1 and b; c0 feeds c1 and c2, c2 feeds b. {a, b} is convex, yet with C = {c0,
    c1, c2} as a group a -> C -> b is a cycle of groups. The merge would save a's write and
    read; the descent takes another move and its plan is valid."""
    n = Net("cycle", (1, 8, 8, 8))
    a = n.conv("a", "x", 8, k=1)
    c0 = n.conv("c0", "x", 8, k=1)
    c1 = n.add("c1", c0, a)
    c2 = n.conv("c2", c0, 8, k=1)
    b = n.add("b", c2, a)
    graph = n.build(c1, b)
    ids = {op.name: op.id for op in graph}
    cache = CostCache(graph, hw(1 << 20), "lbdf")
    start = PartitionPlan.of([[ids["a"]], [ids["c0"], ids["c1"], ids["c2"]], [ids["b"]]])
    merged = PartitionPlan.of([[ids["a"], ids["b"]], [ids["c0"], ids["c1"], ids["c2"]]])
    assert not evaluate_plan(graph, merged, cache.hw, cache.scheme, cache).valid
    better, _ = descend(graph, cache, start)
    assert better != merged
    assert _key(graph, cache, better) < _key(graph, cache, start)


def test_the_descent_stops_at_its_cap(hw):
    """With a cap of groups costed, the descent stops there (counted work: the same plan on
    any machine), still valid and never worse."""
    n = Net("chain", (1, 8, 16, 16))
    t = "x"
    for k in range(6):
        t = n.unary(f"r{k}", n.conv(f"c{k}", t, 8))
    graph = n.build(t)
    cache = CostCache(graph, hw(1 << 20), "lbdf")
    lbl = PartitionPlan.of([o] for o in range(len(graph)))
    full, costed = descend(graph, cache, lbl)
    assert len(full) == 1 and costed > 20
    part, spent = descend(graph, cache, lbl, max_costed=20)
    assert spent == 20
    assert _key(graph, cache, full) < _key(graph, cache, part) < _key(graph, cache, lbl)
