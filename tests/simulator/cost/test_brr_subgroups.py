"""BRR weight sub-groups, mixed residency, input-channel slices and shared inputs: the worked
examples (d)-(g) of docs/cost-model.md, section 9.5, every number derived there by hand; the
simulator running each exactly; the residency search against brute force."""

from __future__ import annotations

import itertools
import random

import pytest

from simulator.cost import CostCache, brr, lbdf
from simulator.cost.brr import (
    _blocks,
    _Layout,
    _residency,
    chosen_tiling,
    position_needs,
    slice_bounds,
    slice_elems,
    tile_cost,
    tile_regions,
)
from simulator.cost.rows import row_deps
from simulator.engine import simulate
from simulator.hw import load_hw
from simulator.plan import PartitionPlan
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.loader import load_zoo
from tests.search.test_exact import _grown_convex
from tests.simulator.cost.test_worked_examples import ALL_A, CHAIN, SHAPE, hw


def _conv3x3(b: GraphBuilder, name: str, src: str) -> None:
    b.add_op(name, OpKind.CONV, "conv", [src], SHAPE, kernel=(3, 3), padding=(1, 1, 1, 1),
             weight_elems=4 * 4 * 9 + 4, macs=256 * 4 * 9)


def pointwise_graph() -> ComputeGraph:
    """(d): x (1x32x2x2) -> pw, a 1x1 conv 32 -> 32 with bias (1,056 weights)."""
    b = GraphBuilder("pointwise")
    b.add_input("x", (1, 32, 2, 2))
    b.add_op("pw", OpKind.CONV, "conv", ["x"], (1, 32, 2, 2), weight_elems=32 * 32 + 32,
             macs=128 * 32)
    return b.build(["pw"])


def classifier_graph() -> ComputeGraph:
    """(f): x (1x256) -> fc, a linear layer 256 -> 4 with bias (1,028 weights)."""
    b = GraphBuilder("classifier")
    b.add_input("x", (1, 256))
    b.add_op("fc", OpKind.LINEAR, "linear", ["x"], (1, 4), weight_elems=256 * 4 + 4,
             macs=256 * 4)
    return b.build(["fc"])


def branches_graph() -> ComputeGraph:
    """(g): x -> a, x -> b (3x3 convs 4 -> 4), add(a, b)."""
    b = GraphBuilder("branches")
    b.add_input("x", SHAPE)
    _conv3x3(b, "a", "x")
    _conv3x3(b, "b", "x")
    b.add_op("add", OpKind.ELTWISE_BINARY, "add", ["a", "b"], SHAPE)
    return b.build(["add"])


POINTWISE, CLASSIFIER, BRANCHES = pointwise_graph(), classifier_graph(), branches_graph()


def _plans(tiling) -> list[tuple]:
    return [(w.op, w.resident, w.split, w.slices, w.chunk, w.slice_elems) for w in tiling.weights]


def _simulates_exactly(graph: ComputeGraph, ops: tuple[int, ...], config) -> None:
    """The simulator moves the analytic F_D byte for byte and peaks at F_beta."""
    cost = brr.group_cost(graph, ops, config)
    report = simulate(graph, PartitionPlan.of([ops]), config, "brr", record=False)
    (group,) = report.groups
    assert (group.dram_bytes, group.peak_buffer_bytes) == (cost.dram_bytes, cost.buffer_bytes)
    assert sum(group.dram_write.values()) == cost.dram_write
    assert (group.tiles, group.weights_streamed) == (cost.tiles, cost.weights_streamed)


# --- (d) an op whose weights exceed the buffer ------------------------------------------------


def test_d_weights_over_the_buffer_run_in_output_channel_slices():
    # 9.5 (d): 384 B held (x 128 + pw 128 + allowances 128); 256 B left hold 7 of the 33-B
    # channels: 5 slices of 7 channels (the last 4)
    assert not lbdf.group_cost(POINTWISE, (0,), hw()).fits  # weights alone exceed 640 B
    c = brr.group_cost(POINTWISE, (0,), hw())
    assert (c.fits, c.tiles, c.weights_streamed) == (True, 1, True)
    assert (c.buffer_bytes, c.weight_buffer_bytes, c.dram_bytes, c.macs) == (
        615, 231, 1312, 4096)
    t = chosen_tiling(POINTWISE, (0,), hw())
    assert _plans(t) == [(0, False, "out", 5, 7, 231)]
    assert t.allowance_elems == 128
    bounds = slice_bounds(32, 5)
    assert bounds == [(0, 7), (7, 14), (14, 21), (21, 28), (28, 32)]
    assert [slice_elems(1056, 32, a, z) for a, z in bounds] == [231, 231, 231, 231, 132]
    assert CostCache(POINTWISE, hw(), "brr").unfusable == ()
    record = c.to_dict(POINTWISE)
    assert (record["weight_slices"], record["resident_weight_bytes"]) == ([["pw", "out", 5]], 0)
    _simulates_exactly(POINTWISE, (0,), hw())


