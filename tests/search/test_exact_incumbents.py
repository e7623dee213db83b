"""The default incumbents are computed only when a solve needs one: the answer, its counts and
its source are those of a solve given them up front, and a solve proven within its caps never
costs the segment DP's groups."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.exact import optimum
from search.exact.solver import ExactCaps, baseline_incumbents
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.workload.synthetic import parallel_branches
from tests.search.conftest import SMALL_NETS, draw_dag

SCHEMES = ("lbdf", "brr", "hybrid")
FIGURES = ("dram_bytes", "cycles", "mbu_bytes", "candidates", "costed", "states", "optimal",
           "cap_reason", "bound_bytes", "source", "search", "listed")


@st.composite
def small_dags(draw):
    """Convolutions, activations, residual adds and concats over 5-10 ops."""
    return draw_dag(draw, "random", (5, 10), ["conv", "conv", "unary", "add", "concat"])


def _same_as_given_up_front(graph, scheme, buffer, caps=None):
    hw = load_hw("edge-npu", {"buffer": buffer})
    kwargs = {} if caps is None else {"caps": caps}
    deferred = optimum(graph, CostCache(graph, hw, scheme), **kwargs)
    cache = CostCache(graph, hw, scheme)
    given_first = optimum(graph, cache, incumbents=baseline_incumbents(graph, cache), **kwargs)
    assert deferred.plan == given_first.plan
    assert {k: getattr(deferred, k) for k in FIGURES} == \
        {k: getattr(given_first, k) for k in FIGURES}
    return deferred


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=small_dags(), scheme=st.sampled_from(SCHEMES),
       buffer=st.sampled_from(["2KiB", "8KiB", "64KiB"]))
def test_deferred_incumbents_change_nothing_on_random_dags(graph, scheme, buffer):
    _same_as_given_up_front(graph, scheme, buffer)


@pytest.mark.parametrize("name", sorted(SMALL_NETS))
@pytest.mark.parametrize("scheme", SCHEMES)
def test_deferred_incumbents_change_nothing_when_a_cap_needs_them(name, scheme):
    graph = SMALL_NETS[name]()
    for caps in (ExactCaps(max_costed=len(graph) + 1), ExactCaps(max_sets=len(graph) + 2)):
        _same_as_given_up_front(graph, scheme, "64KiB", caps)


@pytest.mark.parametrize("caps", [ExactCaps(max_costed=10), ExactCaps(max_sets=11)])
def test_a_capped_solve_still_answers_with_a_better_incumbent(caps):
    """The squeeze-and-excitation block under BRR: the capped A* is above the segment plan,
    which is computed then and is the answer, as when it is given up front."""
    result = _same_as_given_up_front(SMALL_NETS["se"](), "brr", "64KiB", caps)
    assert result.source == "segment_dp"


def test_a_proof_within_the_caps_costs_no_segment_plan():
    graph = parallel_branches(stages=1, branches=2, depth=2, resolution=16)
    hw = load_hw("edge-npu", {"buffer": "64KiB"})
    alone = CostCache(graph, hw, "brr")
    result = optimum(graph, alone)
    assert result.optimal and result.source == "exact"
    first = CostCache(graph, hw, "brr")
    baseline_incumbents(graph, first)
    optimum(graph, first)
    assert alone.misses < first.misses
