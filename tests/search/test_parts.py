"""Budgets, Pareto helpers and one-edit mutations on their own."""

from __future__ import annotations

import numpy as np
import pytest

from search.budget import AnyOf, PlanBudget, SearchState, Stagnation, as_termination
from search.encoding import EdgeEncoding
from search.mutation import MUTATIONS, mutate
from search.pareto import ParetoArchive, dominates, pareto_ranks
from search.repair import Repairer
from search.splitter import RandomSplitter
from simulator.cost import CostCache
from simulator.errors import InputError
from simulator.partition import components, violations
from simulator.plan import layer_by_layer
from simulator.workload.loader import load_zoo


def test_plan_budget_counts_down_exactly():
    b = PlanBudget(10)
    assert b.remaining(SearchState(3, 0)) == 7 and not b.done(SearchState(9, 0))
    assert b.done(SearchState(10, 0)) and b.remaining(SearchState(12, 0)) == 0
    assert as_termination(5) == PlanBudget(5) and as_termination(b) is b
    with pytest.raises(InputError, match="positive number of plans, got 0"):
        PlanBudget(0)


def test_any_of_takes_the_tightest_cap():
    t = AnyOf((PlanBudget(100), Stagnation(10)))
    assert t.remaining(SearchState(40, 35)) == 60
    assert not t.done(SearchState(40, 35)) and t.done(SearchState(45, 35))
    assert AnyOf((Stagnation(3),)).remaining(SearchState(0, 0)) is None


def test_pareto_ranks_and_archive():
    points = [(1, 5), (2, 2), (5, 1), (3, 3), (6, 6), (2, 2)]
    assert pareto_ranks(points) == [0, 0, 0, 1, 2, 0]
    assert dominates((1, 1), (1, 2)) and not dominates((1, 2), (1, 2))
    archive = ParetoArchive()
    for k, p in enumerate(points):
        archive.add(p, k + 1, f"plan{k}")
    assert [e.values for e in archive.entries] == [(1, 5), (2, 2), (5, 1)]
    assert [e.evaluation for e in archive.entries] == [1, 2, 3]  # the earliest (2, 2) stays
    assert not archive.add((7, 7), 9, "x") and archive.add((0, 9), 10, "y")
    assert len(archive) == 4


@pytest.fixture
def mobilenet(hw):
    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, hw(128 * 1024), "lbdf")
    return graph, cache, Repairer(graph, cache, RandomSplitter(), key=1)


def test_each_mutation_gives_connected_groups_covering_every_op(mobilenet):
    graph, cache, repairer = mobilenet
    fuseable = set(range(len(graph))) - set(cache.unfusable)
    enc = EdgeEncoding.of(graph, cache.unfusable)
    rng = np.random.default_rng(0)
    for _ in range(30):
        plan = repairer.repair(enc.groups(rng.random(enc.n_vars) < rng.random()))
        for op in MUTATIONS:
            groups = op(graph, plan, fuseable, rng)
            assert groups is not None
            assert sorted(o for g in groups for o in g) == list(range(len(graph)))
            assert all(len(components(graph, g)) == 1 for g in groups)
            for o in cache.unfusable:
                assert (o,) in groups


def test_mutate_returns_a_new_valid_plan(mobilenet):
    graph, cache, repairer = mobilenet
    fuseable = set(range(len(graph))) - set(cache.unfusable)
    enc = EdgeEncoding.of(graph, cache.unfusable)
    rng = np.random.default_rng(2)
    plan = repairer.repair(enc.groups(rng.random(enc.n_vars) < 0.3))
    for _ in range(30):
        child = mutate(repairer, plan, fuseable, rng)
        assert child != plan
        assert violations(graph, child) == []
        assert all(repairer.runs(g.ops) for g in child.groups)
        plan = child


def test_nothing_to_edit_returns_none(nets, hw):
    graph = nets["residual"]()
    lbl = layer_by_layer(graph)
    rng = np.random.default_rng(0)
    split = MUTATIONS[2]
    assert split(graph, lbl, set(range(len(graph))), rng) is None
    assert MUTATIONS[0](graph, lbl, set(), rng) is None
    assert MUTATIONS[1](graph, lbl, set(), rng) is None
