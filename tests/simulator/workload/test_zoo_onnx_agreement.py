"""A zoo graph and the graph imported from its ONNX export agree op for op (both exporters).

The default tier exports ResNet-18, MobileNetV2 and EfficientNet-B0 with the legacy exporter and
ResNet-18 with the dynamo one (a whole network: its head and every block); the dynamo exports of
MobileNetV2 and EfficientNet-B0 (several CPU seconds each) are checked there on their first
blocks and head (depthwise convolutions, ReLU6, SiLU, squeeze-and-excitation, residual adds)
and in full in the slow tier, with the rest of the zoo."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings

import pytest
import torch
from torch import nn

from simulator.workload.compare import ELEMENTWISE_KINDS, graph_differences
from simulator.workload.graph import OpKind
from simulator.workload.loader import load_zoo, zoo_module
from simulator.workload.onnx_import import from_onnx
from simulator.workload.torch_import import from_torch
from simulator.workload.zoo import CNN, DECODER, ZOO

FAST = ("resnet18", "mobilenet_v2", "efficientnet_b0")
FAST_DYNAMO = ("resnet18",)
CASES = [pytest.param(n, dynamo, marks=() if n in (FAST_DYNAMO if dynamo else FAST)
                      else pytest.mark.slow, id=f"{n}-{'dynamo' if dynamo else 'legacy'}")
         for n in ZOO if ZOO[n].kind != DECODER  # token ids and a KV cache: not one float input
         for dynamo in (False, True)]
BLOCKS = {"mobilenet_v2": 4, "efficientnet_b0": 4}
"""The leading feature blocks of the networks whose whole dynamo export is slow-tier only."""


def _export(name: str, path, dynamo: bool) -> None:
    _export_module(zoo_module(name), ZOO[name].input_shape, path, dynamo)


def _export_module(module: nn.Module, input_shape, path, dynamo: bool) -> None:
    module = module.eval()
    # Non-zero BN statistics and LayerNorm affines: with the fresh zeros (and ones), the
    # exporters drop the all-zero folded bias and write the LayerNorm scale and shift as
    # constants (no affine), artefacts of constant folding rather than structural differences.
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(generator=gen)
            elif isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.normal_(generator=gen)
    x = torch.randn(input_shape, generator=gen)
    kwargs = {"external_data": False} if dynamo else {}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(module, (x,), str(path), dynamo=dynamo, **kwargs)
        finally:
            logging.disable(logging.NOTSET)


@pytest.mark.parametrize(("name", "dynamo"), CASES)
def test_zoo_graph_agrees_with_its_onnx_export(name, dynamo, tmp_path):
    path = tmp_path / f"{name}.onnx"
    _export(name, path, dynamo)
    zoo, imported = load_zoo(name), from_onnx(path)
    assert graph_differences(zoo, imported) == []
    assert imported.total_weights == zoo.total_weights
    assert imported.total_macs == zoo.total_macs
    if ZOO[name].kind == CNN:
        assert len(imported) == len(zoo)
    else:  # exporters write a linear on tokens as MatMul + Add and merge K's two transposes
        assert {k: zoo.count(k) for k in set(OpKind) - ELEMENTWISE_KINDS} == {
            k: imported.count(k) for k in set(OpKind) - ELEMENTWISE_KINDS}
    assert all(i < j for i, j in imported.edges())


@pytest.mark.parametrize("name", BLOCKS)
def test_first_blocks_and_head_agree_with_their_dynamo_export(name, tmp_path):
    full = zoo_module(name)
    module = nn.Sequential(full.features[:BLOCKS[name]], full.avgpool, nn.Flatten(1))
    shape = (1, 3, 64, 64)
    path = tmp_path / f"{name}-blocks.onnx"
    _export_module(module, shape, path, dynamo=True)
    graph, imported = from_torch(module, shape, name=name), from_onnx(path)
    assert graph_differences(graph, imported) == []
    assert imported.total_weights == graph.total_weights
    assert imported.total_macs == graph.total_macs and len(imported) == len(graph)
    kinds = {op.kind for op in graph.ops}
    assert {OpKind.DWCONV, OpKind.ELTWISE_BINARY, OpKind.GLOBAL_POOL} <= kinds
    assert all(i < j for i, j in imported.edges())


def test_comparison_notices_a_different_network(tmp_path):
    assert graph_differences(load_zoo("resnet18"), load_zoo("resnet18", (1, 3, 128, 128))) != []
    assert graph_differences(load_zoo("squeezenet1_0"), load_zoo("squeezenet1_1")) != []
