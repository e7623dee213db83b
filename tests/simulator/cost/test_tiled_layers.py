"""Oversized layers tiled to the buffer (docs/cost-model.md, sections 4.3 and 9.5): the worked
examples, every number derived by hand in the document, and the tiled model's invariants
over the zoo. The simulator runs each tiling with exactly these figures."""

from __future__ import annotations

import pytest

from simulator.cost import CostCache, Failure, evaluate_plan, lbl
from simulator.cost.lbl import Layer, LoopOrder, layer_tiling
from simulator.engine import SimulationError, simulate
from simulator.hw import HardwareConfig
from simulator.plan import layer_by_layer
from simulator.scheme import Scheme
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.loader import load_zoo


def hw(buffer: int) -> HardwareConfig:
    """The hardware of docs/cost-model.md section 9 (int8), with the buffer given."""
    return HardwareConfig(
        name="worked-example", buffer_bytes=buffer, dtype_bytes=1, dram_bandwidth=8.0,
        dram_latency=100, clock_hz=1e9, macs_per_cycle=64, buffer_bandwidth=64.0,
        energy_dram_pj_per_byte=100.0, energy_buffer_pj_per_byte=1.0, energy_mac_pj=0.5,
    )


def chain_graph() -> ComputeGraph:
    """Section 9.1: x (1x4x8x8) -> conv0 -> conv1, 3x3 convs 4 -> 4 with bias (148 weights)."""
    b = GraphBuilder("chain")
    b.add_input("x", (1, 4, 8, 8))
    for name, src in (("conv0", "x"), ("conv1", "conv0")):
        b.add_op(name, OpKind.CONV, "conv", [src], (1, 4, 8, 8), kernel=(3, 3),
                 padding=(1, 1, 1, 1), weight_elems=4 * 4 * 9 + 4, macs=256 * 4 * 9)
    return b.build(["conv1"])


def fc_graph() -> ComputeGraph:
    """VGG16's first FC layer alone: 25,088 -> 4,096 with bias."""
    b = GraphBuilder("fc")
    b.add_input("x", (1, 25088))
    b.add_op("fc1", OpKind.LINEAR, "linear", ["x"], (1, 4096),
             weight_elems=25088 * 4096 + 4096, macs=25088 * 4096)
    return b.build(["fc1"])


def dw_graph() -> ComputeGraph:
    """A 3x3 depthwise conv over 1x64x8x8 (64 x (9 + 1) = 640 weights)."""
    b = GraphBuilder("dw")
    b.add_input("x", (1, 64, 8, 8))
    b.add_op("dw", OpKind.DWCONV, "conv", ["x"], (1, 64, 8, 8), kernel=(3, 3),
             padding=(1, 1, 1, 1), groups=64, weight_elems=640, macs=4096 * 9)
    return b.build(["dw"])


CHAIN, FC, DW = chain_graph(), fc_graph(), dw_graph()


def _figures(t) -> tuple:
    return (t.order, t.band_rows, t.bands, t.out_block, t.out_blocks, t.in_block, t.in_blocks,
            t.buffer_bytes, t.act_read, t.weight_read, t.write)


# --- 9.5 (a) a tiled convolution -------------------------------------------------------------


def test_conv_at_128_bytes_streams_input_and_weight_blocks():
    # The weights (148 B) exceed the buffer: the single-op LBDF group cannot run. Rows outer
    # never fits (one band of one row, all 4 channels: 96 B of input + 10 + 32 > 128); weights
    # outer needs 1 output channel (37 B) and 1-row bands: 4 passes over the input, 3,220 B;
    # blocks with 2 output channels and 1-row bands: 1,408 + 8 x 148 + 256 = 2,848 B; blocks
    # with 1 output channel and 2-row bands: 4 passes of 14 rows x 32 B = 1,792 B of input and
    # 4 x 148 = 592 B of weights: 2,640 B, the least.
    t = layer_tiling(CHAIN, 0, hw(128))
    assert _figures(t) == (LoopOrder.BLOCKS, 2, 4, 1, 4, 1, 4, 10 + 32 + 64, 1792, 592, 256)
    assert (t.reread_act, t.reread_weight, t.tiles, t.fits) == (1536, 444, 64, True)
    assert t.describe() == ("blocks: 4 blocks of 1 output channel x 4 bands of 2 rows x 4 "
                            "blocks of 1 input channel; input read 4 times, weights 4 times")


