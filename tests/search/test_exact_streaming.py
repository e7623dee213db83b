"""The lazy search's BRR weight streaming floors, the any-group row floors over every reader,
and the set cap counting distinct sets once (docs/exact.md, "Heuristic" and "Caps" of the lazy
search; zoo-independent but for the row floor check on transformers).

* phi(o) (`streaming_floors`): every BRR group that runs pays at least its compulsory traffic
  plus the sum of its ops' phi, so the heuristic with phi added stays consistent and the lazy
  search still returns the brute-force optimum;
* M_T(o) (`simulator.cost.brr._most_rows_any`), the rows some tile needs, takes the largest
  need of o's readers (a tensor that does not leave its group has every reader in it) and the
  largest band where o's tensor leaves;
* a set the eager enumeration found and the lazy search grows again counts once against
  ``max_sets``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.exact import enumerate_space, optimum
from search.exact.candidates import _Growth, costed_candidates
from search.exact.lazy import _Search, streaming_floors
from search.exact.solver import ExactCaps, _Budget
from simulator.cost import CostCache
from simulator.cost.brr import _most_rows_any, incompatibility, tile_regions
from simulator.cost.rows import row_deps
from simulator.hw import load_hw
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load_zoo
from tests.search.conftest import Net, draw_dag
from tests.search.test_exact import _grown_convex
from tests.search.test_exact_lazy import _branches, _check_brute, _check_consistent

_BUFFERS = (1_500, 3_000, 6_000)


@st.composite
def wide_dags(draw) -> ComputeGraph:
    """Convolutions of 8 to 32 channels (up to 9,216 weights, more than the buffers above,
    so weights are streamed and phi is often positive), activations, residual adds and
    concats over 4-7 ops."""
    return draw_dag(draw, "wide", (4, 7), ["conv", "conv", "conv", "unary", "add", "concat"],
                    channels=[8, 16, 32])


def _phi(graph: ComputeGraph, cache: CostCache) -> list[int]:
    return streaming_floors(_Growth(graph, cache, None, None))


def _check_floors_and_consistency(graph: ComputeGraph, cache: CostCache) -> int:
    """Every set that runs pays its compulsory traffic plus its ops' phi; the heuristic is
    consistent over every down-set and every connected group that runs from it. Returns the
    sum of phi (for the non-vacuity checks)."""
    phi = _phi(graph, cache)
    space = enumerate_space(graph, cache)
    unfusable = set(cache.unfusable)
    for c in costed_candidates(cache, space):
        if unfusable.intersection(c.ops):
            continue
        k = space.masks.index(c.mask)
        assert c.dram_bytes >= space.lb_dram[k] + sum(phi[o] for o in c.ops), c.ops
    _check_consistent(graph, cache)
    return sum(phi)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=wide_dags(), buffer=st.sampled_from(_BUFFERS))
def test_streaming_floors_never_exceed_a_costed_group_and_keep_h_consistent(graph, buffer):
    """On random DAGs under BRR: no set that runs costs less than its compulsory traffic
    plus its ops' phi; h (phi included) is consistent over every arc that runs; and the lazy
    search, which orders its states by that h, returns the brute-force optimum."""
    hw = load_hw("edge-npu", {"buffer": buffer})
    _check_floors_and_consistency(graph, CostCache(graph, hw, "brr"))
    _check_brute(graph, CostCache(graph, hw, "brr"))


def _chain() -> ComputeGraph:
    """Three 32-channel 3x3 convs (9,216 weights each) with a residual add."""
    net = Net("chain32", (1, 32, 8, 8))
    net.conv("c1", "x", 32)
    net.conv("c2", "c1", 32)
    net.add("a", "c2", "c1")
    net.conv("c3", "a", 32)
    return net.build("c3")


@pytest.mark.parametrize("buffer", [2_500, 3_000])
def test_streaming_floors_are_not_vacuous(buffer, hw):
    """Where the convs' weights exceed the buffer and their maps force two tiles, phi is
    positive, lifts h above the compulsory part, holds over every set and keeps the
    brute-force optimum."""
    graph = _chain()
    cache = CostCache(graph, hw(buffer), "brr")
    assert _check_floors_and_consistency(graph, cache) > 0
    search = _Search(graph, cache, None, None, _Budget(None, None), None)
    assert search.h(0)[0] > search.h.compulsory(0)
    _check_brute(graph, CostCache(graph, hw(buffer), "brr"))


def test_streaming_floors_are_zero_without_weight_streaming(hw):
    """LBDF keeps every weight on chip: no floor."""
    graph = _chain()
    assert not any(_phi(graph, CostCache(graph, hw(6_000), "lbdf")))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(("bert_base", "deit_s")), at=st.integers(0, 10_000),
       steps=st.lists(st.integers(0, 50), min_size=0, max_size=25), t=st.integers(1, 200))
def test_any_group_row_floors_over_every_reader_hold_in_transformers(model, at, steps, t):
    """M_T(o), the rows some tile needs (the largest need over o's readers, the largest band
    where o's tensor leaves), never exceeds the rows the most demanding tile of the cost
    model's own regions needs, on random convex groups of transformers (many readers per
    tensor: Q, K, V, the residual; the class-token slice of one row, after which every tile
    but one needs nothing)."""
    graph = load_zoo(model)
    ops = _grown_convex(graph, at % len(graph), steps)
    if incompatibility(graph, ops):
        return
    tiles = min(t, max(row_deps(graph).height_of[o] for o in ops))
    regions = tile_regions(graph, ops, tiles)
    most = _most_rows_any(graph)[:, tiles - 1]
    for o in ops:
        assert regions.rows(o).max() >= most[o], (o, tiles)


def test_the_set_cap_counts_a_set_both_searches_hold_once(hw):
    """Two stages of four branches under BRR with a cap of 6,000 sets: the eager enumeration
    meets its 3,000, the lazy search grows 4,522 sets, most of them found already; counted
    once (the cap counts distinct sets), the lazy search proves the optimum within the cap,
    where counting them twice (3,000 + 4,522) would stop it."""
    graph = _branches(4, 3, 2)
    res = optimum(graph, CostCache(graph, hw(6_000), "brr"), caps=ExactCaps(max_sets=6_000))
    alone = optimum(graph, CostCache(graph, hw(6_000), "brr"), caps=ExactCaps(), search="lazy")
    assert res.search == "lazy" and res.optimal and res.cap_reason == ""
    assert alone.optimal and res.dram_bytes == alone.dram_bytes
    assert res.candidates + 6_000 // 2 > 6_000


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=wide_dags(), buffer=st.sampled_from(_BUFFERS), scheme=st.sampled_from(
    ("lbdf", "brr")), extra=st.integers(0, 12), states=st.sampled_from((None, 3, 8)))
def test_a_capped_lazy_search_bounds_the_optimum_from_below(graph, buffer, scheme, extra,
                                                            states):
    """A work cap stops the lazy search: the lower bound it reports (its frontier's least
    key; under BRR a set's key counts its ops' phi) never exceeds the brute-force optimum, and
    the answer is claimed optimal only when that bound reaches it."""
    from search.exact import optimum
    from search.exact.solver import ExactCaps
    from tests.search.test_exact import _brute

    hw = load_hw("edge-npu", {"buffer": buffer})
    cache = CostCache(graph, hw, scheme)
    res = optimum(graph, cache, caps=ExactCaps(max_sets=len(graph) + extra, max_states=states),
                  search="lazy", incumbents=())
    best = min(c.dram_bytes for _, c in _brute(graph, CostCache(graph, hw, scheme)))
    assert res.dram_bytes >= best
    if res.cap_reason:
        assert res.bound_bytes is not None and res.bound_bytes <= best
        assert res.optimal == (res.bound_bytes >= res.dram_bytes)
    if res.optimal:
        assert res.dram_bytes == best