# --- (e) mixed residency ----------------------------------------------------------------------


@pytest.mark.parametrize(("tiles", "resident", "need"), [
    (2, (0,), 564), (2, (1,), 601), (2, (0, 1), 712), (4, (0,), 532), (4, (0, 1), 680),
    (8, (0, 1), 616)])
def test_e_residencies_at_600(tiles, resident, need):
    # 9.5 (e): what each residency needs, the other conv in one-channel slices
    t = tile_cost(CHAIN, ALL_A, tiles, hw(need - 1), resident=resident)
    assert (t.buffer_elems, t.resident_elems) == (need, 148 * len(resident))


def test_e_mixed_residency():
    # 9.5 (e): T = 2, conv0 resident, conv1 in 2 slices of 2 channels: 148 + 352 + 74 = 574 B;
    # F_D = 384 + 256 + 148 + 2 x 148 = 1,084 B (1,636 B at T = 4, 2,676 B at T = 8)
    c = brr.group_cost(CHAIN, ALL_A, hw(600))
    assert (c.fits, c.tiles, c.weights_streamed) == (True, 2, True)
    assert (c.buffer_bytes, c.weight_buffer_bytes, c.macs) == (574, 222, 20736)
    assert (c.dram_act_read, c.dram_weight_read, c.dram_write, c.dram_bytes) == (
        384, 444, 256, 1084)
    t = chosen_tiling(CHAIN, ALL_A, hw(600))
    assert _plans(t) == [(0, True, "out", 1, 4, 148), (1, False, "out", 2, 2, 74)]
    assert position_needs(CHAIN, ALL_A, t).max(axis=1).tolist() == [564, 574]
    assert (c.resident_weight_bytes, c.weight_slices) == (148, ((1, "out", 2),))
    for tiles, dram in ((4, 1636), (8, 2676)):
        other = tile_cost(CHAIN, ALL_A, tiles, hw(600))
        assert other.resident_elems == 148
        assert other.act_read_elems + other.weight_read_elems + 256 == dram
    _simulates_exactly(CHAIN, ALL_A, hw(600))


def subset_sum_graph() -> ComputeGraph:
    """x (1x8x2x2) -> a, b, c (1x1 convs 8 -> 8, 72 weights each) -> d (1x1 conv 8 -> 20,
    180 weights): three small weights fit where the large one and a small one do not."""
    bld = GraphBuilder("subset_sum")
    bld.add_input("x", (1, 8, 2, 2))
    src = "x"
    for name in "abc":
        bld.add_op(name, OpKind.CONV, "conv", [src], (1, 8, 2, 2), weight_elems=72,
                   macs=32 * 8)
        src = name
    bld.add_op("d", OpKind.CONV, "conv", [src], (1, 20, 2, 2), weight_elems=180, macs=80 * 8)
    return bld.build(["d"])


def test_residency_is_not_the_greedy_choice():
    # T = 2, one row per tile: a, b, c hold 16 + 16 + 56 (x's row in flight, d's row being
    # written) = 88 B; d holds 16 + 40 + 56 = 112 B; one output channel is 9 B. At 340 B the
    # largest-first greedy keeps d (180 + max(112, 97) = 292 B) and then no small one
    # (252 + 112 = 364 B); the optimum keeps a, b, c: 216 + max(88, 112 + 9) = 337 B
    graph = subset_sum_graph()
    ops = (0, 1, 2, 3)
    t = tile_cost(graph, ops, 2, hw(340))
    assert [w.resident for w in t.weights] == [True, True, True, False]
    assert (t.buffer_elems, t.weight_read_elems) == (337, 216 + 2 * 180)
    assert tile_cost(graph, ops, 2, hw(340), resident=(3,)).weight_read_elems == 180 + 2 * 216
    assert tile_cost(graph, ops, 2, hw(1), resident=(3, 0)).buffer_elems == 364


def _fits(b, resident: tuple[bool, ...], limit: int) -> bool:
    """docs/cost-model.md 4.2 "Residency": resident weights + the most any position holds
    (a resident op's activations, a streamed op's with its finest slice) fit."""
    total = sum(e for e, r in zip(b.layout.w_elems, resident, strict=True) if r)
    top = max([b.floor, *(h if r else f for h, f, r in zip(b.held_w, b.finest, resident,
                                                           strict=True))])
    return total + top <= limit