def test_conv_tiling_is_the_lbl_group_cost_and_runs_alone_in_a_fused_plan():
    c = lbl.group_cost(CHAIN, (0,), hw(128))
    assert (c.scheme, c.fits, c.failure, c.buffer_bytes, c.weight_buffer_bytes) == (
        Scheme.LBL, True, None, 106, 10)
    assert (c.dram_act_read, c.dram_weight_read, c.dram_write, c.dram_bytes) == (
        1792, 592, 256, 2640)
    assert (c.reread_act_bytes, c.reread_weight_bytes, c.tiles) == (1536, 444, 64)
    d = c.to_dict()
    assert d["tiling"].startswith("blocks:") and d["reread_act_bytes"] == 1536
    cache = CostCache(CHAIN, hw(128), "lbdf")
    assert cache.unfusable == (0, 1)
    cost = evaluate_plan(CHAIN, layer_by_layer(CHAIN), hw(128), "lbdf", cache)
    assert cost.valid and (cost.dram_bytes, cost.dram_bytes_fuseable) == (5280, 0)
    assert all(g.runs_alone and g.buffer_bytes == 106 for g in cost.groups)
    assert cost.lbl_dram == 5280  # the reference is costed the same way


def test_smallest_conv_tile_that_does_not_fit_makes_the_plan_invalid():
    # 1 output row of 1 output channel from 1 input channel: weights 9 + 1, 3 input rows of
    # 8 B, partial sums 1 row x 8 x 4 B = 66 B.
    c = lbl.group_cost(CHAIN, (0,), hw(64))
    assert not c.fits and c.failure is Failure.TILE_OVER_BUFFER
    reason = ("'conv0' cannot run layer by layer: its smallest tile (1 output row of 1 "
              "output channel and 1 input channel) needs 66 B > buffer 64 B")
    assert c.reason == reason
    assert lbl.group_cost(CHAIN, (0,), hw(66)).fits
    cost = evaluate_plan(CHAIN, layer_by_layer(CHAIN), hw(64), "lbdf")
    assert not cost.valid and reason in cost.violations[0]
    with pytest.raises(SimulationError, match=r"group 0 \(conv0, 1 ops\) cannot run: 'conv0' "
                                              r"cannot run layer by layer"):
        simulate(CHAIN, layer_by_layer(CHAIN), hw(64), "lbl")


def test_simulated_tiled_conv_moves_the_analytic_bytes_and_peaks_at_its_buffer():
    report = simulate(CHAIN, layer_by_layer(CHAIN), hw(128), "lbdf")
    assert [g.peak_buffer_bytes for g in report.groups] == [106, 106]
    assert [g.dram_bytes for g in report.groups] == [2640, 2640]
    assert report.groups[0].dram_read == {"x": 1792, "conv0.weights": 592}
    assert report.macs == 2 * 256 * 4 * 9 and report.groups[0].tiles == 64
    assert max(level for _, level in report.occupancy) <= 128


# --- 9.5 (b) a tiled FC layer ----------------------------------------------------------------


def test_fc_at_128_kib_keeps_the_input_and_streams_four_output_channels_at_a_time():
    # The input (25,088 B) stays; 4 output channels of weights (4 x 25,089 B) and their 4
    # outputs fit beside it (125,448 B), 5 do not (150,538 B): 1,024 blocks, every byte read
    # once. Blocks with all 4,096 outputs also read everything once but need 965 input blocks.
    t = layer_tiling(FC, 0, hw(128 * 1024))
    assert _figures(t) == (LoopOrder.ROWS_OUTER, 1, 1, 4, 1024, 25088, 1, 125448, 25088,
                           102764544, 4096)
    assert (t.reread_act, t.reread_weight) == (0, 0)


