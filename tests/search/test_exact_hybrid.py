"""Hybrid plans: each group its cheapest dataflow; the exact hybrid optimum against brute force
and against the optimum of every single dataflow; the simulator on a mixed plan."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.exact import optimum
from simulator.cost import COST_MODELS, CostCache, evaluate_plan
from simulator.dataflow.hybrid import choose
from simulator.engine.simulate import simulate
from simulator.hw import load_hw
from simulator.plan import layer_by_layer
from simulator.scheme import Scheme
from tests.search.conftest import SMALL_NETS
from tests.search.test_exact import BUFFERS, _all_plans, small_dags
from tests.search.test_exact_streaming import wide_dags


def _least_by_assignment(graph, cache: CostCache) -> tuple[int, int]:
    """Brute force: every partition into connected sets that run under some dataflow, and
    for each group every member dataflow that runs it (DRAM and cycles are sums over groups,
    so the least over assignments takes each group's least); (DRAM, cycles), least first."""
    hw, unfusable = cache.hw, set(cache.unfusable)
    best = None
    for plan, _ in _all_plans(graph, cache):
        dram = cycles = 0
        for g in plan.groups:
            ops = g.ops
            if len(ops) == 1 and ops[0] in unfusable:
                options = [COST_MODELS[Scheme.LBL](graph, ops, hw)]
            else:
                members = Scheme.HYBRID.members if len(ops) == 1 else Scheme.HYBRID.fused
                options = [c for c in (COST_MODELS[s](graph, ops, hw) for s in members)
                           if c.fits]
            least = min((c.dram_bytes, c.timing.cycles) for c in options)
            dram, cycles = dram + least[0], cycles + least[1]
        best = (dram, cycles) if best is None else min(best, (dram, cycles))
    assert best is not None
    return best


def _single_optima(graph, hw) -> dict[str, int]:
    out = {s: optimum(graph, CostCache(graph, hw, s)).dram_bytes for s in ("lbdf", "brr")}
    out["lbl"] = evaluate_plan(graph, layer_by_layer(graph), hw, "lbl").dram_bytes
    return out


def _check(graph, hw) -> None:
    cache = CostCache(graph, hw, "hybrid")
    res = optimum(graph, cache)
    assert res.optimal and res.cap_reason == ""
    cost = evaluate_plan(graph, res.plan, hw, "hybrid", cache)
    assert cost.valid and (cost.dram_bytes, cost.cycles) == (res.dram_bytes, res.cycles)
    assert (res.dram_bytes, res.cycles) == _least_by_assignment(graph, cache)
    assert res.dram_bytes <= min(_single_optima(graph, hw).values())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=small_dags(), buffer=st.sampled_from(BUFFERS))
def test_hybrid_optimum_equals_brute_force_on_random_dags(graph, buffer):
    _check(graph, load_hw("edge-npu", {"buffer": buffer}))


@pytest.mark.parametrize("name", sorted(SMALL_NETS))
@pytest.mark.parametrize("buffer", BUFFERS)
def test_hybrid_optimum_equals_brute_force_on_paper_graphs(name, buffer, hw):
    _check(SMALL_NETS[name](), hw(buffer))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=wide_dags(), buffer=st.sampled_from((1_500, 3_000, 6_000)))
def test_lazy_hybrid_with_its_incumbents_equals_brute_force(graph, buffer):
    """The lazy search alone, with the baselines and the members' optima as incumbents (so the
    incumbent bound prunes the sets only a tiled member may run, and pairs of ops no member can
    group count as never sharing a group), still returns the brute-force optimum, on DAGs of
    convolutions whose weights exceed the buffer (the bound rules sets out in about a third of
    them)."""
    hw = load_hw("edge-npu", {"buffer": buffer})
    cache = CostCache(graph, hw, "hybrid")
    res = optimum(graph, cache, search="lazy")
    assert res.optimal and res.cap_reason == ""
    assert (res.dram_bytes, res.cycles) == _least_by_assignment(graph, cache)


def test_a_group_takes_its_least_dram_member_that_fits(hw):
    graph = SMALL_NETS[sorted(SMALL_NETS)[0]]()
    for buffer in BUFFERS:
        h = hw(buffer)
        for ops in [(0,), (0, 1), tuple(range(len(graph)))]:
            costs = [COST_MODELS[s](graph, ops, h) for s in Scheme.HYBRID.fused]
            chosen = COST_MODELS[Scheme.HYBRID](graph, ops, h)
            fitting = [c for c in costs if c.fits]
            if len(ops) == 1:
                fitting.append(COST_MODELS[Scheme.LBL](graph, ops, h))
                fitting = [c for c in fitting if c.fits]
            if fitting:
                assert chosen.fits and chosen.scheme in Scheme.HYBRID.members
                assert chosen.dram_bytes == min(c.dram_bytes for c in fitting)
            else:
                assert not chosen.fits and chosen.reason.startswith("no dataflow runs it")


def test_choose_breaks_ties_by_cycles_then_buffer_then_member_order(hw):
    graph = SMALL_NETS[sorted(SMALL_NETS)[0]]()
    a = COST_MODELS[Scheme.LBDF](graph, (0,), hw(1 << 20))
    assert a.fits and a.buffer_bytes > 0
    same = replace(a, scheme=Scheme.BRR)
    smaller = replace(a, scheme=Scheme.BRR, buffer_bytes=a.buffer_bytes - 1)
    faster = replace(a, scheme=Scheme.LBL, buffer_bytes=a.buffer_bytes + 1,
                     timing=replace(a.timing, cycles=a.timing.cycles - 1))
    less = replace(a, scheme=Scheme.BRR, dram_write=a.dram_write - 1,
                   timing=replace(a.timing, cycles=a.timing.cycles + 5))
    over = replace(less, dram_write=0, fits=False)
    assert choose([a, same]) is a
    assert choose([a, smaller]) is smaller
    assert choose([a, smaller, faster]) is faster
    assert choose([a, smaller, faster, less]) is less
    assert choose([a, over]) is a


def test_a_mixed_plan_simulates_exactly(hw):
    """The simulator runs every group under its own dataflow: DRAM equal, peak = F_beta."""
    from simulator.workload.loader import load_zoo

    graph = load_zoo("resnet18")
    h = load_hw("edge-npu", {"buffer": 64 << 10})
    cache = CostCache(graph, h, "hybrid")
    plan = optimum(graph, cache).plan
    cost = evaluate_plan(graph, plan, h, "hybrid", cache)
    used = {str(g.scheme) for g in cost.groups}
    assert {"lbdf", "brr", "lbl"} <= used  # a plan mixing all three
    rep = simulate(graph, plan, h, "hybrid", record=False, cache=cache)
    assert rep.dram_bytes == cost.dram_bytes
    for g in rep.groups:
        assert g.mode == cost.groups[g.index].scheme
        assert g.peak_buffer_bytes == cost.groups[g.index].buffer_bytes <= h.buffer_bytes
