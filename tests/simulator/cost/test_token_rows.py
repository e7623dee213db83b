"""Token-streamed execution (docs/cost-model.md, "Token-streamed execution"): the row axes of a
tiny encoder layer and the worked example's F_beta and F_D, derived by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from simulator.cost import brr, lbdf
from simulator.cost.rows import row_deps
from simulator.engine import simulate
from simulator.hw import HardwareConfig
from simulator.plan import PartitionPlan
from simulator.workload.torch_import import from_torch
from simulator.workload.zoo.bert import BertLayer


@pytest.fixture(scope="module")
def layer():
    """One post-norm encoder layer: L = 4 tokens, D = 8, 2 heads (d = 4), MLP 16."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    graph = from_torch(BertLayer(8, 2, 16).eval(), (1, 4, 8), name="tiny")
    torch.set_num_threads(threads)
    return graph


def _hw(granularity: str) -> HardwareConfig:
    return HardwareConfig(
        name="t", buffer_bytes=1 << 20, dram_bandwidth=16.0, dram_latency=100, clock_hz=1e9,
        macs_per_cycle=1024, buffer_bandwidth=128.0, energy_dram_pj_per_byte=160.0,
        energy_buffer_pj_per_byte=2.5, energy_mac_pj=0.3, lbdf_buffer=granularity)


def test_token_rows_follow_the_tokens_through_the_layer(layer):
    deps = row_deps(layer)
    name = {op.name: op.id for op in layer}
    axis = deps.axes.of
    assert axis[-1] == 1 and deps.height_of[-1] == 4  # (1, 4, 8): 4 token rows of 8
    assert axis[name["reshape"]] == 1  # (1, 4, 2, 4): still the tokens
    assert axis[name["permute"]] == 2  # (1, 2, 4, 4) heads first: tokens at axis 2
    assert axis[name["transpose"]] == 3  # K^T (1, 2, 4, 4): keys along the last axis
    assert deps.row_elems_of[name["permute"]] == 8  # a token row: 2 heads x 4
    for op in ("matmul", "softmax", "matmul_1", "output", "output_norm"):
        assert deps.height_of[name[op]] == 4
    mm = name["matmul"]  # Q row r reads Q row r and all of K^T
    assert deps.lo[mm][0].tolist() == deps.hi[mm][0].tolist() == [0, 1, 2, 3]
    assert deps.lo[mm][1].tolist() == [0] * 4 and deps.hi[mm][1].tolist() == [3] * 4


def test_attention_core_worked_example(layer):
    """S = Q K^T, x 0.5, softmax, P V as one LBDF group (whole rows, 1 B/element). Q, K^T
    and V enter (32 B each), O leaves (32 B): F_D = 128 B. K^T and V are read whole, so they
    arrive first and stay (64 B); then per token j: Q_j with Q_{j+1} in flight (16 B), S_j
    (8 B) and O_{j-1} being written (8 B): F_beta = 64 + 16 + 8 + 8 = 96 B."""
    name = {op.name: op.id for op in layer}
    ops = tuple(name[n] for n in ("matmul", "mul", "softmax", "matmul_1"))
    cost = lbdf.group_cost(layer, ops, _hw("row"))
    assert cost.dram_act_read == 96 and cost.dram_write == 32 and cost.dram_weight_read == 0
    assert cost.buffer_bytes == 96


def test_attention_core_brr_worked_example(layer):
    """The same group under BRR (docs/cost-model.md 9.7, "BRR, the same group"): every tensor
    has 4 rows of 8 B; a tile needs its band of query rows of Q, S, the scaled S, P and O, and
    all 4 rows of K^T and V (read whole by every query row), so K^T and V are re-read per tile.
    Q and K^T are held at S's position only, V at P V's only; A = a row of Q, K^T, V, O = 32 B."""
    name = {op.name: op.id for op in layer}
    ops = tuple(name[n] for n in ("matmul", "mul", "softmax", "matmul_1"))
    q, kt, v, o = name["permute"], name["transpose"], name["permute_2"], name["matmul_1"]
    regions = brr.tile_regions(layer, ops, 2)
    first, last = regions.first, regions.last
    assert (first[q].tolist(), last[q].tolist()) == ([0, 2], [1, 3])  # the query rows
    assert (first[o].tolist(), last[o].tolist()) == ([0, 2], [1, 3])  # O's bands
    for whole in (kt, v):  # all the keys, in both tiles
        assert (first[whole].tolist(), last[whole].tolist()) == ([0, 0], [3, 3])
    # (T, F_beta, act reads), no weights; MACs 2 matmuls x 2 heads x 4 x 4 x 4 = 256, no halo
    figures = [
        (1, 128, 96),   # Q 32 + K^T 32 + S 32 + A 32 = 128; reads 32 + 32 + 32
        (2, 96, 160),   # Q 16 + K^T 32 + S 16 + A 32 = 96; reads 32 + 2 x 32 + 2 x 32
        (4, 80, 288),   # Q 8 + K^T 32 + S 8 + A 32 = 80; reads 32 + 4 x 32 + 4 x 32
    ]
    for tiles, need, act in figures:
        t = brr.tile_cost(layer, ops, tiles, _hw("row"))
        assert (t.buffer_elems, t.act_read_elems, t.weight_read_elems, t.macs) == (
            need, act, 0, 256)
        assert t.allowance_elems == 32 and t.weights == ()
        # positions S, x 0.5, softmax, P V: the scores' positions hold two score bands + A
        band = 32 // tiles
        assert brr.position_needs(layer, ops, t)[:, 0].tolist() == [
            need, 2 * band + 32, 2 * band + 32, need]
    # the search (T_max = 4: counts 1, 2, 4): F_D = act reads + O written (32 B)
    for buffer, tiles, need, dram in [
            (128, 1, 128, 128),  # T = 1 fits: 96 + 32
            (96, 2, 96, 192),    # T = 1 needs 128 > 96; T = 2 (160 + 32) beats T = 4 (288 + 32)
            (80, 4, 80, 320)]:   # only T = 4 fits: 288 + 32
        config = replace(_hw("row"), buffer_bytes=buffer)
        cost = brr.group_cost(layer, ops, config)
        assert (cost.fits, cost.tiles, cost.buffer_bytes, cost.dram_bytes, cost.dram_write) == (
            True, tiles, need, dram, 32)
        plan = PartitionPlan.of([ops] + [[op.id] for op in layer if op.id not in ops])
        report = simulate(layer, plan, config, "brr", record=False)
        (group,) = [g for g in report.groups if g.ops == ops]
        assert (group.tiles, group.dram_bytes, group.peak_buffer_bytes) == (tiles, dram, need)
        assert group.dram_read == {"permute": 32, "transpose": 32 * tiles,
                                   "permute_2": 32 * tiles}
    short = brr.group_cost(layer, ops, replace(_hw("row"), buffer_bytes=79))
    assert (short.fits, short.tiles, short.buffer_bytes) == (False, 4, 80)
    assert short.reason == "needs 80 B at best (4 tiles) > buffer 79 B"
