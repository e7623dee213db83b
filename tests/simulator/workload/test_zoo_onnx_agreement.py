"""A zoo graph and the graph imported from its ONNX export agree op for op (both exporters)."""

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
from simulator.workload.zoo import CNN, ZOO

FAST = ("resnet18", "mobilenet_v2", "efficientnet_b0")
CASES = [pytest.param(n, marks=() if n in FAST else pytest.mark.slow) for n in ZOO]


def _export(name: str, path, dynamo: bool) -> None:
    module = zoo_module(name).eval()
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
    x = torch.randn(ZOO[name].input_shape, generator=gen)
    kwargs = {"external_data": False} if dynamo else {}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(module, (x,), str(path), dynamo=dynamo, **kwargs)
        finally:
            logging.disable(logging.NOTSET)


@pytest.mark.parametrize("dynamo", [False, True], ids=["legacy", "dynamo"])
@pytest.mark.parametrize("name", CASES)
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


def test_comparison_notices_a_different_network(tmp_path):
    assert graph_differences(load_zoo("resnet18"), load_zoo("resnet18", (1, 3, 128, 128))) != []
    assert graph_differences(load_zoo("squeezenet1_0"), load_zoo("squeezenet1_1")) != []
