"""The worked examples of docs/cost-model.md, section 9: every number the document derives by
hand, checked against the cost models. A failure here means the code or the document changed:
update both together."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.cost import CostCache, Failure, brr, evaluate_plan, lbdf, lbl, plan_totals
from simulator.cost.brr import chosen_tiling, incompatibility, position_needs, tile_cost
from simulator.cost.lbdf import line_buffer_elems, peak_row_bytes
from simulator.cost.traffic import compulsory_bytes
from simulator.engine import simulate
from simulator.hw import HardwareConfig
from simulator.plan import PartitionPlan, layer_by_layer
from simulator.scheme import Scheme
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import ComputeGraph, OpKind

SHAPE = (1, 4, 8, 8)  # 256 elements, 8 rows of 32
VEC = (1, 4, 1, 1)


def hw(buffer: int = 640, lbdf_buffer: str = "row") -> HardwareConfig:
    """The hardware of section 9 (B = 640 B, int8); LBDF line buffers of whole rows, except
    where a test asks for the pixel line buffer (9.1-9.3, "Pixel line buffer")."""
    return HardwareConfig(
        name="worked-example", buffer_bytes=buffer, dtype_bytes=1, dram_bandwidth=8.0,
        dram_latency=100, clock_hz=1e9, macs_per_cycle=64, buffer_bandwidth=64.0,
        energy_dram_pj_per_byte=100.0, energy_buffer_pj_per_byte=1.0, energy_mac_pj=0.5,
        lbdf_buffer=lbdf_buffer,
    )


def _conv3x3(b: GraphBuilder, name: str, src: str) -> None:
    b.add_op(name, OpKind.CONV, "conv", [src], SHAPE, kernel=(3, 3), padding=(1, 1, 1, 1),
             weight_elems=4 * 4 * 9 + 4, macs=256 * 4 * 9)


def chain_graph() -> ComputeGraph:
    """Section 9.1: x -> conv0 -> conv1."""
    b = GraphBuilder("chain")
    b.add_input("x", SHAPE)
    _conv3x3(b, "conv0", "x")
    _conv3x3(b, "conv1", "conv0")
    return b.build(["conv1"])


def residual_graph() -> ComputeGraph:
    """Section 9.2: x -> conv0 -> relu -> conv1 -> add(conv1, x)."""
    b = GraphBuilder("residual")
    b.add_input("x", SHAPE)
    _conv3x3(b, "conv0", "x")
    b.add_op("relu", OpKind.ELTWISE_UNARY, "relu", ["conv0"], SHAPE)
    _conv3x3(b, "conv1", "relu")
    b.add_op("add", OpKind.ELTWISE_BINARY, "add", ["conv1", "x"], SHAPE)
    return b.build(["add"])


def se_graph() -> ComputeGraph:
    """Section 9.3: dwconv -> squeeze-and-excitation -> mul(dwconv, scale) -> 1x1 conv."""
    b = GraphBuilder("se")
    b.add_input("x", SHAPE)
    b.add_op("dw", OpKind.DWCONV, "conv", ["x"], SHAPE, kernel=(3, 3), padding=(1, 1, 1, 1),
             groups=4, weight_elems=4 * 9 + 4, macs=256 * 9)
    b.add_op("gap", OpKind.GLOBAL_POOL, "avg", ["dw"], VEC, kernel=(8, 8), stride=(8, 8))
    b.add_op("fc1", OpKind.CONV, "conv", ["gap"], (1, 2, 1, 1), weight_elems=10, macs=8)
    b.add_op("relu", OpKind.ELTWISE_UNARY, "relu", ["fc1"], (1, 2, 1, 1))
    b.add_op("fc2", OpKind.CONV, "conv", ["relu"], VEC, weight_elems=12, macs=8)
    b.add_op("hsig", OpKind.ELTWISE_UNARY, "hardsigmoid", ["fc2"], VEC)
    b.add_op("mul", OpKind.ELTWISE_BINARY, "mul", ["dw", "hsig"], SHAPE)
    b.add_op("proj", OpKind.CONV, "conv", ["mul"], SHAPE, weight_elems=20, macs=256 * 4)
    return b.build(["proj"])


CHAIN, RESIDUAL, SE = chain_graph(), residual_graph(), se_graph()
ALL_A, ALL_B, ALL_C = (0, 1), (0, 1, 2, 3), tuple(range(8))
SPLIT_A, SPLIT_B = (0, 1), (2, 3, 4, 5, 6, 7)  # {dw, gap} | {fc1, ..., proj}


def _traffic(cost) -> tuple[int, int, int, int]:
    return cost.dram_act_read, cost.dram_weight_read, cost.dram_write, cost.dram_bytes


def test_graphs_are_the_documented_ones():
    # section 9: names, ids, weights and MACs used by every derivation below
    assert [(o.name, o.weight_elems, o.macs) for o in CHAIN] == [
        ("conv0", 148, 9216), ("conv1", 148, 9216)]
    assert [o.name for o in RESIDUAL] == ["conv0", "relu", "conv1", "add"]
    assert RESIDUAL[3].inputs == (2, -1)
    assert [(o.name, o.weight_elems, o.macs) for o in SE] == [
        ("dw", 40, 2304), ("gap", 0, 0), ("fc1", 10, 8), ("relu", 0, 0), ("fc2", 12, 8),
        ("hsig", 0, 0), ("mul", 0, 0), ("proj", 20, 1024)]
    assert SE[6].inputs == (0, 5)


# --- 9.1 (a) two 3x3 convs ------------------------------------------------------------------


def test_a_lbdf_buffer_and_traffic():
    # docs/cost-model.md 9.1 "LBDF schedule": peak 8 rows = 256 B (c1_0 held until conv1_1),
    # F_beta 296 + 256 = 552 B
    assert peak_row_bytes(CHAIN, ALL_A) == 256
    c = lbdf.group_cost(CHAIN, ALL_A, hw())
    assert (c.buffer_bytes, c.weight_buffer_bytes) == (552, 296)
    assert _traffic(c) == (256, 296, 256, 808)
    assert (c.fits, c.reason, c.macs) == (True, "", 18432)


def test_a_lower_bound_and_lbl():
    # 9.1 "F_D and lower bound", "LBL"
    assert compulsory_bytes(CHAIN, ALL_A, 1) == 808
    costs = [lbl.group_cost(CHAIN, (o,), hw()) for o in ALL_A]
    assert [(c.dram_bytes, c.buffer_bytes, c.fits) for c in costs] == [(660, 308, True)] * 2
    totals = evaluate_plan(CHAIN, layer_by_layer(CHAIN), hw(), "lbl")
    assert (totals.valid, totals.dram_bytes, totals.lbl_dram, totals.lower_bound) == (
        True, 1320, 1320, 808)
    whole = evaluate_plan(CHAIN, PartitionPlan.of([ALL_A]), hw(), "lbdf")
    assert (whole.valid, whole.dram_bytes, whole.mbu) == (True, 808, 552)


def _held_and_finest(graph, ops, tiles) -> tuple[list[int], list[int]]:
    """Per position of a BRR group at `tiles` tiles, the most a tile holds without weights
    (h, from all weights resident) and with its op streamed in one-channel slices (f, from a
    buffer too small for anything: every op streamed in its finest slices)."""
    weights = sum(graph[o].weight_elems for o in ops)
    resident = tile_cost(graph, ops, tiles, hw(), resident=ops)
    held = (position_needs(graph, ops, resident).max(axis=1) - weights).tolist()
    finest = tile_cost(graph, ops, tiles, hw(1))
    return held, position_needs(graph, ops, finest).max(axis=1).tolist()


@pytest.mark.parametrize(("tiles", "held", "finest", "act", "macs"), [
    (1, [576, 576], [613, 613], 256, 18432),
    (2, [416, 352], [453, 389], 384, 20736),
    (3, [448, 320], [485, 357], 512, 23040),
    (4, [384, 256], [421, 293], 640, 25344),
    (8, [320, 192], [357, 229], 1088, 34560),
])
def test_a_brr_tilings(tiles, held, finest, act, macs):
    # 9.1 "BRR regions" table (d = 1: elements are bytes): live rows + 64 B of allowances,
    # + 37 B (one output channel's weights) streamed in the finest slices
    assert _held_and_finest(CHAIN, ALL_A, tiles) == (held, finest)
    t = tile_cost(CHAIN, ALL_A, tiles, hw(1))
    assert (t.buffer_elems, t.act_read_elems, t.macs, t.allowance_elems) == (
        max(finest), act, macs, 64)
    assert t.weight_read_elems == tiles * 296  # streamed: once per tile


def test_a_brr_runs_untiled_in_weight_slices():
    # 9.1 "Configuration at 640 B": T = 1 fits (613 B), each conv in 4 one-channel slices
    c = brr.group_cost(CHAIN, ALL_A, hw())
    assert (c.tiles, c.weights_streamed, c.fits, c.reason) == (1, True, True, "")
    assert (c.buffer_bytes, c.weight_buffer_bytes, c.macs) == (613, 37, 18432)
    assert _traffic(c) == (256, 296, 256, 808)
    t = chosen_tiling(CHAIN, ALL_A, hw())
    assert [(w.op, w.resident, w.split, w.slices, w.chunk, w.slice_elems) for w in t.weights] \
        == [(0, False, "out", 4, 1, 37), (1, False, "out", 4, 1, 37)]


def test_brr_does_not_tile_at_one_kib():
    # 9 "Why 640 B and not 1 KiB": streamed weights at T = 1, in one slice, fit 1024 B
    for graph, ops, need in ((CHAIN, ALL_A, 724), (RESIDUAL, ALL_B, 980)):
        c = brr.group_cost(graph, ops, hw(1024))
        assert (c.tiles, c.weights_streamed, c.buffer_bytes, c.dram_bytes, c.fits) == (
            1, True, need, 808, True)
        assert {w.slices for w in chosen_tiling(graph, ops, hw(1024)).weights} == {1}


def test_a_cycles_and_energy():
    # 9.1 "Cycles and energy"
    # the roofline (288 compute, 201 DRAM) bounds the cycles; the row schedule pays the DRAM
    # latency of every row it waits for: 1,344 cycles, the simulator's figure
    t = lbdf.group_cost(CHAIN, ALL_A, hw()).timing
    assert (t.compute_cycles, t.dram_cycles, t.cycles, t.bound) == (288, 201, 1344, "compute")
    assert simulate(CHAIN, PartitionPlan.of([ALL_A]), hw(), "lbdf").cycles == 1344
    assert (t.energy_dram_pj, t.energy_buffer_pj, t.energy_mac_pj, t.energy_pj) == (
        80800, 2128, 9216, 92144)
    t = brr.group_cost(CHAIN, ALL_A, hw()).timing  # T = 1: LBDF's traffic and MACs
    assert (t.compute_cycles, t.dram_cycles, t.cycles) == (288, 201, 1392)  # synchronous
    assert simulate(CHAIN, PartitionPlan.of([ALL_A]), hw(), "brr").cycles == 1392
    assert (t.energy_dram_pj, t.energy_buffer_pj, t.energy_mac_pj, t.energy_pj) == (
        80800, 2128, 9216, 92144)


def test_a_unfusable_ops():
    # 9.1 "Unfusable ops"
    assert CostCache(CHAIN, hw(256), "lbdf").unfusable == (0, 1)
    assert lbdf.group_cost(CHAIN, (0,), hw(256)).reason == "needs 308 B > buffer 256 B"
    totals = evaluate_plan(CHAIN, layer_by_layer(CHAIN), hw(256), "lbdf")
    assert (totals.valid, totals.dram_bytes, totals.dram_bytes_fuseable, totals.mbu) == (
        True, 2 * 872, 0, 0)  # each conv tiled: 2 bands x 4 output-channel blocks
    assert (totals.lower_bound, totals.lower_bound_fuseable) == (808, 0)
    assert lbdf.group_cost(CHAIN, (0,), hw(128)).reason == \
        "weights alone (148 B) exceed the buffer (128 B)"
    alone = lbl.group_cost(CHAIN, (0,), hw(256))  # rows outer, 2 bands, 1-channel blocks
    assert (alone.dram_act_read, alone.dram_weight_read, alone.dram_write, alone.buffer_bytes) \
        == (10 * 32, 2 * 148, 256, 5 * 32 + 4 * 8 + 37)
    pixel = lbdf.group_cost(CHAIN, (0,), replace(hw(256), lbdf_buffer="pixel"))
    assert (pixel.buffer_bytes, pixel.fits) == (148 + 2 * 32 + 3 * 4 + 4 + 4, True)


def test_a_unfusable_ops_run_alone_layer_by_layer():
    cache = CostCache(CHAIN, hw(256), "lbdf")
    alone = cache.run((0,))
    assert alone.runs_alone and alone.fits and alone.scheme is Scheme.LBL
    assert alone.dram_bytes == lbl.group_cost(CHAIN, (0,), hw(256)).dram_bytes
    assert not cache.run((0, 1)).runs_alone and cache.run((0, 1)) == cache.group((0, 1))
    assert not cache.group((0,)).fits  # the group cost itself is unchanged
    assert lbdf.group_cost(CHAIN, (0,), hw(256)).failure is Failure.OVER_BUFFER
    assert lbdf.group_cost(CHAIN, (0,), hw(128)).failure is Failure.WEIGHTS_OVER_BUFFER
    assert lbdf.group_cost(CHAIN, ALL_A, hw(1 << 20)).failure is None
    assert lbl.group_cost(CHAIN, ALL_A, hw()).failure is Failure.NOT_SINGLE_OP


def test_a_plan_totals_leave_runs_alone_out_of_the_fuseable_figures():
    cache = CostCache(CHAIN, hw(256), "lbdf")
    costs = [cache.run((0,)), cache.run((1,))]
    t = plan_totals(costs)
    assert (t.dram_bytes, t.dram_bytes_fuseable, t.mbu, t.fused_mbu, t.runs) == (
        2 * 872, 0, 0, 0, True)
    big = CostCache(CHAIN, hw(1 << 20), "lbdf")
    t = plan_totals([big.run(ALL_A)])
    assert (t.dram_bytes, t.mbu, t.fused_mbu) == (
        big.group(ALL_A).dram_bytes, big.group(ALL_A).buffer_bytes,
        big.group(ALL_A).buffer_bytes)
    assert not plan_totals([cache.run(ALL_A)]).runs


# --- 9.2 (b) residual block -----------------------------------------------------------------


def test_b_lbdf_skip_holds_one_more_row():
    # 9.2 "LBDF schedule": peak 9 rows = 288 B; without the add (skip) 8 rows = 256 B
    assert peak_row_bytes(RESIDUAL, ALL_B) == 288
    assert peak_row_bytes(RESIDUAL, (0, 1, 2)) == 256
    c = lbdf.group_cost(RESIDUAL, ALL_B, hw())
    assert (c.buffer_bytes, c.weight_buffer_bytes, c.fits, c.reason) == (584, 296, True, "")
    assert _traffic(c) == (256, 296, 256, 808)
    assert (c.timing.cycles, c.timing.energy_pj) == (1218, 93424)
    assert simulate(RESIDUAL, PartitionPlan.of([ALL_B]), hw(), "lbdf").cycles == 1218


def test_b_lower_bound_and_lbl():
    # 9.2 "F_D and lower bound", "LBL"
    assert compulsory_bytes(RESIDUAL, ALL_B, 1) == 808
    costs = [lbl.group_cost(RESIDUAL, (o,), hw()) for o in ALL_B]
    assert [(c.dram_bytes, c.buffer_bytes) for c in costs] == [
        (660, 308), (512, 96), (660, 308), (768, 160)]
    assert CostCache(RESIDUAL, hw(), "lbdf").references["lbl_dram"] == 2600


@pytest.mark.parametrize(("tiles", "held", "finest", "act", "macs"), [
    (1, [576, 832, 832, 832], [613, 832, 869, 832], 256, 18432),
    (2, [416, 576, 544, 512], [453, 576, 581, 512], 384, 20736),
    (4, [384, 512, 448, 384], [421, 512, 485, 384], 640, 25344),
    (8, [320, 416, 352, 288], [357, 416, 389, 288], 1088, 34560),
])
def test_b_brr_tilings(tiles, held, finest, act, macs):
    # 9.2 "BRR" table: relu and add have no weights (f = h there)
    assert _held_and_finest(RESIDUAL, ALL_B, tiles) == (held, finest)
    t = tile_cost(RESIDUAL, ALL_B, tiles, hw(1))
    assert (t.act_read_elems, t.macs, t.allowance_elems) == (act, macs, 64)


@pytest.mark.parametrize(("tiles", "resident", "need"), [
    (2, (0,), 729), (2, (2,), 724), (4, (0,), 660), (4, (2,), 660), (8, (0,), 564),
    (8, (0, 2), 712)])
def test_b_brr_residencies(tiles, resident, need):
    # 9.2 search: what each residency needs, the other conv in one-channel slices
    t = tile_cost(RESIDUAL, ALL_B, tiles, hw(need - 1), resident=resident)
    assert t.buffer_elems == need and t.resident_elems == 148 * len(resident)


def test_b_brr_search_picks_two_streamed_tiles():
    # 9.2: at T = 2 no conv can be resident; conv1 in 2 output-channel slices
    c = brr.group_cost(RESIDUAL, ALL_B, hw())
    assert (c.tiles, c.weights_streamed, c.fits, c.reason) == (2, True, True, "")
    assert (c.buffer_bytes, c.weight_buffer_bytes, c.macs) == (618, 148, 20736)
    assert _traffic(c) == (384, 592, 256, 1232)
    assert (c.timing.cycles, c.timing.energy_pj) == (1482, 137400)
    assert simulate(RESIDUAL, PartitionPlan.of([ALL_B]), hw(), "brr").cycles == 1482
    t = chosen_tiling(RESIDUAL, ALL_B, hw())
    assert [(w.op, w.resident, w.slices, w.slice_elems) for w in t.weights] == [
        (0, False, 1, 148), (2, False, 2, 74)]
    assert position_needs(RESIDUAL, ALL_B, t).max(axis=1).tolist() == [564, 576, 618, 512]


# --- 9.3 (c) squeeze-and-excitation ---------------------------------------------------------

INCOMPATIBLE = ("BRR-incompatible: 'mul' broadcasts 'hsig', which depends on a whole feature "
                "map, onto a feature map")


def test_c_lbdf_holds_the_other_branch_whole():
    # 9.3 "LBDF schedule": peak 324 B; with the scale entering from DRAM, 196 B
    assert peak_row_bytes(SE, ALL_C) == 324
    assert peak_row_bytes(SE, (0, 6, 7)) == 196
    c = lbdf.group_cost(SE, ALL_C, hw())
    assert (c.buffer_bytes, c.weight_buffer_bytes, c.fits, c.reason) == (406, 82, True, "")
    assert _traffic(c) == (256, 82, 256, 594)
    t = c.timing
    assert (t.compute_cycles, t.dram_cycles, t.cycles, t.bound) == (53, 175, 1704, "dram")
    assert simulate(SE, PartitionPlan.of([ALL_C]), hw(), "lbdf").cycles == 1704
    assert (t.energy_dram_pj, t.energy_buffer_pj, t.energy_mac_pj, t.energy_pj) == (
        59400, 2500, 1672, 63572)


def test_c_lower_bound_and_lbl():
    # 9.3 "F_D and lower bound", "LBL"
    assert compulsory_bytes(SE, ALL_C, 1) == 594
    assert [lbl.group_cost(SE, (o,), hw()).dram_bytes for o in ALL_C] == [
        552, 260, 16, 4, 18, 8, 516, 532]
    assert CostCache(SE, hw(), "brr").references == {
        "lower_bound": 594, "lower_bound_fuseable": 594, "lbl_dram": 1906,
        "lbl_dram_fuseable": 1906}


def test_c_brr_whole_group_is_incompatible():
    # 9.3 "BRR, whole group: incompatible"
    assert incompatibility(SE, ALL_C) == INCOMPATIBLE
    c = brr.group_cost(SE, ALL_C, hw())
    assert (c.fits, c.reason, c.tiles, c.weights_streamed) == (False, INCOMPATIBLE, 1, True)
    assert c.buffer_bytes == 620  # x 256 + dw 256 + running sum 4 + allowances 64 + dw's 40
    assert _traffic(c) == (256, 82, 256, 594)
    plan = evaluate_plan(SE, PartitionPlan.of([ALL_C]), hw(), "brr")
    assert not plan.valid and INCOMPATIBLE in plan.violations[0]


def test_c_brr_split_before_the_poolings_consumers():
    # 9.3 "BRR, split before the pooling's consumers"
    assert incompatibility(SE, SPLIT_A) == incompatibility(SE, SPLIT_B) == ""
    a = brr.group_cost(SE, SPLIT_A, hw())
    assert (a.tiles, a.weights_streamed, a.fits, a.buffer_bytes) == (1, True, True, 620)
    assert _traffic(a) == (256, 40, 260, 556)
    b = brr.group_cost(SE, SPLIT_B, hw())
    assert (b.tiles, b.weights_streamed, b.fits, b.buffer_bytes) == (1, True, True, 596)
    assert _traffic(b) == (260, 42, 256, 558)
    needs = position_needs(SE, SPLIT_B, chosen_tiling(SE, SPLIT_B, hw()))
    assert needs[:, 0].tolist() == [80, 68, 82, 72, 580, 596]
    split = PartitionPlan.of([SPLIT_A, SPLIT_B])
    totals = evaluate_plan(SE, split, hw(), "brr")
    assert (totals.valid, totals.dram_bytes, totals.mbu, totals.cycles, totals.energy_pj) == (
        True, 1114, 620, 1196, 116092)
    assert simulate(SE, split, hw(), "brr").cycles == 1196
    totals = evaluate_plan(SE, split, hw(), "lbdf")
    assert (totals.valid, totals.dram_bytes, totals.mbu) == (True, 1114, 204)
    assert [g.buffer_bytes for g in totals.groups] == [204, 174]
    whole = evaluate_plan(SE, PartitionPlan.of([ALL_C]), hw(), "lbdf")
    assert (whole.valid, whole.dram_bytes, whole.mbu) == (True, 594, 406)


def test_c_other_splits():
    # 9.3: splitting before the multiply is compatible; pooling + broadcast together is not
    assert incompatibility(SE, (0, 1, 2, 3, 4, 5)) == incompatibility(SE, (6, 7)) == ""
    assert incompatibility(SE, (1, 2, 3, 4, 5, 6)) == INCOMPATIBLE


def test_c_brr_accumulator_is_held_across_tiles():
    # 9.3 "BRR, split before the pooling's consumers", A at T = 2: tile 1 holds x rows 3-7,
    # dw rows 4-7, the partial sum of rows 0-3 carried from tile 0 and 64 B of allowances:
    # 356 B, + dw's 40 resident weights
    t = tile_cost(SE, SPLIT_A, 2, hw())
    assert (t.buffer_elems, t.resident_elems) == (396, 40)
    assert position_needs(SE, SPLIT_A, t)[0].tolist() == [396, 396]


# --- LBDF with the pixel line buffer (9.1-9.3, "Pixel line buffer") ----------------------
# 32-element rows of 8 pixels (4 elements each, the channels). A steady tensor (it produces a
# row and its oldest row is read for the last time in the same block) holds its rows but one,
# plus the pixels its slowest reader's window spans: 3 for a 3x3 window.


def test_a_pixel_line_buffer():
    # 9.1 "Pixel line buffer": blocks x_t, conv0_(t-1), conv1_(t-2); x: 2 rows + 3 pixels +
    # 1 in flight = 80, conv0: 2 rows + 3 pixels = 76, conv1: its pixel being written = 4
    assert line_buffer_elems(CHAIN, ALL_A) == 80 + 76 + 4 == 160
    c = lbdf.group_cost(CHAIN, ALL_A, hw(lbdf_buffer="pixel"))
    assert (c.buffer_bytes, c.weight_buffer_bytes, c.fits) == (296 + 160, 296, True)
    assert _traffic(c) == (256, 296, 256, 808)  # the traffic does not depend on it
    # a conv alone: 2 rows + 3 pixels + 1 in flight of x, 1 pixel of its output
    assert line_buffer_elems(CHAIN, (0,)) == 84
    assert lbdf.group_cost(CHAIN, (0,), hw(256, "pixel")).buffer_bytes == 148 + 84
    assert CostCache(CHAIN, hw(256, "pixel"), "lbdf").unfusable == ()
    assert lbdf.group_cost(CHAIN, (0,), hw(230, "pixel")).reason == \
        "needs 232 B > buffer 230 B"


def test_b_pixel_line_buffer():
    # 9.2 "Pixel line buffer": x 2 rows + 3 + 1 = 80, conv0 1 pixel (relu reads it as it
    # comes) = 4, relu 2 rows + 3 = 76, conv1 2 pixels (its last two come together, before add
    # reads its 7th) = 8, add 1 pixel = 4
    assert line_buffer_elems(RESIDUAL, ALL_B) == 80 + 4 + 76 + 8 + 4 == 172
    c = lbdf.group_cost(RESIDUAL, ALL_B, hw(lbdf_buffer="pixel"))
    assert (c.buffer_bytes, c.fits) == (296 + 172, True)
    assert line_buffer_elems(RESIDUAL, (0, 1, 2)) == 80 + 4 + 76 + 4  # conv1 written


def test_c_pixel_line_buffer():
    # 9.3 "Pixel line buffer": at x7, dw6 (time 7, step 0): x 2 rows + 3 + 1 = 80, dw0-dw6
    # whole (nothing reads them yet) = 224, the running sum = 4
    assert line_buffer_elems(SE, ALL_C) == 80 + 224 + 4 == 308
    c = lbdf.group_cost(SE, ALL_C, hw(lbdf_buffer="pixel"))
    assert (c.buffer_bytes, c.fits) == (82 + 308, True)
    # the scale from DRAM: x 80, dw 1 pixel, the scale 4, mul 1 pixel, proj 1 pixel
    assert line_buffer_elems(SE, (0, 6, 7)) == 80 + 4 + 4 + 4 + 4 == 96
    # split A + B: A holds x 80, dw's pixel being written, the running sum; B counts the
    # squeeze vectors of its first block together: dw 1 pixel + 1 in flight, gap, fc1, relu,
    # fc2, hsig, mul 1 pixel, proj 1 pixel
    assert line_buffer_elems(SE, SPLIT_A) == 80 + 4 + 4 == 88
    assert line_buffer_elems(SE, SPLIT_B) == 8 + 4 + 2 + 2 + 4 + 4 + 4 + 4 == 32
    totals = evaluate_plan(SE, PartitionPlan.of([SPLIT_A, SPLIT_B]), hw(lbdf_buffer="pixel"),
                           "lbdf")
    assert [g.buffer_bytes for g in totals.groups] == [40 + 88, 42 + 32]


def test_pixel_line_buffers_hold_less_than_rows():
    # 9.4: every example, pixel vs whole rows
    for graph, ops, rows, pixels in ((CHAIN, ALL_A, 256, 160), (RESIDUAL, ALL_B, 288, 172),
                                     (SE, ALL_C, 324, 308)):
        assert (line_buffer_elems(graph, ops, "row"), line_buffer_elems(graph, ops)) == (
            rows, pixels)
