"""The fuseable scope of a plan (docs/cost-model.md, section 7): the ops of its groups other
than unfusable singletons run alone. Its compulsory traffic bounds the plan's fuseable DRAM for
every valid plan a user can give, including groups that hold an unfusable op (F_beta is not
monotone: a producer can make a group fit where its op alone does not)."""

from __future__ import annotations

from functools import cache

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.cost import CostCache, evaluate_plan, lbdf
from simulator.cost.evaluate import fuseable_scope
from simulator.cost.traffic import compulsory_bytes
from simulator.hw import HardwareConfig
from simulator.partition import components, violations
from simulator.plan import PartitionPlan, segment_plan
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.loader import load_zoo

NETWORKS = ("inverted_residual", "mobilenet_v2", "efficientnet_b0", "squeezenet1_1")
BUFFERS = (12 * 1024, 16 * 1024)  # where groups holding an unfusable op fit (BRR, at 96 x 96)


def hw(buffer: int, lbdf_buffer: str = "pixel") -> HardwareConfig:
    return HardwareConfig(
        name="test", buffer_bytes=buffer, dram_bandwidth=16.0, dram_latency=100,
        clock_hz=1e9, macs_per_cycle=1024, buffer_bandwidth=128.0,
        energy_dram_pj_per_byte=160.0, energy_buffer_pj_per_byte=2.5, energy_mac_pj=0.3,
        lbdf_buffer=lbdf_buffer,
    )


def inverted_residual() -> ComputeGraph:
    """x (1x4x8x32) -> 1x1 expand to 16 channels -> 3x3 depthwise -> 1x1 project to 4."""
    b = GraphBuilder("ir")
    b.add_input("x", (1, 4, 8, 32))
    b.add_op("expand", OpKind.CONV, "conv", ["x"], (1, 16, 8, 32), weight_elems=16 * 5,
             macs=256 * 64)
    b.add_op("dw", OpKind.DWCONV, "conv", ["expand"], (1, 16, 8, 32), kernel=(3, 3),
             padding=(1, 1, 1, 1), groups=16, weight_elems=160, macs=256 * 16 * 9)
    b.add_op("project", OpKind.CONV, "conv", ["dw"], (1, 4, 8, 32), weight_elems=4 * 17,
             macs=256 * 64)
    return b.build(["project"])


def test_a_group_holding_an_unfusable_op_keeps_the_fuseable_lower_bound():
    # with whole-row line buffers the depthwise alone holds 4 + 1 rows of its 16-channel
    # input (one in flight) and 1 of its output (being written): in the triple that input is
    # produced on chip from a 4-channel one and the output consumed at once
    graph = inverted_residual()
    triple = lbdf.group_cost(graph, (0, 1, 2), hw(1 << 20, "row")).buffer_bytes
    alone = lbdf.group_cost(graph, (1,), hw(1 << 20, "row")).buffer_bytes
    assert triple < alone
    config = hw(triple, "row")
    cache = CostCache(graph, config, "lbdf")
    assert cache.unfusable == (1,)
    plan = PartitionPlan.of([[0, 1, 2]])
    cost = evaluate_plan(graph, plan, config, "lbdf", cache)
    # x (1,024 B) in, project (1,024 B) out, 80 + 160 + 68 weights: 2,356 B, all of it fused
    assert cost.valid and cost.dram_bytes_fuseable == cost.dram_bytes == 2356
    assert cost.lower_bound_fuseable == cost.lower_bound == 2356
    # the scope of plans that keep the depthwise alone: {expand, project}, which would have
    # to write expand's 4,096 B and read dw's 4,096 B back
    assert cache.references["lower_bound_fuseable"] == 1024 + 4096 + 4096 + 1024 + 148
    assert cost.lbl_dram_fuseable == cost.lbl_dram
    split = evaluate_plan(graph, PartitionPlan.of([[0], [1], [2]]), config, "lbdf", cache)
    assert split.lower_bound_fuseable == cache.references["lower_bound_fuseable"]
    assert split.dram_bytes_fuseable >= split.lower_bound_fuseable