def test_fc_at_16_kib_reads_its_input_twice():
    # Neither the input (25,088 B) nor one output channel's weights (25,089 B) fit: input and
    # weight blocks are both streamed. One output block (4,096 partial sums of 4 B = 16 KiB)
    # leaves no room; two blocks of 2,048 hold 8,192 B of sums and 2,048 x (c + 1) B of
    # weights for c input channels, plus c input bytes: c = 2 (14,338 B), c = 3 is 16,387 B.
    t = layer_tiling(FC, 0, hw(16 * 1024))
    assert _figures(t) == (LoopOrder.BLOCKS, 1, 1, 2048, 2, 2, 12544, 14338, 50176,
                           102764544, 4096)
    assert (t.reread_act, t.reread_weight) == (25088, 0)


def test_simulated_fc_is_exact():
    report = simulate(FC, layer_by_layer(FC), hw(128 * 1024), "lbl")
    (g,) = report.groups
    assert (g.peak_buffer_bytes, g.dram_bytes, g.tiles) == (125448, 25088 + 102764544 + 4096,
                                                           1024)


# --- channel-separable, layout and untileable ops --------------------------------------------


def test_depthwise_conv_tiles_by_channels_and_rereads_only_halo_rows():
    # weights (640 B) over the buffer. At 600 B one band of 8 rows per channel holds 10 B of
    # weights, 64 B of input and 64 of output: 4 channels per block (552 B), nothing re-read.
    t = layer_tiling(DW, 0, hw(600))
    assert _figures(t) == (LoopOrder.CHANNELS, 8, 1, 4, 16, 0, 1, 552, 4096, 640, 4096)
    # At 100 B a channel's 8 rows (138 B) no longer fit; bands of 4 rows read 5 input rows
    # (10 + 40 + 32 = 82 B): the 2 halo rows of each of the 64 channels are re-read.
    t = layer_tiling(DW, 0, hw(100))
    assert _figures(t) == (LoopOrder.CHANNELS, 4, 2, 1, 64, 0, 1, 82, 5120, 640, 4096)
    assert (t.reread_act, t.reread_weight) == (1024, 0)
    report = simulate(DW, layer_by_layer(DW), hw(100), "lbl")
    assert (report.groups[0].peak_buffer_bytes, report.dram_bytes) == (82, 5120 + 640 + 4096)


def test_layout_ops_copy_in_chunks_and_untileable_ops_say_so():
    b = GraphBuilder("tail")
    b.add_input("x", (1, 512, 7, 7))
    b.add_op("flatten", OpKind.RESHAPE, "flatten", ["x"], (1, 25088))
    b.add_op("softmax", OpKind.SOFTMAX, "softmax", ["flatten"], (1, 25088))
    g = b.build(["softmax"])
    t = layer_tiling(g, 0, hw(16 * 1024))  # 3 chunks need 2 x 8,363 B; 4 need 2 x 6,272
    assert (t.order, t.bands, t.buffer_bytes, t.act_read, t.write) == (
        LoopOrder.CHUNKS, 4, 12544, 25088, 25088)
    report = simulate(g, layer_by_layer(g), hw(64 * 1024), "lbl")
    assert report.groups[0].dram_bytes == 2 * 25088
    t = layer_tiling(g, 1, hw(16 * 1024))  # a softmax over the whole vector: one line
    assert not t.fits and t.reason == (
        "'softmax' cannot run layer by layer: its smallest tile (1 line of 25,088 elements) "
        "needs 50,176 B > buffer 16,384 B")


# --- token ops on their own: attention's products, softmax and LayerNorm ---------------------


def attention_graph() -> ComputeGraph:
    """Q (1x2x4x3: 2 heads, 4 tokens, 3 channels) times K^T (1x2x3x5: 5 keys), then the
    softmax over the keys."""
    b = GraphBuilder("attention")
    b.add_input("q", (1, 2, 4, 3))
    b.add_input("kt", (1, 2, 3, 5))
    b.add_op("scores", OpKind.MATMUL, "matmul", ["q", "kt"], (1, 2, 4, 5), macs=2 * 4 * 5 * 3)
    b.add_op("softmax", OpKind.SOFTMAX, "softmax", ["scores"], (1, 2, 4, 5), {"axis": 3})
    return b.build(["softmax"])


