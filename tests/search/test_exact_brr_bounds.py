"""The BRR fit bounds of the exact solver never exceed what the BRR cost model computes.

docs/exact.md, "The BRR fit bound": row floors (`_most_rows_any`: rows some tile needs in any
group holding an op; `_least_rows`: rows every tile of one group needs), the live activation
floors some tile holds at an op's position (`_op_activations`), the per-op fit floors
(`fit_floors`, used by the enumeration for `CandidateSpace.lb_fit` and by the lazy search's
weight streaming floors) and the per-set bound (`dram_lower_bound`, used by the solver before
costing a set). Each lemma is checked against the cost model's own tile regions on random
convex groups of zoo networks, and each bound against the cost model's F_D at several buffers.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.exact import enumerate_space, optimum
from search.exact.candidates import bits, costed_candidates, fit_bound
from search.exact.solver import _shortest
from simulator.cost import CostCache
from simulator.cost.brr import (
    _Layout,
    _least_rows,
    _most_rows_any,
    _op_activations,
    _op_floors,
    accumulator_elems,
    chosen_tiling,
    dram_lower_bound,
    fit_arrays,
    fit_floors,
    group_cost,
    incompatibility,
    position_needs,
    tile_cost,
    tile_regions,
)
from simulator.cost.rows import row_deps
from simulator.cost.traffic import compulsory_bytes
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo
from simulator.workload.synthetic import hrnet_like
from tests.search.test_exact import _grown_convex

_ZOO = ("resnet50", "mobilenet_v2", "squeezenet1_0", "efficientnet_b0",
        "deeplabv3_mobilenet_v3_large", "vgg16")
_BUFFERS = ("64KiB", "256KiB", "1MiB", "2MiB")


def _group(model: str, at: int, steps: list[int]) -> tuple:
    graph = load_zoo(model)
    return graph, _grown_convex(graph, at % len(graph), steps)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(_ZOO), at=st.integers(0, 10_000),
       steps=st.lists(st.integers(0, 50), min_size=0, max_size=30), t=st.integers(1, 300))
def test_row_and_live_floors_hold_in_every_tile(model, at, steps, t):
    """At T tiles, every tile of the cost model's regions needs at least the group's floor
    rows of every tensor, some tile at least the any-group floor rows of each op (the largest
    band, not the least), and some tile holds at least the floor of live activations at each
    op's position."""
    graph, ops = _group(model, at, steps)
    if incompatibility(graph, ops):
        return
    layout = _Layout(graph, ops, row_deps(graph))
    tiles = min(t, int(layout.heights.max()))
    regions = tile_regions(graph, ops, tiles)
    least = _least_rows(graph, layout, np.array([tiles]))[:, 0]
    for k, ref in enumerate(layout.refs):
        assert (regions.rows(ref) >= least[k]).all(), (ref, tiles)
    most, act = _most_rows_any(graph)[:, tiles - 1], _op_activations(graph)[:, tiles - 1]
    live = regions.live_elems()
    for pos, o in enumerate(ops):
        assert regions.rows(o).max() >= most[o], (o, tiles)
        assert live[pos].max() >= act[o], (o, tiles)


def _floor_bound(graph, ops, hw) -> int:
    """`CandidateSpace.lb_fit` of a multi-op set, from the fit floors (docs/exact.md): the
    weights that cannot be resident next to the largest activation floor are re-read by
    every tile beyond the floor tile count."""
    floors = fit_floors(graph, hw)
    weights = sum(graph[o].weight_elems for o in ops)
    comp = compulsory_bytes(graph, ops, hw.dtype_bytes)
    excess = weights + max(floors.resident_elems[o] for o in ops) \
        - hw.buffer_bytes // hw.dtype_bytes
    tiles = max(floors.tiles[o] for o in ops)
    return comp + max(excess, 0) * (tiles - 1) * hw.dtype_bytes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(_ZOO), buffer=st.sampled_from(_BUFFERS),
       at=st.integers(0, 10_000), steps=st.lists(st.integers(0, 50), min_size=1, max_size=40))
