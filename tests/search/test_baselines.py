"""Reference baselines: the segment DP is optimal among segment plans, the greedy is valid."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from search.baselines import (
    MAPPING_RULES,
    combine_mappings,
    greedy_fusion,
    reference_baselines,
    segment_dp,
)
from simulator.cost import CostCache, Failure, evaluate_plan
from simulator.plan import segment_plan
from simulator.workload.graph import MappingType
from simulator.workload.loader import load_zoo

BUFFERS = (1024, 1536, 2048, 3072, 4096, 8192)
KIB = 1024


def brute_force(graph, hw, scheme, cache):
    """Least DRAM over all 2^(n-1) segment plans whose groups all run."""
    best = None
    for mask in itertools.product((False, True), repeat=len(graph) - 1):
        cuts = [k + 1 for k, cut in enumerate(mask) if cut]
        cost = evaluate_plan(graph, segment_plan(graph, cuts), hw, scheme, cache)
        if cost.valid and (best is None or cost.dram_bytes < best):
            best = cost.dram_bytes
    return best


@pytest.mark.parametrize("buffer", BUFFERS)
@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_segment_dp_is_optimal_against_brute_force(small_net, buffer, scheme, hw):
    config = hw(buffer)
    cache = CostCache(small_net, config, scheme)
    dp = segment_dp(small_net, cache)
    cost = evaluate_plan(small_net, dp.plan, config, scheme, cache)
    assert cost.valid and cost.dram_bytes == dp.dram_bytes
    assert dp.dram_bytes == brute_force(small_net, config, scheme, cache)
    assert dp.plan == segment_plan(small_net, dp.cuts)


def test_segment_dp_cap_is_reported(nets, hw):
    graph = nets["residual"]()
    cache = CostCache(graph, hw(64 * KIB), "lbdf")
    capped = segment_dp(graph, cache, max_len=3)
    assert capped.capped and capped.longest_segment == 3
    free = segment_dp(graph, cache, max_len=None)
    assert not free.capped and free.longest_segment == len(graph)
    assert free.dram_bytes <= capped.dram_bytes
    assert len(free.plan) == 1


class _DippingCache:
    """A real cost cache whose F_beta is not monotone on one chain: the group `bad` does not
    fit (over the buffer), every other group (its extensions included) is costed as usual."""

    def __init__(self, cache: CostCache, bad: tuple[int, ...]) -> None:
        self.cache, self.bad = cache, bad

    @property
    def unfusable(self) -> tuple[int, ...]:
        return self.cache.unfusable

    def run(self, ops):
        cost = self.cache.run(ops)
        if tuple(sorted(ops)) == self.bad:
            return dataclasses.replace(cost, fits=False, failure=Failure.OVER_BUFFER,
                                       reason="over the buffer (test)")
        return cost


def test_segment_dp_grows_past_a_segment_that_does_not_fit(nets, hw):
    """F_beta is not monotone: a segment over the buffer may fit once it grows. The DP keeps
    growing past it (it used to stop there and miss the whole-network group)."""
    graph = nets["residual"]()
    cache = CostCache(graph, hw(64 * KIB), "lbdf")
    whole = segment_dp(graph, cache, max_len=None)
    assert len(whole.plan) == 1  # everything fits as one group at this buffer
    dip = segment_dp(graph, _DippingCache(cache, (0, 1, 2)), max_len=None)
    assert dip.dram_bytes == whole.dram_bytes and len(dip.plan) == 1


def test_segment_dp_stops_where_no_longer_segment_can_run(nets, hw):
    """A persistent failure (an unfusable op with another op) ends the growth: with a buffer
    no op fits alone, every op runs alone and no segment of two ops is costed."""
    graph = nets["residual"]()  # whole-row line buffers: a pixel line buffer fits its
    cache = CostCache(graph, hw(256).with_overrides(lbdf_buffer="row"), "lbdf")  # adds alone
    assert len(cache.unfusable) == len(graph)
    dp = segment_dp(graph, cache, max_len=None)
    assert len(dp.plan) == len(graph) and cache.misses == 0


@pytest.mark.parametrize("name,buffer", [("resnet18", 128), ("mobilenet_v2", 128),
                                         ("squeezenet1_0", 128), ("efficientnet_b0", 256)])
def test_segment_dp_is_not_capped_at_the_papers_buffers(name, buffer, hw):
    graph = load_zoo(name)
    dp = segment_dp(graph, CostCache(graph, hw(buffer * KIB), "lbdf"))
    assert not dp.capped and dp.longest_segment < 64


def test_mapping_rules_cover_every_pair_and_many_to_many_never_fuses_twice():
    assert len(MAPPING_RULES) == len(MappingType) ** 2
    m2m, o2o = MappingType.MANY_TO_MANY, MappingType.ONE_TO_ONE
    assert combine_mappings(m2m, m2m)[0] == "red"
    assert combine_mappings(o2o, m2m) == ("green", m2m)
    for (first, second), (verdict, fused) in MAPPING_RULES.items():
        if m2m in (first, second):
            assert verdict == "red" or fused is m2m


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "squeezenet1_0",
                                  "efficientnet_b0"])
@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_greedy_plans_are_valid_and_follow_the_mapping_rules(name, scheme, hw):
    graph = load_zoo(name)
    config = hw(128 * KIB)
    cache = CostCache(graph, config, scheme)
    for rules in (True, False):
        plan = greedy_fusion(graph, cache, rules)
        cost = evaluate_plan(graph, plan, config, scheme, cache)
        assert cost.valid, cost.violations
        assert cost.dram_bytes <= cost.lbl_dram
    many = [sum(graph[o].mapping is MappingType.MANY_TO_MANY for o in g.ops)
            for g in greedy_fusion(graph, cache).groups]
    assert max(many) == 1


def test_greedy_is_deterministic(hw):
    graph = load_zoo("mobilenet_v2")
    a = greedy_fusion(graph, CostCache(graph, hw(128 * KIB), "lbdf"))
    b = greedy_fusion(graph, CostCache(graph, hw(128 * KIB), "lbdf"))
    assert a == b


def test_reference_baselines_bracket_each_other(small_net, hw):
    refs = reference_baselines(small_net, hw(4096), "lbdf")
    assert set(refs) == {"lbl", "lower_bound", "segment_dp", "greedy", "greedy_fit"}
    low = refs["lower_bound"].dram_bytes
    assert refs["lower_bound"].plan is None
    for name in ("segment_dp", "greedy", "greedy_fit"):
        assert low <= refs[name].dram_bytes <= refs["lbl"].dram_bytes
    assert refs["segment_dp"].to_dict()["capped"] is False
    assert set(refs["lbl"].to_dict()) >= {"dram_bytes", "dram_bytes_fuseable", "mbu_bytes"}


def test_segment_dp_says_so_when_an_op_cannot_run_at_all(hw):
    """At 64 B some ops of the fire module cannot run even alone (their smallest tile is over
    the buffer): no segment plan reaches them, and the DP says so instead of adding None
    (vit_b_16 at 64 KiB, whose positional-embedding add needs 151 KB, failed with a TypeError)."""
    from tests.search.conftest import SMALL_NETS

    graph = SMALL_NETS["fire"]()
    cache = CostCache(graph, hw(64), "lbdf")
    assert not all(cache.run((o,)).fits for o in range(len(graph)))
    with pytest.raises(ValueError, match="no segment plan of 'fire' runs"):
        segment_dp(graph, cache)
