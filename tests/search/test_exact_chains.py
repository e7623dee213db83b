"""search/exact/chains.py: the chains' bound of the lazy search (docs/exact.md, "Chain
intervals"): its cover, that it binds where weights add up along a branch, that the lazy
search's heuristic stays consistent with it and the optimum unchanged."""

from __future__ import annotations

import pytest

from search.exact import optimum
from search.exact.chains import chain_cover
from search.exact.lazy import _Search
from search.exact.solver import _Budget, baseline_incumbents
from simulator.cost import CostCache
from simulator.workload.synthetic import hrnet_like
from tests.search.test_exact_lazy import _branches, _check_consistent, _lazy


def test_the_cover_puts_every_fusable_op_on_one_path_of_edges(hw):
    graph = hrnet_like(resolution=64, name="hrnet_like_64")
    cache = CostCache(graph, hw(64 * 1024), "brr")
    fusable = [o not in cache.unfusable for o in range(len(graph))]
    weights = [op.weight_reads for op in graph]
    chains = chain_cover(graph, fusable, weights)
    ops = [o for chain in chains for o in chain]
    assert sorted(ops) == [o for o in range(len(graph)) if fusable[o]]
    for chain in chains:
        for p, r in zip(chain, chain[1:], strict=False):
            assert r in graph.successors(p)
    # the strided head convs, the heaviest ops, sit between their producer and reader
    for name in ("downsamp_modules.1", "downsamp_modules.2"):
        o = next(op.id for op in graph if op.name == name)
        chain = next(c for c in chains if o in c)
        at = chain.index(o)
        assert 0 < at < len(chain) - 1


@pytest.mark.parametrize(("scheme", "buffer"), [("lbdf", 6_000), ("lbdf", 9_000),
                                                ("brr", 3_000), ("brr", 4_000)])
def test_the_chains_bound_binds_and_keeps_the_heuristic_consistent(scheme, buffer, hw):
    """Two branches of four 3x3 convs (2,320 weights each): under LBDF two fit a group, not
    four, so every branch is cut; under BRR a branch held whole re-reads weights at every
    extra tile. The chains' bound is above the closed-form one at the empty state, the
    heuristic stays consistent over every down-set and group that runs, and the lazy search
    proves the eager search's optimum."""
    graph = _branches(2, 4)
    cache = CostCache(graph, hw(buffer), scheme)
    inc = baseline_incumbents(graph, cache)
    search = _Search(graph, cache, None, None, _Budget(None, None), inc[0].dram_bytes)
    assert search.h.chains is not None
    assert search.h(0)[0] > search.h.streamed(0)
    _check_consistent(graph, cache)
    eager = optimum(graph, CostCache(graph, hw(buffer), scheme), search="eager", incumbents=())
    lazy = _lazy(graph, CostCache(graph, hw(buffer), scheme), incumbents=())
    assert eager.optimal and lazy.optimal
    assert (lazy.dram_bytes, lazy.cycles) == (eager.dram_bytes, eager.cycles)
    assert search.h(0)[0] <= eager.dram_bytes


def test_a_mixed_scheme_keeps_the_closed_form_bound(hw):
    """The hybrid's members hold or stream weights group by group, so no interval floor holds
    for all of them: its lazy search keeps the closed-form heuristic alone."""
    graph = _branches(2, 3)
    cache = CostCache(graph, hw(6_000), "hybrid")
    search = _Search(graph, cache, None, None, _Budget(None, None), None)
    assert search.h.chains is None
