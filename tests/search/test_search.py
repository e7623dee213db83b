"""Search algorithms through the driver: exact budget, validity, determinism, untouched global
random state, Pareto fronts and the no-fusion cases."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search import (
    AnyOf,
    LocalSearch,
    NSGA2Search,
    PlanBudget,
    RandomSearch,
    SearchProblem,
    Stagnation,
    make_algorithm,
    run_search,
)
from search.pareto import dominates, pareto_ranks
from search.problem import parse_objectives
from search.result import HISTORY_COLUMNS
from simulator.cost import CostCache, evaluate_plan
from simulator.errors import InputError
from simulator.hw import load_hw
from simulator.plan import layer_by_layer
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import OpKind
from simulator.workload.loader import load_zoo

KIB = 1024
ALGOS = ("rs", "ls", "nsga2")


def problem(name="resnet18", buffer=128 * KIB, scheme="lbdf", objectives=("dram",)):
    return SearchProblem(load_zoo(name), load_hw("edge-npu", {"buffer": buffer}), scheme,
                         objectives)


def run(p, algo, budget, seed=0, **kw):
    return run_search(p, make_algorithm(algo), budget, np.random.default_rng(seed), **kw)


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("budget", [1, 7, 23, 100])
def test_budget_is_exact(algo, budget):
    result = run(problem(), algo, budget)
    assert len(result.history) == budget == result.summary.budget_used
    assert list(result.history["evaluation"]) == list(range(1, budget + 1))
    assert result.summary.budget == budget


@pytest.mark.parametrize("algo", ALGOS)
def test_budget_is_exact_on_a_tiny_search_space(algo, nets, hw):
    # 2 variables: 4 cut vectors; NSGA-II's duplicate elimination runs dry (immigrants)
    p = SearchProblem(nets["broadcast"](), hw(64 * KIB), "lbdf")
    result = run_search(p, make_algorithm(algo), 57, np.random.default_rng(1))
    assert len(result.history) == 57 and result.history["valid"].all()


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("objectives", [("dram",), ("dram", "mbu")])
def test_same_seed_same_plan_and_history_bit_for_bit(algo, objectives):
    p = problem("mobilenet_v2", scheme="brr", objectives=objectives)
    a, b = run(p, algo, 120, seed=3), run(p, algo, 120, seed=3)
    assert a.plan == b.plan
    pd.testing.assert_frame_equal(a.history, b.history, check_exact=True)
    if a.pareto is not None:
        pd.testing.assert_frame_equal(a.pareto, b.pareto, check_exact=True)
        assert a.front == b.front
    c = run(p, algo, 120, seed=4)
    assert not c.history.equals(a.history)


@pytest.mark.parametrize("algo", ALGOS)
def test_global_random_state_is_untouched(algo):
    random.seed(123)
    np.random.seed(123)
    py_state, np_state = random.getstate(), np.random.get_state()
    run(problem("mobilenet_v2", objectives=("dram", "cycles")), algo, 60)
    assert random.getstate() == py_state
    after = np.random.get_state()
    assert after[0] == np_state[0] and (after[1] == np_state[1]).all()
    assert after[2:] == np_state[2:]


SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.sampled_from(["resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0"]),
       st.sampled_from(ALGOS), st.sampled_from(["lbdf", "brr"]),
       st.sampled_from([128 * KIB, 512 * KIB]), st.integers(0, 2**32 - 1))
def test_every_recorded_and_returned_plan_is_valid(name, algo, scheme, buffer, seed):
    p = problem(name, buffer, scheme, ("dram", "mbu"))
    recorded = []

    class Recording:
        def __init__(self, inner):
            self.inner, self.name = inner, inner.name

        def start(self, context):
            self.inner.start(context)

        def ask(self):
            plans = self.inner.ask()
            recorded.extend(plans)
            return plans

        def tell(self, plans, scores):
            self.inner.tell(plans, scores)

    result = run_search(p, Recording(make_algorithm(algo)), 25, np.random.default_rng(seed))
    assert result.history["valid"].all() and result.cost.valid
    cache = CostCache(p.graph, p.hw, scheme)
    for plan in [*recorded, result.plan, *result.front]:
        assert evaluate_plan(p.graph, plan, p.hw, scheme, cache).valid


def test_scores_agree_with_the_reference_cost_model():
    p = problem("squeezenet1_0", scheme="brr")
    result = run(p, "ls", 80)
    best = result.history.loc[result.history["dram_bytes"].idxmin()]
    assert best["dram_bytes"] == result.cost.dram_bytes
    assert best["dram_bytes_fuseable"] == result.cost.dram_bytes_fuseable
    assert best["mbu_bytes"] == result.cost.mbu and best["cycles"] == result.cost.cycles
    assert result.summary.best["dram_bytes"] == result.cost.dram_bytes
    h = result.history
    assert list(h.columns) == list(HISTORY_COLUMNS)
    assert (h["best_dram_bytes"] == h["dram_bytes"].cummin()).all()
    assert h["best_dram_bytes"].is_monotonic_decreasing


def test_search_beats_layer_by_layer_and_reports_caches():
    result = run(problem("mobilenet_v2"), "ls", 300)
    s = result.summary.to_dict()
    assert result.cost.dram_bytes < result.cost.lbl_dram
    assert s["status"] == "ok" and s["search"] == "ls" and s["repair"] == "random"
    for cache in ("group", "splitter", "plan"):
        rate = s["caches"][cache]
        assert 0 <= rate["hit_rate"] <= 1 and rate["hits"] + rate["misses"] > 0
    assert s["distinct_plans"] == s["caches"]["plan"]["misses"]
    assert s["search_space"]["variables"] > 0


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("second", ["mbu", "cycles"])
def test_pareto_front_is_non_dominated_and_from_the_history(algo, second):
    result = run(problem("resnet18", objectives=("dram", second)), algo, 150)
    front, h = result.pareto, result.history
    column = {"mbu": "fused_mbu_bytes", "cycles": "cycles"}[second]
    assert list(front.columns[:3]) == ["evaluation", "dram_bytes", column]
    points = list(zip(front["dram_bytes"], front[column], strict=True))
    assert pareto_ranks(points) == [0] * len(points)
    everything = list(zip(h["dram_bytes"], h[column], strict=True))
    assert not any(dominates(q, p) for p in points for q in everything)
    rows = h.set_index("evaluation").loc[front["evaluation"]]
    assert (rows["dram_bytes"].to_numpy() == front["dram_bytes"].to_numpy()).all()
    assert len(result.front) == len(front)
    assert front["dram_bytes"].min() == result.cost.dram_bytes


def test_a_network_without_fuseable_ops_gives_the_lbl_plan(hw):
    b = GraphBuilder("convs")  # two 3x3 convs whose 36,928 B of weights each exceed 16 KiB
    b.add_input("x", (1, 64, 8, 8))
    for name, src in (("c0", "x"), ("c1", "c0")):
        b.add_op(name, OpKind.CONV, "conv", [src], (1, 64, 8, 8), kernel=(3, 3),
                 padding=(1, 1, 1, 1), weight_elems=64 * 64 * 9 + 64, macs=64 * 64 * 64 * 9)
    p = SearchProblem(b.build(["c1"]), hw(16 * KIB), "lbdf")
    result = run_search(p, LocalSearch(), 100, np.random.default_rng(0))
    s = result.summary.to_dict()
    assert s["status"] == "nothing_to_fuse" and "every op of convs is unfusable" in s["message"]
    assert result.plan == layer_by_layer(p.graph) and len(result.history) == 0
    assert s["budget_used"] == 0 and result.cost.valid  # each conv runs tiled to the buffer


def test_a_network_with_an_op_that_cannot_run_even_tiled_is_refused(nets, hw):
    p = SearchProblem(nets["residual"](), hw(64), "lbdf")
    with pytest.raises(InputError, match=r"no plan of residual can run with a 64 B buffer: "
                                         r"'c1' cannot run layer by layer: its smallest tile "
                                         r"\(1 output row of 1 output channel and 1 input "
                                         r"channel\) needs 122 B > buffer 64 B"):
        run_search(p, LocalSearch(), 100, np.random.default_rng(0))


@pytest.mark.slow
def test_a_zoo_network_with_an_op_that_cannot_run_even_tiled_is_refused(hw):
    # every other op of resnet18 is costed layer by layer at 256 B first (a few CPU seconds)
    p = SearchProblem(load_zoo("resnet18"), hw(256), "lbdf")
    with pytest.raises(InputError, match=r"no plan of resnet18 can run with a 256 B buffer: "
                                         r"'conv1' cannot run layer by layer: its smallest "
                                         r"tile .* needs 2,066 B > buffer 256 B"):
        run_search(p, LocalSearch(), 100, np.random.default_rng(0))


def test_brr_with_every_pair_incompatible_gives_the_lbl_plan(nets, hw):
    graph = nets["broadcast"]()
    result = run_search(SearchProblem(graph, hw(64 * KIB), "brr"), NSGA2Search(), 50,
                        np.random.default_rng(0))
    s = result.summary.to_dict()
    assert s["status"] == "no_fusable_pair" and "1 pairs BRR-incompatible" in s["message"]
    assert "squeeze-and-excitation" in s["notes"][0]
    assert result.plan == layer_by_layer(graph)
    lbdf = run_search(SearchProblem(graph, hw(64 * KIB), "lbdf"), NSGA2Search(), 50,
                      np.random.default_rng(0))
    assert lbdf.summary.status == "ok" and len(lbdf.plan) == 1


def test_brr_on_squeeze_and_excitation_runs_and_notes_it():
    result = run(problem("efficientnet_b0", scheme="brr"), "rs", 20)
    assert result.summary.status == "ok" and result.cost.valid
    assert "squeeze-and-excitation" in result.summary.notes[0]
    assert run(problem("efficientnet_b0"), "rs", 5).summary.notes == ()
    assert run(problem("resnet18", scheme="brr"), "rs", 5).summary.notes == ()


def test_bad_problems_and_budgets_are_input_errors(hw):
    graph = load_zoo("resnet18")
    for budget in (0, -3, 2.5, True, "10"):
        with pytest.raises(InputError, match="budget must be a positive number"):
            run(problem(), "rs", budget)
    with pytest.raises(InputError, match="unknown scheme 'xyz'"):
        SearchProblem(graph, hw(KIB), "xyz")
    with pytest.raises(InputError, match="nothing to search"):
        SearchProblem(graph, hw(KIB), "lbl")
    with pytest.raises(InputError, match="unknown search algorithm 'sa'"):
        make_algorithm("sa")
    for bad in ("energy", "", "mbu,dram", "dram,dram"):
        with pytest.raises(InputError):
            parse_objectives(bad)
    assert parse_objectives(" DRAM , cycles") == ("dram", "cycles")


def test_terminations_compose():
    with pytest.raises(InputError):
        Stagnation(0)
    result = run_search(problem(), RandomSearch(),
                        AnyOf((PlanBudget(500), Stagnation(15))), np.random.default_rng(0))
    h = result.history
    assert len(h) < 500
    assert len(h) - result.summary.found_at >= 15


def test_local_search_keeps_the_k_best_distinct_plans():
    algo = LocalSearch(k=4)
    run_search(problem(), algo, 60, np.random.default_rng(0))
    population = algo.population
    assert len(population) == 4 and len(set(population)) == 4
