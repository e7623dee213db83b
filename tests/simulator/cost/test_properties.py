"""Invariants of the cost models over random plans of zoo networks (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.cost import CostCache, evaluate_plan
from simulator.cost.brr import incompatibility
from simulator.hw import HardwareConfig
from simulator.partition import violations
from simulator.plan import PartitionPlan, layer_by_layer, segment_plan
from simulator.workload.graph import MappingType
from simulator.workload.loader import load_zoo

NETWORKS = ("resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0")
BUFFERS = (128 * 1024, 512 * 1024, 2 * 1024 * 1024)


def hw(buffer: int) -> HardwareConfig:
    return HardwareConfig(
        name="test", buffer_bytes=buffer, dram_bandwidth=16.0, dram_latency=100,
        clock_hz=1e9, macs_per_cycle=1024, buffer_bandwidth=128.0,
        energy_dram_pj_per_byte=160.0, energy_buffer_pj_per_byte=2.5, energy_mac_pj=0.3,
    )


@st.composite
def plans(draw):
    name = draw(st.sampled_from(NETWORKS))
    graph = load_zoo(name)
    cuts = draw(st.sets(st.integers(1, len(graph) - 1), max_size=len(graph) // 3))
    return graph, segment_plan(graph, cuts)


SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(plans(), st.sampled_from(BUFFERS), st.sampled_from(("lbdf", "brr")))
def test_plan_dram_is_at_least_the_lower_bound_and_every_group_needs_buffer(case, buffer, scheme):
    graph, plan = case
    assert violations(graph, plan) == []
    cost = evaluate_plan(graph, plan, hw(buffer), scheme)
    assert cost.dram_bytes >= cost.lower_bound
    assert cost.dram_bytes_fuseable >= cost.lower_bound_fuseable
    assert all(g.buffer_bytes > 0 for g in cost.groups)
    assert all(g.dram_bytes > 0 for g in cost.groups)


@pytest.mark.parametrize("name", NETWORKS)
@pytest.mark.parametrize("scheme", ["lbdf", "brr", "lbl"])
def test_layer_by_layer_plan_costs_the_lbl_reference(name, scheme):
    graph = load_zoo(name)
    cost = evaluate_plan(graph, layer_by_layer(graph), hw(2 * 1024 * 1024), "lbl")
    assert cost.valid and cost.dram_bytes == cost.lbl_dram
    lbdf = evaluate_plan(graph, layer_by_layer(graph), hw(2 * 1024 * 1024), scheme)
    assert lbdf.lbl_dram == cost.lbl_dram
    if scheme == "lbdf":  # a single op streams its rows: same traffic as layer by layer
        assert lbdf.dram_bytes == lbdf.lbl_dram


def _adjacent_merges(graph, plan: PartitionPlan):
    group_of = plan.group_of
    pairs = sorted({tuple(sorted((group_of[i], group_of[j]))) for i, j in graph.edges()
                    if group_of[i] != group_of[j]})
    for a, b in pairs:
        merged = [g.ops for k, g in enumerate(plan.groups) if k not in (a, b)]
        merged.append(plan.groups[a].ops + plan.groups[b].ops)
        yield a, b, PartitionPlan.of(merged)


@st.composite
def fine_plans(draw):
    """Plans of short segments (1-3 ops): most adjacent pairs of groups fit when merged."""
    graph = load_zoo(draw(st.sampled_from(NETWORKS)))
    cuts, at = [], 0
    while at < len(graph):
        at += draw(st.integers(1, 3))
        cuts.append(at)
    return graph, segment_plan(graph, cuts)


@SETTINGS
@given(fine_plans(), st.sampled_from(BUFFERS[1:]), st.randoms(use_true_random=False))
def test_merging_adjacent_lbdf_groups_that_fit_keeps_validity_and_never_adds_dram(
        case, buffer, rnd):
    graph, plan = case
    config = hw(buffer)
    cache = CostCache(graph, config, "lbdf")
    base = evaluate_plan(graph, plan, config, "lbdf", cache)
    unfusable = set(cache.unfusable)
    candidates = list(_adjacent_merges(graph, plan))
    rnd.shuffle(candidates)
    checked = 0
    for a, b, merged in candidates[:20]:
        union = plan.groups[a].ops + plan.groups[b].ops
        if unfusable & set(union) or violations(graph, merged):
            continue
        if not cache.group(tuple(sorted(union))).fits:
            continue
        after = evaluate_plan(graph, merged, config, "lbdf", cache)
        assert after.valid == base.valid
        assert after.dram_bytes <= base.dram_bytes
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "efficientnet_b0"])
def test_brr_never_runs_a_group_with_a_squeeze_excitation_pattern(name):
    graph = load_zoo(name)
    config = hw(64 * 1024 * 1024)
    cache = CostCache(graph, config, "brr")
    muls = [op for op in graph if op.mapping is MappingType.ONE_TO_MANY]
    assert muls
    for mul in muls:
        gap = next(p for p in range(mul.id) if graph[p].kind.value == "global_pool"
                   and p >= mul.id - 8)
        group = tuple(range(gap - 1, mul.id + 1))  # the map's producer .. the multiply
        assert graph.is_weakly_connected(group)
        assert incompatibility(graph, group)
        cost = cache.group(group)
        assert not cost.fits and cost.reason.startswith("BRR-incompatible")
        assert CostCache(graph, config, "lbdf").group(group).fits  # LBDF runs it


def test_lbdf_buffer_grows_with_the_group_and_memoisation_counts_hits():
    graph = load_zoo("resnet18")
    cache = CostCache(graph, hw(2 * 1024 * 1024), "lbdf")
    sizes = [cache.group(tuple(range(4, 4 + n))).buffer_bytes for n in range(1, 6)]
    assert sizes == sorted(sizes)
    cache.group(tuple(range(4, 6)))
    assert cache.hits == 1 and cache.misses == 5 and cache.hit_rate == pytest.approx(1 / 6)
