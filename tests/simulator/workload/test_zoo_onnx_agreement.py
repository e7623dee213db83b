"""A zoo graph and the graph imported from its ONNX export agree op for op (both exporters)."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings

import pytest
import torch
from torch import nn

from simulator.workload.compare import graph_differences
from simulator.workload.loader import load_zoo, zoo_module
from simulator.workload.onnx_import import from_onnx
from simulator.workload.zoo import ZOO

FAST = ("resnet18", "mobilenet_v2", "efficientnet_b0")
CASES = [pytest.param(n, marks=() if n in FAST else pytest.mark.slow) for n in ZOO]


def _export(name: str, path, dynamo: bool) -> None:
    module = zoo_module(name).eval()
    # Non-zero BN statistics: with the fresh zeros, the dynamo exporter drops the all-zero
    # folded bias, a constant-folding artefact rather than a structural difference.
    gen = torch.Generator().manual_seed(0)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.normal_(generator=gen)
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
    assert len(imported) == len(zoo)
    assert all(i < j for i, j in imported.edges())


def test_comparison_notices_a_different_network(tmp_path):
    assert graph_differences(load_zoo("resnet18"), load_zoo("resnet18", (1, 3, 128, 128))) != []
    assert graph_differences(load_zoo("squeezenet1_0"), load_zoo("squeezenet1_1")) != []