def test_attention_product_runs_head_by_head_with_the_keys_resident():
    # One head of K^T (3 x 5 = 15 B) stays on chip while Q's rows stream: r rows need
    # 15 + r (3 + 5) B. At 35 B, r <= 2.5: chunks of 2 rows (2 per head, 4 tiles), 31 B, every
    # tensor read once (Q 24 B, K^T 30 B, scores 40 B written). The single-op LBDF group (K^T
    # held whole, 30 B, plus rows) needs 40 B, so it does not stream at 35 B.
    g = attention_graph()
    t = layer_tiling(g, 0, hw(35))
    assert _figures(t) == (LoopOrder.HEADS, 2, 2, 1, 2, 0, 1, 31, 54, 0, 40)
    assert t.tiles == 4 and t.reread_act == 0
    # one row and one head of K^T: 15 + 8 = 23 B
    t = layer_tiling(g, 0, hw(22))
    assert not t.fits and t.reason == (
        "'scores' cannot run layer by layer: its smallest tile (one head of the second operand "
        "and one row) needs 23 B > buffer 22 B")
    report = simulate(g, layer_by_layer(g), hw(35), "lbl")
    assert report.groups[0].peak_buffer_bytes == 31 and report.groups[0].dram_bytes == 94
    assert report.groups[0].dram_read == {"q": 24, "kt": 30}
    assert max(level for _, level in report.occupancy) <= 35


def test_token_softmax_and_layernorm_run_in_chunks_of_whole_lines():
    # softmax over the 5 keys of 2 x 4 query rows: 8 lines of 5; a chunk of c lines holds
    # 10 c B (in and out). At 12 B: one line per chunk, 8 chunks, 10 B.
    g = attention_graph()
    t = layer_tiling(g, 1, hw(12))
    assert _figures(t) == (LoopOrder.CHUNKS, 0, 8, 0, 1, 0, 1, 10, 40, 0, 40)
    # LayerNorm over the 5 channels of 4 tokens, 10 weights held: 10 + 10 c B; at 22 B, c = 1
    b = GraphBuilder("ln")
    b.add_input("x", (1, 4, 5))
    b.add_op("ln", OpKind.NORM, "layernorm", ["x"], (1, 4, 5),
             {"axes": (2,), "eps": 1e-5, "affine": True}, weight_elems=10)
    ln = b.build(["ln"])
    t = layer_tiling(ln, 0, hw(22))
    assert _figures(t) == (LoopOrder.CHUNKS, 0, 4, 0, 1, 0, 1, 20, 20, 10, 20)
    report = simulate(ln, layer_by_layer(ln), hw(22), "lbl")
    assert report.groups[0].peak_buffer_bytes == 20 and report.groups[0].dram_bytes == 50
    # statistics over the rows (a norm over the tokens) cannot be chunked by lines
    b = GraphBuilder("ln_rows")
    b.add_input("x", (1, 4, 5))
    b.add_op("ln", OpKind.NORM, "layernorm", ["x"], (1, 4, 5), {"axes": (1,)}, weight_elems=0)
    assert Layer(b.build(["ln"]), 0, 1).form == "whole"


# --- the model over the zoo ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "resnet18", "squeezenet1_0"])
def test_every_zoo_op_tiles_within_the_buffer_at_no_less_than_the_ideal_traffic(name):
    graph = load_zoo(name, (1, 3, 128, 128))
    forms = set()
    for buffer in (16 * 1024, 64 * 1024):
        for op in graph:
            t = layer_tiling(graph, op.id, hw(buffer))
            layer = Layer(graph, op.id, 1)
            forms.add(layer.form)
            assert t.fits and t.buffer_bytes <= buffer, (op.name, t.reason)
            assert t.reread_act >= 0 and t.reread_weight >= 0
            ideal = lbl.group_cost(graph, (op.id,), hw(1 << 30))
            assert t.dram_bytes - t.reread_act - t.reread_weight == ideal.dram_bytes
            if layer.form != "matrix":  # only halo rows are re-read
                assert t.reread_weight == 0
    assert forms >= {"matrix", "channels", "reduce", "chunks"}
