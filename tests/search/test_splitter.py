"""The Splitter protocol, RandomSplitter and the repair: valid covering groups, memoisation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.encoding import EdgeEncoding
from search.problem import SearchProblem
from search.registry import REPAIRS
from search.repair import Repairer, SplitterError
from search.splitter import RandomSplitter, Splitter
from simulator.cost import CostCache, evaluate_plan
from simulator.errors import InputError
from simulator.hw import load_hw
from simulator.partition import components, is_acyclic
from simulator.workload.loader import load_zoo

KIB = 1024


def big_groups(graph, cache, limit=20):
    """Connected segments of the topological order that do not fit the buffer."""
    out = []
    for start in range(0, len(graph), 7):
        for comp in components(graph, range(start, min(len(graph), start + 40))):
            if len(comp) > 1 and not cache.group(comp).fits \
                    and not set(comp) & set(cache.unfusable):
                out.append(comp)
    return out[:limit]


@pytest.mark.parametrize("name,scheme", [("mobilenet_v2", "lbdf"), ("mobilenet_v2", "brr"),
                                         ("efficientnet_b0", "lbdf")])
def test_random_splitter_returns_valid_groups_covering_the_group(name, scheme, hw):
    graph = load_zoo(name)
    cache = CostCache(graph, hw(128 * KIB), scheme)
    groups = big_groups(graph, cache)
    assert groups
    for k, group in enumerate(groups):
        pieces = RandomSplitter().split(graph, group, cache, np.random.default_rng(k))
        assert sorted(o for p in pieces for o in p) == list(group)
        assert all(len(components(graph, p)) == 1 for p in pieces)
        assert all(cache.group(p).fits for p in pieces)
        assert len(pieces) > 1


def test_random_splitter_keeps_the_graph_of_groups_acyclic(hw):
    graph = load_zoo("squeezenet1_0")
    cache = CostCache(graph, hw(128 * KIB), "lbdf")
    for k, group in enumerate(big_groups(graph, cache)):
        rest = [(o,) for o in range(len(graph)) if o not in group]
        pieces = RandomSplitter().split(graph, group, cache, np.random.default_rng(k))
        assert is_acyclic(graph, rest + list(pieces))


def test_splitters_satisfy_the_protocol():
    assert isinstance(RandomSplitter(), Splitter)
    assert RandomSplitter().supports("lbdf") and RandomSplitter().supports("brr")
    assert REPAIRS.create("random") == RandomSplitter()
    assert RandomSplitter().report() is None
    with pytest.raises(InputError, match="unknown repair 'get'"):
        REPAIRS.create("get")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["resnet18", "mobilenet_v2", "squeezenet1_1"]),
       st.sampled_from(["lbdf", "brr"]), st.integers(0, 2**32 - 1), st.floats(0, 1))
def test_repair_always_gives_a_valid_plan(name, scheme, seed, p):
    graph = load_zoo(name)
    hw = load_hw("edge-npu", {"buffer": 128 * KIB})
    cache = CostCache(graph, hw, scheme)
    enc = EdgeEncoding.of(graph, cache.unfusable)
    rng = np.random.default_rng(seed)
    plan = Repairer(graph, cache, RandomSplitter(), seed).repair(
        enc.groups(rng.random(enc.n_vars) < p))
    assert evaluate_plan(graph, plan, hw, scheme, cache).valid


def test_split_memo_is_transparent_and_order_independent(hw):
    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, hw(128 * KIB), "lbdf")
    groups = big_groups(graph, cache)
    first = Repairer(graph, cache, RandomSplitter(), key=7)
    forward = [first.split(g) for g in groups]
    again = [first.split(g) for g in groups]
    second = Repairer(graph, cache, RandomSplitter(), key=7)
    backward = [second.split(g) for g in reversed(groups)][::-1]
    assert forward == again == backward
    assert first.hits == len(groups) and first.misses == len(groups)
    assert first.hit_rate == 0.5
    other = Repairer(graph, cache, RandomSplitter(), key=8)
    assert [other.split(g) for g in groups] != forward


@dataclass(frozen=True)
class HalvingSplitter:
    """A dummy splitter that breaks the contract: two halves, whether they fit or not."""

    name: str = "halves"

    def supports(self, scheme: str) -> bool:
        return scheme == "lbdf"

    def split(self, graph, ops, cache, rng):
        k = len(ops) // 2
        return [ops[:k], ops[k:]]


def test_a_splitter_that_breaks_its_contract_is_caught(hw):
    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, hw(128 * KIB), "lbdf")
    repairer = Repairer(graph, cache, HalvingSplitter(), key=0)
    with pytest.raises(SplitterError, match="halves"):
        for g in big_groups(graph, cache):
            repairer.split(g)


def test_a_splitter_that_does_not_support_the_scheme_is_refused(hw):
    graph = load_zoo("resnet18")
    with pytest.raises(InputError, match="does not support scheme 'brr'"):
        SearchProblem(graph, hw(128 * KIB), "brr", splitter=HalvingSplitter())


@dataclass(frozen=True)
class WholeOpsSplitter:
    """A deterministic splitter with the random splitter as its baseline: every op alone."""

    name: str = "ops"
    baseline: RandomSplitter = RandomSplitter()

    def supports(self, scheme: str) -> bool:
        return True

    def split(self, graph, ops, cache, rng):
        return [(o,) for o in ops]


def test_repair_new_takes_the_baseline_repair_only_when_the_own_one_is_known(hw):
    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, hw(128 * KIB), "lbdf")
    groups = [tuple(range(len(graph)))]  # the whole network as one group: does not fit
    own = Repairer(graph, cache, WholeOpsSplitter(), key=3)
    plain = own.repair(groups)
    assert own.repair_new(groups, lambda p: False) == plain and own.diversified == 0
    other = own.repair_new(groups, lambda p: p == plain)
    # the baseline's repair is the random splitter's, drawn from the same per-group generator
    assert other == Repairer(graph, cache, RandomSplitter(), key=3).repair(groups) != plain
    assert own.diversified == 1
    # when both are known the splitter's own repair is kept, uncounted
    assert own.repair_new(groups, lambda p: True) == plain and own.diversified == 1
    # a splitter without a baseline (the random one) never gets a second repair
    rand = Repairer(graph, cache, RandomSplitter(), key=3)
    first = rand.repair(groups)
    assert rand.repair_new(groups, lambda p: True) == first and rand.diversified == 0
