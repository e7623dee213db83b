"""Algorithm 1 (recursive greedy tree splitting) on a synthetic cost model, and as a repair."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explain.tree_split import AllEdgesExplainer, GetSplitter
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import OpKind
from simulator.workload.loader import load_zoo

MAP = (1, 4, 8, 8)


def chain(n: int = 6):
    b = GraphBuilder("chain")
    b.add_input("x", MAP)
    prev = "x"
    for k in range(n):
        b.add_op(f"op{k}", OpKind.CONV, "conv", [prev], MAP)
        prev = f"op{k}"
    return b.build([prev])


@dataclass(frozen=True)
class Cost:
    fits: bool
    dram_bytes: int


class FakeCache:
    """A group fits when it has at most `limit` ops; its DRAM is 100 plus a price for the op
    it starts with (so that where a cut falls changes the cost)."""

    def __init__(self, graph, limit: int, price: dict[int, int] | None = None) -> None:
        self.graph, self.hw, self.scheme, self.unfusable = graph, "fake", "lbdf", ()
        self.limit, self.price = limit, price or {}
        self.queries = 0

    def group(self, ops):
        self.queries += 1
        ops = tuple(ops)
        return Cost(len(ops) <= self.limit, 100 + self.price.get(ops[0], 0))

    def run(self, ops):
        return self.group(ops)  # no op is unfusable


@dataclass(frozen=True)
class Scripted:
    """Explains the whole group with `top`, any smaller group with all its edges."""

    top: tuple
    size: int
    name: str = "scripted"

    def supports(self, scheme):
        return True

    def explain(self, graph, ops, cache, rng):
        return list(self.top) if len(ops) == self.size else sorted(graph.internal_edges(ops))


def run(splitter, graph, cache):
    return splitter.split(graph, tuple(range(len(graph))), cache, np.random.default_rng(0))


def test_category_1_two_fitting_sides_with_least_dram_win():
    g = chain(6)
    # cutting after op 2 is the only cut leaving both sides within 3 ops
    splitter = GetSplitter(AllEdgesExplainer())
    assert run(splitter, g, FakeCache(g, 3)) == [(0, 1, 2), (3, 4, 5)]
    # with 4 ops allowed, cuts after op 1, 2 and 3 all qualify: the cheapest is chosen
    cheap_at_4 = FakeCache(g, 4, {2: 30, 3: 40, 4: 5})
    assert run(GetSplitter(AllEdgesExplainer()), g, cheap_at_4) == [(0, 1, 2, 3), (4, 5)]
    cheap_at_2 = FakeCache(g, 4, {2: 5, 3: 40, 4: 30})
    assert run(GetSplitter(AllEdgesExplainer()), g, cheap_at_2) == [(0, 1), (2, 3, 4, 5)]
    assert splitter.stats.rectified == 1 and splitter.stats.fallbacks == 0


def test_rectify_rate_measures_the_explanation_alone():
    g = chain(6)
    good = GetSplitter(Scripted(((2, 3),), 6))  # one cut after op 2: both halves fit
    bad = GetSplitter(Scripted(((0, 1),), 6))  # a cut after op 0 leaves 5 ops together
    for splitter in (good, bad):
        run(splitter, g, FakeCache(g, 3))
    assert good.stats.rectify_rate == 1.0 and bad.stats.rectify_rate == 0.0


def test_category_2_keeps_the_largest_fitting_side_and_splits_the_rest():
    g = chain(6)
    # explained edges (0, 1) -> [0] | [1..5] and (3, 4) -> [0..3] | [4, 5]: both one-sided;
    # the fitting side with more ops ([4, 5]) is kept, [0..3] is split again
    splitter = GetSplitter(Scripted(((0, 1), (3, 4)), 6))
    got = run(splitter, g, FakeCache(g, 3))
    assert (4, 5) in got and sorted(o for grp in got for o in grp) == list(range(6))
    assert all(len(grp) <= 3 for grp in got)
    assert splitter.stats.explanations >= 2  # the invalid side was explained again


def test_category_3_splits_both_sides_recursively():
    g = chain(6)
    splitter = GetSplitter(Scripted(((2, 3),), 6))
    got = run(splitter, g, FakeCache(g, 2))
    assert sorted(o for grp in got for o in grp) == list(range(6))
    assert all(len(grp) <= 2 for grp in got) and len(got) == 4
    # the explanation alone (one cut after op 2) leaves sides of 3 ops: not rectified by it,
    # although Algorithm 1 found a split by explaining the sides again
    assert splitter.stats.rectified == 0 and splitter.stats.fallbacks == 0


def test_unrectifiable_groups_fall_back_to_random_splitting_and_are_counted():
    g = chain(4)
    splitter = GetSplitter(Scripted((), 4))  # an explainer that explains nothing
    got = run(splitter, g, FakeCache(g, 2))
    assert sorted(o for grp in got for o in grp) == list(range(4))
    assert splitter.stats.fallbacks == 1 and splitter.stats.rectify_rate == 0.0


def test_memoised_by_group():
    g = chain(6)
    splitter = GetSplitter(AllEdgesExplainer(), keep_baseline=False)
    cache = FakeCache(g, 3)
    first = run(splitter, g, cache)
    queries = cache.queries
    assert run(splitter, g, cache) == first and cache.queries == queries + 1  # the fit check


def test_as_a_repair_on_a_real_network_every_piece_fits_and_covers_the_group():
    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, load_hw("edge-npu", {"buffer": "128KiB"}), "lbdf")
    unfusable = set(cache.unfusable)
    group = tuple(o for o in range(20, 45) if o not in unfusable)
    from simulator.partition import components
    group = max(components(graph, group), key=len)
    assert not cache.group(group).fits
    splitter = GetSplitter(AllEdgesExplainer(), max_edges=None)
    pieces = splitter.split(graph, group, cache, np.random.default_rng(0))
    assert sorted(o for p in pieces for o in p) == list(group)
    assert all(cache.group(p).fits for p in pieces)
    assert all(graph.is_weakly_connected(p) for p in pieces)
    assert splitter.stats.rectify_rate == 1.0


def _dram(cache, pieces) -> int:
    return sum(cache.group(p).dram_bytes for p in pieces)


def test_baseline_guard_keeps_the_random_split_when_it_costs_less():
    from search.splitter import RandomSplitter

    g = chain(6)
    price = {1: 1000, 3: 1000}  # Algorithm 1 cuts 0 | 1..5, then {1, 2, 3} | {4, 5}: 1,300
    kept = 0
    for seed in range(12):
        guarded = GetSplitter(Scripted(((0, 1),), 6))
        alone = GetSplitter(Scripted(((0, 1),), 6), keep_baseline=False)
        cache = FakeCache(g, 3, price)
        got = run_seeded(guarded, g, cache, seed)
        pure = run_seeded(alone, g, cache, seed)
        base = RandomSplitter().split(g, tuple(range(6)), cache, np.random.default_rng(seed))
        assert pure == [(0,), (1, 2, 3), (4, 5)] and alone.stats.baseline_kept == 0
        assert _dram(cache, got) == min(_dram(cache, pure), _dram(cache, base))
        assert guarded.stats.baseline_kept == (_dram(cache, base) < _dram(cache, pure))
        assert got == (sorted(base) if guarded.stats.baseline_kept else pure)
        kept += guarded.stats.baseline_kept
    assert 0 < kept < 12  # both outcomes occur over the seeds


def run_seeded(splitter, graph, cache, seed):
    return splitter.split(graph, tuple(range(len(graph))), cache, np.random.default_rng(seed))


def test_baseline_guard_never_costs_more_than_the_random_repair_on_a_real_network():
    from search.splitter import RandomSplitter
    from simulator.partition import components

    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, load_hw("edge-npu", {"buffer": "128KiB"}), "lbdf")
    unfusable = set(cache.unfusable)
    fuseable = [o for o in range(len(graph)) if o not in unfusable]
    guarded = GetSplitter(AllEdgesExplainer(), max_edges=2)
    alone = GetSplitter(AllEdgesExplainer(), max_edges=2, keep_baseline=False)
    checked = 0
    for start in range(0, 90, 6):
        for group in components(graph, [o for o in fuseable if start <= o < start + 30]):
            if cache.group(group).fits:
                continue
            got = guarded.split(graph, group, cache, np.random.default_rng(start))
            base = RandomSplitter().split(graph, group, cache, np.random.default_rng(start))
            pure = alone.split(graph, group, cache, np.random.default_rng(start))
            assert _dram(cache, got) == min(_dram(cache, base), _dram(cache, pure))
            assert all(cache.group(p).fits for p in got)
            checked += 1
    assert checked >= 5 and alone.stats.baseline_kept == 0