def test_fit_bounds_never_exceed_f_d(model, buffer, at, steps):
    """On random convex groups: a group that fits has F_D >= both bounds and, streamed, at
    least the floor tile count; a group the set bound rules out does not fit."""
    graph, ops = _group(model, at, steps)
    hw = load_hw("edge-npu", {"buffer": buffer})
    cost = group_cost(graph, ops, hw)
    bound = dram_lower_bound(graph, ops, hw)
    floors = fit_floors(graph, hw)
    if bound is None or any(floors.tiles[o] == 0 for o in ops):
        assert not cost.fits
        return
    if not cost.fits:
        return
    assert bound <= cost.dram_bytes
    assert _floor_bound(graph, ops, hw) <= cost.dram_bytes
    assert cost.tiles >= max(floors.tiles[o] for o in ops)
    tiling = chosen_tiling(graph, ops, hw)
    assert (tiling.resident_elems + max(floors.resident_elems[o] for o in ops)) \
        * hw.dtype_bytes <= hw.buffer_bytes
    # each op's position holds, in some tile, at least its fit floor (activations and a
    # slice of its weights, whatever its residency and slices), and its activation floor
    # next to the resident weights; its own re-read weights are at least its floor
    needs = position_needs(graph, ops, tiling)
    assert int(needs.max()) == tiling.buffer_elems
    act, need = _op_floors(graph, accumulator_elems(hw.dtype_bytes))
    for pos, o in enumerate(ops):
        assert needs[pos].max() >= need[o, tiling.tiles - 1], (o, tiling.tiles)
        assert needs[pos].max() >= act[o, tiling.tiles - 1] + tiling.resident_elems
    rereads = tiling.weight_read_elems - sum(graph[o].weight_reads for o in ops)
    assert sum(floors.streamed_elems[o] for o in ops) <= rereads


_HRNET = hrnet_like(resolution=64, name="hrnet_like_64")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(("hrnet_like", "resnet50", "mobilenet_v2", "squeezenet1_0",
                              "efficientnet_b0", "vit_b_16")),
       buffer=st.sampled_from(("8KiB", "16KiB", "64KiB", "256KiB")),
       at=st.integers(0, 10_000), steps=st.lists(st.integers(0, 50), min_size=0, max_size=30),
       t=st.integers(1, 64))
def test_boundary_and_placed_floors_hold_in_every_group_that_fits(model, buffer, at, steps, t):
    """Lemmas 5 and 6 (`fit_arrays`): at the tile count the cost model picks and at a random
    one, a configuration of a random convex group that fits holds, at each op's position in
    some tile, at least the op's need floor, and its activation floor next to the resident
    weights; so the group's tile count is at least every op's floor tile count. hrnet_like
    (at 64 x 64) has the branches whose neighbours force rows onto an op's position; small
    buffers make the floors bind."""
    graph = _HRNET if model == "hrnet_like" else load_zoo(model)
    ops = _grown_convex(graph, at % len(graph), steps)
    if incompatibility(graph, ops):
        return
    hw = load_hw("edge-npu", {"buffer": buffer})
    limit = hw.buffer_bytes // hw.dtype_bytes
    act, need = fit_arrays(graph, hw)
    floors = fit_floors(graph, hw)
    tallest = max(row_deps(graph).height_of[o] for o in ops)
    chosen = chosen_tiling(graph, ops, hw)
    tilings = [tile_cost(graph, ops, min(t, tallest), hw)]
    if chosen is not None and chosen.buffer_elems <= limit:
        tilings.append(chosen)
        assert chosen.tiles >= max(floors.tiles[o] for o in ops)
    for tiling in tilings:
        if tiling.buffer_elems > limit:
            continue  # the floors hold for the groups that fit
        needs = position_needs(graph, ops, tiling)
        for pos, o in enumerate(ops):
            assert needs[pos].max() >= need[o, tiling.tiles - 1], (o, tiling.tiles)
            assert needs[pos].max() >= act[o, tiling.tiles - 1] + tiling.resident_elems


@pytest.mark.parametrize(("model", "buffer"), [("hrnet_like", "16KiB"), ("hrnet_like", "64KiB"),
                                               ("efficientnet_b0", "64KiB"),
                                               ("mobilenet_v2", "128KiB")])
def test_every_op_that_runs_alone_fits_its_floors(model, buffer):
    """An op that is not unfusable runs alone, so its floor tile count is at least 1 and at
    most the count its own group runs at (Lemmas 5 and 6 never rule out a group that runs);
    and the boundary and placed floors do raise some op's floor tile count on these
    instances, the depthwise convolutions read by squeeze-and-excitation blocks above all."""
    graph = _HRNET if model == "hrnet_like" else load_zoo(model)
    hw = load_hw("edge-npu", {"buffer": buffer})
    cache = CostCache(graph, hw, "brr")
    floors = fit_floors(graph, hw)
    for op in graph:
        if op.id in cache.unfusable:
            continue
        cost = cache.run((op.id,))
        assert cost.fits
        assert 1 <= floors.tiles[op.id] <= cost.tiles, (op.name, floors.tiles[op.id], cost.tiles)
    act, need = _op_floors(graph, accumulator_elems(hw.dtype_bytes))
    fits = need <= hw.buffer_bytes // hw.dtype_bytes
    before = np.where(fits.any(axis=1), fits.argmax(axis=1) + 1, 0)
    assert any(t > b > 0 for t, b in zip(floors.tiles, before, strict=True))


