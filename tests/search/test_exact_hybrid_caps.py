"""A hybrid's member optima (its incumbents, `search.exact.mixed`) are solved under the
caller's caps and time limit, not the default caps."""

from __future__ import annotations

import pytest

from search.exact import optimum
from search.exact import solver as solver_module
from search.exact.solver import DEFAULT_CAPS, ExactCaps, baseline_incumbents
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.scheme import Scheme
from tests.search.conftest import SMALL_NETS

SMALL = ExactCaps(max_costed=3)


@pytest.fixture
def member_solves(monkeypatch):
    """Every solve `search.exact.mixed` runs: (scheme, caps, time limit, result, cache)."""
    calls = []

    def spy(graph, cache, **kwargs):
        result = real(graph, cache, **kwargs)
        calls.append((cache.scheme, kwargs.get("caps"), kwargs.get("time_limit"), result, cache))
        return result

    real = solver_module.optimum
    monkeypatch.setattr(solver_module, "optimum", spy)
    return calls


def _graph_and_hw():
    """A buffer too small for the whole network in one group (which `optimum` would prove
    at once, solving no member)."""
    return SMALL_NETS["se"](), load_hw("edge-npu", {"buffer": 3_000})


def test_the_members_are_solved_under_the_callers_caps(member_solves):
    graph, hw = _graph_and_hw()
    # under the default caps each member costs more sets than the small cap allows
    uncapped = {s: optimum(graph, CostCache(graph, hw, s)) for s in Scheme.HYBRID.fused}
    assert all(r.costed > SMALL.max_costed for r in uncapped.values())

    result = optimum(graph, CostCache(graph, hw, "hybrid"), caps=SMALL)
    assert sorted(c[0] for c in member_solves) == sorted(Scheme.HYBRID.fused)
    for scheme, caps, time_limit, member, _ in member_solves:
        assert caps == SMALL and time_limit is None
        # capped: it stops at the cap (every singleton is costed first), short of its proof
        assert member.caps == SMALL and "costing cap (3 sets)" in member.cap_reason
        assert member.costed < uncapped[scheme].costed
        # the member's answer is an incumbent: the hybrid's is never above it
        assert result.dram_bytes <= member.dram_bytes
    assert result.caps == SMALL and result.costed <= len(graph)


def test_default_caps_solve_the_members_under_the_default_caps(member_solves):
    graph, hw = _graph_and_hw()
    result = optimum(graph, CostCache(graph, hw, "hybrid"), caps=ExactCaps(max_costed=1))
    assert {c[1] for c in member_solves} == {ExactCaps(max_costed=1)}
    member_solves.clear()
    # a solve proven within the default caps never needs its incumbents (solver._Deferred)
    cache = CostCache(graph, hw, "hybrid")
    incumbents = baseline_incumbents(graph, cache)
    assert {c[1] for c in member_solves} == {DEFAULT_CAPS}
    assert all(c[3].optimal for c in member_solves)
    result = optimum(graph, cache, incumbents=incumbents)
    assert result.optimal
    assert result.dram_bytes <= min(c[3].dram_bytes for c in member_solves)


def test_the_members_share_the_callers_time_limit(member_solves):
    graph, hw = _graph_and_hw()
    result = optimum(graph, CostCache(graph, hw, "hybrid"), caps=SMALL, time_limit=60.0)
    assert len(member_solves) == len(Scheme.HYBRID.fused)
    for _, caps, time_limit, member, _ in member_solves:
        assert caps == SMALL and time_limit is not None and 0 < time_limit < 60.0
        assert member.reproducible
    assert result.reproducible and result.dram_bytes <= min(c[3].dram_bytes
                                                            for c in member_solves)
