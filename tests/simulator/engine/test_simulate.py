"""The simulator against the analytic models: exact DRAM bytes, peak occupancy equal to F_beta,
cycles within the documented band; deadlock detection; determinism; trace format."""

from __future__ import annotations

import json
import random

import pytest

from simulator.cost import CostCache, evaluate_plan
from simulator.engine import SimulationError, simulate
from simulator.engine.trace import chrome_trace
from simulator.hw import HardwareConfig
from simulator.partition import topological_order
from simulator.plan import PartitionPlan, layer_by_layer, segment_plan
from simulator.workload.loader import load_zoo

# analytic cycles (the schedule-aware model, docs/cost-model.md section 5) agree with the
# simulated ones within 2 % (DESIGN.md; docs/simulator.md, "Agreement")
CYCLE_BAND = (0.98, 1.02)


def hw(buffer: int, bandwidth: float = 16.0, lbdf_buffer: str = "pixel") -> HardwareConfig:
    return HardwareConfig(
        name="test", buffer_bytes=buffer, dram_bandwidth=bandwidth, dram_latency=100,
        clock_hz=1e9, macs_per_cycle=1024, buffer_bandwidth=128.0,
        energy_dram_pj_per_byte=160.0, energy_buffer_pj_per_byte=2.5, energy_mac_pj=0.3,
        lbdf_buffer=lbdf_buffer,
    )


def fitting_segments(graph, cache: CostCache, rng: random.Random, longest: int = 10):
    """A valid plan: segments grown while every component fits (unfusable ops alone)."""
    unfusable = set(cache.unfusable)
    cuts, start = [], 0
    while start < len(graph):
        end, limit = start + 1, min(len(graph), start + rng.randint(1, longest))
        while end < limit:
            trial = segment_plan(graph, [start, end + 1])
            groups = [g.ops for g in trial if start <= g.ops[0] <= end]
            if any(len(g) > 1 and unfusable & set(g) for g in groups) or not all(
                    cache.group(g).fits or g[0] in unfusable for g in groups):
                break
            end += 1
        cuts.append(end)
        start = end
    return segment_plan(graph, cuts)


# LBDF at both line-buffer granularities (docs/cost-model.md 4.1): the simulator's peak equals
# the analytic F_beta of each
CASES = [(spec, "lbdf", granularity) for granularity in ("pixel", "row")
         for spec in ("resnet18@96", "mobilenet_v3_small@96", "squeezenet1_1@96")] + [
    ("resnet18@96", "brr", "pixel"), ("mobilenet_v2@96", "brr", "pixel")]


def _graph(spec: str):
    name, res = spec.split("@")
    return load_zoo(name, (1, 3, int(res), int(res)))


@pytest.mark.parametrize("spec, scheme, granularity", CASES)
@pytest.mark.parametrize("buffer", [64 * 1024, 512 * 1024])
def test_simulation_agrees_with_the_analytic_model(spec, scheme, granularity, buffer):
    graph = _graph(spec)
    config = hw(buffer, lbdf_buffer=granularity)
    cache = CostCache(graph, config, scheme)
    for seed in range(2):
        plan = fitting_segments(graph, cache, random.Random(seed))
        analytic = evaluate_plan(graph, plan, config, scheme, cache)
        assert analytic.valid
        assert any(len(g) > 1 for g in plan.groups)
        report = simulate(graph, plan, config, scheme, record=False)
        for g in report.groups:
            a = analytic.groups[g.index]
            assert g.dram_bytes == a.dram_bytes, g.index
            assert g.peak_buffer_bytes == a.buffer_bytes, g.index
            assert sum(g.dram_write.values()) == a.dram_write
        assert report.dram_bytes == analytic.dram_bytes
        ratio = analytic.cycles / report.cycles
        assert CYCLE_BAND[0] <= ratio <= CYCLE_BAND[1], ratio


@pytest.mark.parametrize("scheme", ["lbl", "lbdf", "brr"])
def test_layer_by_layer_plan_moves_exactly_the_lbl_traffic(scheme):
    graph = _graph("squeezenet1_1@96")
    config = hw(256 * 1024)
    report = simulate(graph, layer_by_layer(graph), config, scheme, record=False)
    analytic = evaluate_plan(graph, layer_by_layer(graph), config, scheme)
    assert report.dram_bytes == analytic.dram_bytes
    assert [g.peak_buffer_bytes for g in report.groups] == \
        [a.buffer_bytes for a in analytic.groups]


def test_a_group_that_cannot_fit_is_a_clear_error_not_a_silent_deadlock():
    graph = _graph("resnet18@96")
    plan = segment_plan(graph, [6])  # conv1 .. layer1.0.conv2 fused, the rest one by one
    config = hw(32 * 1024)
    assert not evaluate_plan(graph, plan, config, "lbdf").valid
    with pytest.raises(SimulationError, match=r"group 0 \(conv1, 6 ops\) cannot run: "
                                              r"allocating .* would exceed the buffer"):
        simulate(graph, plan, config, "lbdf")


def test_brr_refuses_an_incompatible_group():
    graph = _graph("mobilenet_v3_small@96")
    se = next(op.id for op in graph if op.kind.value == "global_pool")
    plan = segment_plan(graph, [se - 1, se + 6])  # the SE block with its feature map
    with pytest.raises(SimulationError, match="BRR-incompatible"):
        simulate(graph, plan, hw(8 * 1024 * 1024), "brr")


def test_simulation_is_deterministic_and_groups_run_in_dependency_order():
    graph = _graph("resnet18@96")
    plan = fitting_segments(graph, CostCache(graph, hw(512 * 1024), "lbdf"), random.Random(3))
    a = simulate(graph, plan, hw(512 * 1024), "lbdf")
    b = simulate(graph, plan, hw(512 * 1024), "lbdf")
    assert a == b
    order = topological_order(graph, plan)
    position = {k: n for n, k in enumerate(order)}
    group_of = plan.group_of
    assert all(position[group_of[i]] <= position[group_of[j]] for i, j in graph.edges())


def test_groups_run_in_topological_order_not_by_smallest_id():
    # groups {0, 2} and {1}: 1 -> 2, so {1} must run first although {0, 2} has the smaller id
    g = _graph("squeezenet1_1@96")  # a fire module's squeeze feeds two expand branches
    squeeze = next(op.id for op in g if len(g.successors(op.id)) == 2)
    _, right = g.successors(squeeze)
    plan = PartitionPlan.of([[squeeze, right]] + [[o.id] for o in g if o.id not in
                                                  (squeeze, right)])
    order = topological_order(g, plan)
    assert len(order) == len(plan.groups)
    assert all(order.index(plan.group_of[i]) <= order.index(plan.group_of[j])
               for i, j in g.edges())


def test_report_totals_and_trace_format():
    graph = _graph("squeezenet1_1@96")
    report = simulate(graph, layer_by_layer(graph), hw(256 * 1024), "lbdf")
    t = report.totals()
    assert t["cycles"] == report.cycles > 0 and 0 < t["pe_utilisation"] <= 1
    assert t["energy_pj"] == pytest.approx(
        t["energy_dram_pj"] + t["energy_buffer_pj"] + t["energy_mac_pj"])
    trace = json.loads(json.dumps(chrome_trace(report, [op.name for op in graph])))
    phases = {e["ph"] for e in trace["traceEvents"]}
    assert phases == {"M", "X", "C"}
    groups = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == 1]
    assert len(groups) == len(report.groups)
    assert all(e["ts"] >= 0 and e["dur"] > 0 for e in trace["traceEvents"] if e["ph"] == "X")