def test_residency_matches_brute_force_on_zoo_groups():
    # the branch and bound against every subset, on random groups of two zoo networks
    rng = random.Random(5)
    checked = 0
    for name in ("squeezenet1_1", "resnet18"):
        graph = load_zoo(name)
        for _ in range(25):
            ops = _grown_convex(graph, rng.randrange(len(graph)),
                                [rng.randrange(50) for _ in range(rng.randrange(1, 12))])
            if brr.incompatibility(graph, ops):
                continue
            layout = _Layout(graph, tuple(ops), row_deps(graph), 4)
            k = len(layout.weighted)
            if not 1 <= k <= 8:
                continue
            for buffer in (64 << 10, 256 << 10):
                for tiles, b in _blocks(layout, (2, 4)).items():
                    if b.least > buffer or tiles > int(layout.heights.max()):
                        continue
                    best = max(sum(e for e, r in zip(layout.w_elems, subset, strict=True)
                                   if r)
                               for subset in itertools.product((False, True), repeat=k)
                               if _fits(b, subset, buffer))
                    chosen = _residency(b, buffer)
                    assert _fits(b, tuple(chosen), buffer)
                    kept = sum(e for e, r in zip(layout.w_elems, chosen, strict=True) if r)
                    assert kept == best, (name, ops, buffer, tiles)
                    checked += 1
    assert checked > 40


# --- (f) input-channel slices -----------------------------------------------------------------


def test_f_classifier_runs_in_input_channel_slices():
    # 9.5 (f): partial sums 16 B + 86 input channels (86 B) + their weights 348 B = 450 B,
    # 3 slices; output-channel slices would need 4 (260 + 257 = 517 B)
    assert not lbdf.group_cost(CLASSIFIER, (0,), hw()).fits
    c = brr.group_cost(CLASSIFIER, (0,), hw())
    assert (c.fits, c.tiles, c.weights_streamed) == (True, 1, True)
    assert (c.buffer_bytes, c.weight_buffer_bytes, c.dram_bytes, c.macs) == (
        450, 348, 1288, 1024)
    t = chosen_tiling(CLASSIFIER, (0,), hw())
    assert _plans(t) == [(0, False, "in", 3, 86, 348)]
    assert (t.allowance_elems, t.accumulator) == (0, 4)
    assert [slice_elems(1028, 256, a, z) for a, z in slice_bounds(256, 3)] == [348, 344, 336]
    # the finest slices (a buffer too small for any): one input channel, 16 + 1 + 5 = 22 B,
    # below one output channel's 260 + 257 = 517 B
    finest = tile_cost(CLASSIFIER, (0,), 1, hw(1))
    assert _plans(finest) == [(0, False, "in", 256, 1, 5)]
    assert finest.buffer_elems == 22
    _simulates_exactly(CLASSIFIER, (0,), hw())


# --- (g) shared input, F_D not monotone in T --------------------------------------------------


def test_g_shared_input_is_read_once_per_tile():
    # 9.5 (g): x's region is the hull of what a and b need, read once per tile
    ops = (0, 1, 2)
    assert tile_regions(BRANCHES, ops, 2).rows(-1).tolist() == [5, 5]
    assert tile_regions(BRANCHES, ops, 4).rows(-1).tolist() == [3, 4, 4, 3]
    for tiles, act in ((1, 256), (2, 320), (4, 448), (8, 704)):
        assert tile_cost(BRANCHES, ops, tiles, hw()).act_read_elems == act


def test_g_more_tiles_can_cost_less():
    # 9.5 (g): T = 2 keeps b resident (628 B, F_D 1,020 B); T = 4 keeps both (616 B, 1,000 B)
    ops = (0, 1, 2)
    two = tile_cost(BRANCHES, ops, 2, hw())
    assert [w.resident for w in two.weights] == [False, True]
    assert (two.buffer_elems, two.act_read_elems + two.weight_read_elems + 256) == (628, 1020)
    assert tile_cost(BRANCHES, ops, 2, hw(1), resident=(0,)).buffer_elems == 665
    assert tile_cost(BRANCHES, ops, 2, hw(1), resident=(0, 1)).buffer_elems == 776
    c = brr.group_cost(BRANCHES, ops, hw())
    assert (c.fits, c.tiles, c.weights_streamed) == (True, 4, False)
    assert (c.buffer_bytes, c.weight_buffer_bytes, c.macs) == (616, 296, 18432)
    assert (c.dram_act_read, c.dram_weight_read, c.dram_write, c.dram_bytes) == (
        448, 296, 256, 1000)
    t = chosen_tiling(BRANCHES, ops, hw())
    assert position_needs(BRANCHES, ops, t).max(axis=1).tolist() == [552, 616, 552]
    _simulates_exactly(BRANCHES, ops, hw())


# --- consequences -----------------------------------------------------------------------------


def test_large_weight_convs_and_the_classifier_become_fuseable():
    # ResNet-18 at 128 KiB: 13 of 49 ops did not fit alone when BRR streamed whole ops'
    # weights (layer4's 2.4 MB convs, the 513 kB classifier); with sub-groups every op does
    graph = load_zoo("resnet18")
    config = load_hw("edge-npu", {"buffer": "128KiB"})
    assert CostCache(graph, config, "brr").unfusable == ()
    fc = next(op.id for op in graph if op.kind is OpKind.LINEAR)
    t = chosen_tiling(graph, (fc,), config)
    assert t.tiles == 1 and t.weights[0].slices > 1
    assert brr.group_cost(graph, (fc,), config).dram_bytes == (
        512 + graph[fc].weight_elems + 1000)