@pytest.mark.parametrize(("model", "buffer"), [("resnet18", "64KiB"), ("resnet18", "512KiB"),
                                               ("squeezenet1_1", "64KiB")])
def test_every_set_of_a_space_within_its_bounds(model, buffer):
    """Every candidate set of whole zoo instances: lb_fit and the set bound never exceed the
    F_D of a set that runs, and a set ruled out does not run."""
    graph = load_zoo(model)
    cache = CostCache(graph, load_hw("edge-npu", {"buffer": buffer}), "brr")
    space = enumerate_space(graph, cache)
    for k, mask in enumerate(space.masks):
        cost = cache.run(bits(mask))
        bound = fit_bound(cache, space, k)
        assert space.lb_dram[k] <= space.lb_fit[k]
        if bound is None:
            assert not cost.fits
        elif cost.fits:
            assert space.lb_fit[k] <= bound <= cost.dram_bytes


def test_bounds_are_not_vacuous():
    """On ResNet-50 at 1 MiB the floors raise lb_fit above the compulsory traffic, the set
    bound raises some sets further, and rules some out, among sets that look cheap by their
    compulsory traffic."""
    graph = load_zoo("resnet50")
    cache = CostCache(graph, load_hw("edge-npu", {"buffer": "1MiB"}), "brr")
    space = enumerate_space(graph, cache)
    raised = [k for k in range(len(space)) if space.lb_fit[k] > space.lb_dram[k]]
    assert len(raised) > len(space) // 2
    sample = [k for k in range(len(space)) if space.masks[k].bit_count() > 1][::25]
    bounds = [fit_bound(cache, space, k) for k in sample]
    assert any(b is not None and b > space.lb_fit[k] for k, b in zip(sample, bounds,
                                                                     strict=True))
    fits = [cache.run(bits(space.masks[k])).fits for k in sample]
    assert any(b is None for b in bounds) or not all(fits)


@pytest.mark.parametrize(("model", "buffer"), [("resnet18", "64KiB"), ("resnet18", "256KiB"),
                                               ("mobilenet_v3_small", "128KiB")])
def test_lazy_optimum_equals_eager_dp(model, buffer):
    """The A* with the fit bounds returns the optimum of the DP over every costed set."""
    graph = load_zoo(model)
    hw = load_hw("edge-npu", {"buffer": buffer})
    lazy = optimum(graph, CostCache(graph, hw, "brr"))
    cache = CostCache(graph, hw, "brr")
    path = _shortest(graph, costed_candidates(cache, enumerate_space(graph, cache)))
    assert lazy.optimal
    assert lazy.dram_bytes == sum(c.dram_bytes for c in path)
    assert lazy.cycles == sum(c.cycles for c in path)


def test_bounds_hold_where_brr_computes_part_of_a_layer():
    """ViT's class-token slice reads one token row of the encoder's output, so a BRR group
    holding it and the ops before it computes one row of them: the cycles bound of such sets
    leaves out those MACs (it claimed them, and the solver stopped on vit_b_16), while sets
    away from the slice keep the whole MACs of their ops."""
    graph = load_zoo("deit_s", (1, 3, 64, 64))  # 17 tokens
    deps = row_deps(graph)
    slice_op = next(o for o in range(len(graph)) if deps.drops_rows[o])
    assert not deps.computed_whole[slice_op - 1] and deps.computed_whole[len(graph) - 1]
    # a DRAM fast enough that the MACs bound the cycles
    hw = load_hw("edge-npu", {"buffer": "64KiB", "dram_bandwidth": 4096})
    cache = CostCache(graph, hw, "brr")
    space = enumerate_space(graph, cache, max_sets=10_000)
    near = [k for k, m in enumerate(space.masks) if m >> slice_op & 1 and m.bit_count() > 1]
    assert len(near) > 20
    for k in near + list(range(0, len(space), 97)):
        cost = cache.run(bits(space.masks[k]))
        assert space.lb_dram[k] <= cost.dram_bytes
        assert space.lb_cycles[k] <= cost.timing.cycles
    partial = [k for k in near if cache.run(bits(space.masks[k])).macs
               < sum(graph[o].macs for o in bits(space.masks[k]))]
    assert partial  # the case the bound must allow for does occur