@cache
def _graph(name: str) -> ComputeGraph:
    return inverted_residual() if name == "inverted_residual" else load_zoo(name, (1, 3, 96, 96))


@cache
def _cache(name: str, buffer: int, scheme: str) -> CostCache:
    if name == "inverted_residual":  # the triple fits, the depthwise alone does not (LBDF)
        buffer = lbdf.group_cost(_graph(name), (0, 1, 2), hw(1 << 20, "row")).buffer_bytes
        return CostCache(_graph(name), hw(buffer, "row"), scheme)
    return CostCache(_graph(name), hw(buffer), scheme)


def _regroup(graph: ComputeGraph, groups: list[tuple[int, ...]], new: tuple[int, ...],
             ) -> list[tuple[int, ...]]:
    """`groups` with `new` taken out of them (the rest of each split into its weakly connected
    pieces) and added as a group."""
    taken = set(new)
    out = [new]
    for g in groups:
        rest = [o for o in g if o not in taken]
        if rest:
            out.extend(tuple(sorted(c)) for c in components(graph, rest))
    return out


def _runs(cache: CostCache, groups: list[tuple[int, ...]]) -> bool:
    return all(cache.run(g).fits for g in groups)


@st.composite
def plans(draw):
    """A valid plan: segments, then groups grown around random ops (unfusable ones first)
    from up to three single-producer predecessors and a successor, kept when the plan stays
    valid; groups that do not run are split into single ops."""
    name = draw(st.sampled_from(NETWORKS))
    buffer, scheme = draw(st.sampled_from(BUFFERS)), draw(st.sampled_from(("lbdf", "brr")))
    graph, cache = _graph(name), _cache(name, buffer, scheme)
    cuts = draw(st.sets(st.integers(1, len(graph) - 1), max_size=len(graph) // 2))
    groups = [g.ops for g in segment_plan(graph, cuts)]
    groups = [(o,) for g in groups for o in g] if not _runs(cache, groups) else groups
    groups = [g for g0 in groups for g in ([g0] if cache.run(g0).fits else
                                           [(o,) for o in g0])]
    seeds = draw(st.lists(st.sampled_from(cache.unfusable), max_size=6)) \
        if cache.unfusable else []
    seeds += draw(st.lists(st.integers(0, len(graph) - 1), max_size=2))
    for u in seeds:
        chain = [u]
        for _ in range(draw(st.integers(0, 3))):
            preds = graph.predecessors(chain[0])
            if len(preds) != 1:
                break
            chain.insert(0, preds[0])
        if draw(st.booleans()) and len(graph.successors(u)) == 1:
            chain.append(graph.successors(u)[0])
        trial = _regroup(graph, groups, tuple(sorted(set(chain))))
        if not violations(graph, PartitionPlan.of(trial)) and _runs(cache, trial):
            groups = trial
    return graph, PartitionPlan.of(groups), cache


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_lower_bounds_hold_for_every_valid_plan(case):
    graph, plan, cache = case
    cost = evaluate_plan(graph, plan, cache.hw, cache.scheme, cache)
    assert cost.valid, cost.violations
    assert cost.dram_bytes >= cost.lower_bound
    assert cost.dram_bytes_fuseable >= cost.lower_bound_fuseable
    scope = fuseable_scope(cost.groups)
    assert cost.lower_bound_fuseable == (compulsory_bytes(graph, scope, 1) if scope else 0)
    lbl_costs = {o: cache.run((o,)).dram_bytes if o in cache.unfusable else None
                 for o in range(len(graph))}
    alone = {g.ops[0] for g in cost.groups if g.runs_alone}
    assert cost.lbl_dram_fuseable == cost.lbl_dram - sum(lbl_costs[o] for o in alone)
    assert set(scope) | alone == set(range(len(graph))) and not set(scope) & alone
