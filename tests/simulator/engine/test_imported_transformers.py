"""Imported networks with the transformer kinds (`OpKind.NORM`, `OpKind.MATMUL`) through the
analytic models (what `fusion-dse evaluate` reports) and the simulator: the DRAM bytes agree
exactly and each group's peak equals its F_beta, group by group, for a ViT-like model,
ConvNeXt-T and tiny zoo transformers (token rows streamed), and in the slow tier for
bert_base, deit_s and vit_b_16."""

from __future__ import annotations

import random

import pytest
import torch

from simulator.cost import CostCache, evaluate_plan
from simulator.engine import simulate
from simulator.plan import layer_by_layer
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.loader import load
from simulator.workload.torch_import import from_torch
from simulator.workload.zoo.bert import BertEncoder
from simulator.workload.zoo.vit import VisionTransformer
from tests.simulator.engine.test_simulate import fitting_segments, hw
from tests.simulator.workload.conftest import torchvision_or_skip

pytestmark = pytest.mark.usefixtures("one_torch_thread")


_GRAPHS: dict[str, ComputeGraph] = {}


def _graph(name: str) -> ComputeGraph:
    """A tiny torchvision ViT (32 px, 2 layers, 2 heads, width 16), ConvNeXt-T at 64 px, the
    zoo's tiny BERT (2 post-norm layers of width 8, 2 heads, 8 tokens) and ViT (32 px, patch
    8, 2 layers, width 16), or a zoo transformer (``load`` name)."""
    if name not in _GRAPHS and name.startswith("zoo-"):
        torch.manual_seed(0)
        if name == "zoo-bert":
            module, shape = BertEncoder(2, 8, 2, 16).eval(), (1, 8, 8)
        else:
            module, shape = VisionTransformer(32, 8, 2, 2, 16, 32, 10).eval(), (1, 3, 32, 32)
        _GRAPHS[name] = from_torch(module, shape, name=name)
    if name not in _GRAPHS and name not in ("vit", "convnext"):
        _GRAPHS[name] = load(name)
    if name not in _GRAPHS:
        tv = torchvision_or_skip()
        torch.manual_seed(0)
        if name == "vit":
            module, shape = tv.models.VisionTransformer(32, 8, 2, 2, 16, 32), (1, 3, 32, 32)
        else:
            module, shape = tv.models.convnext_tiny(), (1, 3, 64, 64)
        _GRAPHS[name] = from_torch(module, shape, name=name)
    return _GRAPHS[name]




_SETTINGS = [("lbdf", "pixel"), ("lbdf", "row"), ("brr", "pixel"), ("lbl", "pixel")]
CASES = [(name, *s) for name in ("vit", "convnext", "zoo-bert", "zoo-vit") for s in _SETTINGS]
SLOW = [(name, *s) for name in ("bert_base", "deit_s", "vit_b_16") for s in _SETTINGS]


@pytest.mark.parametrize(("name", "scheme", "granularity"), CASES,
                         ids=["-".join(c) for c in CASES])
def test_simulation_moves_the_analytic_dram_bytes(name, scheme, granularity):
    _agree(name, scheme, granularity, 64 * 1024)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "scheme", "granularity"), SLOW,
                         ids=["-".join(c) for c in SLOW])
def test_zoo_transformers_simulate_as_analysed(name, scheme, granularity):
    _agree(name, scheme, granularity, 2 * 1024 * 1024, longest=6)


def _agree(name: str, scheme: str, granularity: str, buffer: int, longest: int = 10) -> None:
    """DRAM bytes per group and in all, and each group's peak, equal in the analytic model
    and the simulator, on a plan of random fitting segments."""
    graph = _graph(name)
    assert graph.count(OpKind.NORM) and (name == "convnext" or graph.count(OpKind.MATMUL))
    config = hw(buffer, lbdf_buffer=granularity)
    cache = CostCache(graph, config, scheme)
    plan = layer_by_layer(graph) if scheme == "lbl" else \
        fitting_segments(graph, cache, random.Random(0), longest)
    analytic = evaluate_plan(graph, plan, config, scheme, cache)
    assert analytic.valid
    fused = [g.ops for g in plan.groups if len(g.ops) > 1]
    if scheme != "lbl":  # groups holding the new kinds are fused
        kinds = {graph[o].kind for ops in fused for o in ops}
        assert OpKind.NORM in kinds and (name == "convnext" or OpKind.MATMUL in kinds)
    report = simulate(graph, plan, config, scheme, record=False)
    assert [g.dram_bytes for g in report.groups] == \
        [analytic.groups[g.index].dram_bytes for g in report.groups]
    assert report.dram_bytes == analytic.dram_bytes
    assert [g.peak_buffer_bytes for g in report.groups] == \
        [analytic.groups[g.index].buffer_bytes for g in report.groups]


@pytest.mark.slow
def test_long_sequences_run_token_ops_tiled_on_their_own():
    """bert_base at 512 tokens on 128 KiB, layer by layer: the attention products (12 heads of
    512 x 512 scores, 3 MiB) run head by head (they ran whole, so no plan could run), the
    softmaxes and LayerNorms stream their rows or run in chunks of lines, nothing runs whole,
    and the simulator agrees byte for byte."""
    from simulator.cost.lbl import LoopOrder, layer_tiling

    graph = _graph("bert_base@512")
    config = hw(128 * 1024)
    orders: dict[OpKind, set[LoopOrder]] = {}
    for op in graph:
        orders.setdefault(op.kind, set()).add(layer_tiling(graph, op.id, config).order)
    assert orders[OpKind.MATMUL] == {LoopOrder.HEADS}
    assert orders[OpKind.SOFTMAX] | orders[OpKind.NORM] <= {LoopOrder.STREAM, LoopOrder.CHUNKS}
    assert LoopOrder.WHOLE not in set().union(*orders.values())
    _agree("bert_base@512", "lbl", "pixel", 128 * 1024)
