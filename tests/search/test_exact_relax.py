"""The labelling relaxation (`search.exact.relax`): a proven lower bound of the LBDF optimum
from a MILP, and the plan of its labelling, used where a work cap stops the lazy search."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import search.exact.solver as solver_module
from search.exact import optimum
from search.exact.relax import labelling_bound
from search.exact.solver import ExactCaps
from simulator.cost import CostCache, evaluate_plan
from simulator.hw import load_hw
from tests.search.test_exact import _brute
from tests.search.test_exact_lazy import _branches
from tests.search.test_exact_streaming import wide_dags


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=wide_dags(), buffer=st.sampled_from((1_500, 3_000, 6_000, 12_000, 40_000)))
def test_the_labelling_bound_never_exceeds_the_optimum(graph, buffer):
    """On random DAGs of convs, adds and concats, the relaxation's bound (the labelling's and
    every round of the cut model's) is at most the brute-force LBDF optimum, and the plan it
    returns is valid, every group runs, and it costs at least the optimum."""
    hw = load_hw("edge-npu", {"buffer": buffer})
    cache = CostCache(graph, hw, "lbdf")
    relaxed = labelling_bound(graph, cache, max_labels=None)
    best = min(c.dram_bytes for _, c in _brute(graph, CostCache(graph, hw, "lbdf")))
    if relaxed is None:
        assert set(cache.unfusable) == set(range(len(graph)))
        return
    assert relaxed.bound_bytes <= best
    if relaxed.plan is not None:
        cost = evaluate_plan(graph, relaxed.plan, hw, "lbdf", cache)
        assert cost.valid, cost.violations
        assert cost.dram_bytes >= best


def test_a_capped_lazy_search_is_proven_by_the_relaxation(hw, monkeypatch):
    """Two branches of three convs, three stages, LBDF at 20,000 B: a set cap stops the lazy
    search far from the optimum; the relaxation's labelling runs at its bound, so the answer
    is that plan, proven, and equal to the uncapped optimum. Without the relaxation the same
    capped search proves nothing: the descent from its best plan finds the optimum, which its
    own bound does not reach; without the descent as well, it answers worse."""
    graph = _branches(2, 3, 3)
    exact = optimum(graph, CostCache(graph, hw(20_000), "lbdf"), search="eager")
    caps = ExactCaps(max_sets=len(graph) + 5)
    res = optimum(graph, CostCache(graph, hw(20_000), "lbdf"), caps=caps, search="lazy",
                  incumbents=())
    assert exact.optimal
    assert res.optimal and res.source == "relaxation"
    assert res.dram_bytes == res.bound_bytes == exact.dram_bytes
    assert "the labelling relaxation: the optimum is >=" in res.cap_reason
    cost = evaluate_plan(graph, res.plan, hw(20_000), "lbdf")
    assert cost.valid and cost.dram_bytes == res.dram_bytes
    again = optimum(graph, CostCache(graph, hw(20_000), "lbdf"), caps=caps, search="lazy",
                    incumbents=())
    assert again.plan == res.plan  # HiGHS under a node cap: the same answer every time

    monkeypatch.setattr(solver_module, "labelling_bound", lambda *a, **k: None)
    alone = optimum(graph, CostCache(graph, hw(20_000), "lbdf"), caps=caps, search="lazy",
                    incumbents=())
    assert not alone.optimal and alone.source == "descent"
    assert alone.dram_bytes == exact.dram_bytes > alone.bound_bytes
    assert "a descent from " in alone.cap_reason
    monkeypatch.setattr(solver_module, "descend", lambda graph, cache, plan: (plan, 0))
    neither = optimum(graph, CostCache(graph, hw(20_000), "lbdf"), caps=caps, search="lazy",
                      incumbents=())
    assert not neither.optimal and neither.dram_bytes > exact.dram_bytes


def test_the_relaxation_is_lbdf_only_and_bounded_in_size(hw):
    """BRR streams weights, so the weight capacity bounds nothing: no relaxation. Above
    `max_labels` (2 ceil(weights / buffer) - 1 labels) it is not built either."""
    graph = _branches(2, 3, 3)
    assert labelling_bound(graph, CostCache(graph, hw(20_000), "brr")) is None
    cache = CostCache(graph, hw(20_000), "lbdf")
    full = labelling_bound(graph, cache, max_labels=None)
    assert full is not None and full.labels == 5
    assert labelling_bound(graph, cache, max_labels=4) is None
    assert labelling_bound(graph, cache, max_labels=5) == full


def test_the_cut_model_finds_a_valid_plan_the_labelling_does_not(hw):
    """Three branches of three convs, two stages, LBDF at 20,000 B: the labelling's groups do
    not all run (line buffers are not in it), so it returns no plan; the cut model's rounds,
    each cutting off the last solution's groups that cannot run, end at a valid plan whose
    groups all run, here the optimum; the bound stays the labelling's, below it."""
    graph = _branches(3, 3, 2)
    cache = CostCache(graph, hw(20_000), "lbdf")
    exact = optimum(graph, CostCache(graph, hw(20_000), "lbdf"), search="eager")
    first = labelling_bound(graph, cache, max_rounds=1)
    assert first is not None and first.plan is None and first.rounds == 1
    full = labelling_bound(graph, cache)
    assert full.rounds > 1 and full.plan is not None
    cost = evaluate_plan(graph, full.plan, hw(20_000), "lbdf", cache)
    assert cost.valid and cost.dram_bytes == exact.dram_bytes
    assert first.bound_bytes <= full.bound_bytes <= exact.dram_bytes
