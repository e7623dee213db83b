"""The exact solver as a search (`--search exact`, `--search auto`): the driver stops when the
algorithm is done, auto takes the exact path where the solve finishes and seeded local search
where a cap cuts it, and no heuristic ever beats the optimum on small zoo instances."""

from __future__ import annotations

import numpy as np
import pytest

from search import LocalSearch, SearchProblem, make_algorithm, run_search
from search.algorithms.auto import AutoSearch
from search.exact import optimum
from search.exact.solver import ExactCaps
from search.registry import SEARCHES
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo

KIB = 1024
INSTANCES = [("squeezenet1_1", 128, "lbdf"), ("resnet18", 256, "brr")]


def problem(name: str, buffer_kib: int, scheme: str, objectives=("dram",)) -> SearchProblem:
    hw = load_hw("edge-npu", {"buffer": buffer_kib * KIB})
    return SearchProblem(load_zoo(name), hw, scheme, objectives)


def test_exact_and_auto_are_registered_and_take_a_time_limit():
    assert {"exact", "auto"} <= set(SEARCHES.names())
    assert SEARCHES.create("exact", time_limit=3.0).time_limit == 3.0
    assert SEARCHES.create("auto", time_limit=4.0).time_limit == 4.0
    assert not hasattr(SEARCHES.create("ls", time_limit=4.0), "time_limit")


@pytest.mark.parametrize("name", ["exact", "auto"])
def test_the_driver_stops_when_the_algorithm_is_done(name):
    p = problem("resnet18", 128, "lbdf")
    algo = make_algorithm(name)
    result = run_search(p, algo, 500, np.random.default_rng(0))
    best = optimum(p.graph, CostCache(p.graph, p.hw, p.scheme))
    assert algo.done and best.optimal
    assert result.summary.budget == 500 and result.summary.budget_used == 1 == len(result.history)
    assert result.cost.dram_bytes == best.dram_bytes and result.plan == best.plan


def test_auto_reports_the_exact_path():
    result = run_search(problem("resnet18", 128, "lbdf"), AutoSearch(), 50,
                        np.random.default_rng(0))
    report = result.summary.search_report
    assert report["auto_path"] == "exact" and "proved the optimum" in report["reason"]
    assert result.summary.to_dict()["search_report"] == report


def test_auto_under_a_cap_runs_local_search_from_the_capped_plan():
    p = problem("mobilenet_v2", 128, "brr")
    algo = AutoSearch(caps=ExactCaps(max_costed=150))  # the optimum needs 326 sets costed
    result = run_search(p, algo, 30, np.random.default_rng(0))
    capped = algo.result
    assert not capped.optimal and "costing cap (150 sets)" in capped.cap_reason
    assert capped.reproducible
    report = result.summary.search_report
    assert report["auto_path"] == "ls" and capped.cap_reason in report["reason"]
    assert result.summary.budget_used == 30  # not done: the budget is spent
    assert result.history["dram_bytes"].iloc[0] == capped.dram_bytes  # the seed comes first
    assert result.cost.dram_bytes <= capped.dram_bytes


def test_auto_with_two_objectives_searches_the_front_from_the_optimum():
    algo = AutoSearch()
    result = run_search(problem("resnet18", 128, "lbdf", ("dram", "mbu")), algo, 20,
                        np.random.default_rng(0))
    assert algo.result.optimal and result.summary.search_report["auto_path"] == "ls"
    assert result.cost.dram_bytes == algo.result.dram_bytes and result.pareto is not None


def test_seeded_local_search_starts_with_its_seeds_then_random_plans():
    p = problem("resnet18", 128, "lbdf")
    seed_plan = optimum(p.graph, CostCache(p.graph, p.hw, p.scheme)).plan
    seeded = run_search(p, LocalSearch(seeds=(seed_plan,)), 10, np.random.default_rng(3))
    plain = run_search(p, LocalSearch(), 10, np.random.default_rng(3))
    assert seeded.history["dram_bytes"].iloc[0] == seeded.cost.dram_bytes
    assert plain.history["dram_bytes"].iloc[0] != seeded.history["dram_bytes"].iloc[0]
    again = run_search(p, LocalSearch(seeds=()), 10, np.random.default_rng(3))
    assert again.history.equals(plain.history)  # no seeds: the unseeded run, bit for bit


@pytest.mark.parametrize("name,buffer_kib,scheme", INSTANCES)
def test_no_heuristic_ever_beats_the_optimum(name, buffer_kib, scheme):
    p = problem(name, buffer_kib, scheme)
    cache = CostCache(p.graph, p.hw, p.scheme)
    best = optimum(p.graph, cache)
    assert best.optimal
    for algo in ("rs", "ls", "nsga2"):
        for seed in range(3):
            result = run_search(p, make_algorithm(algo), 40, np.random.default_rng(seed),
                                cache=cache)
            assert result.cost.dram_bytes >= best.dram_bytes, (algo, seed)
            assert (result.history["dram_bytes"] >= best.dram_bytes).all(), (algo, seed)
