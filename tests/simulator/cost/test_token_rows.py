"""Token-streamed execution (docs/cost-model.md, "Token-streamed execution"): the row axes of a
tiny encoder layer and the worked example's F_beta and F_D, derived by hand."""

from __future__ import annotations

import pytest
import torch

from simulator.cost import lbdf
from simulator.cost.rows import row_deps
from simulator.hw import HardwareConfig
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
