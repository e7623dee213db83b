"""Whole networks imported with their own weights run in the executor to the module's output:
torchvision's ResNet-18, MobileNetV2 and EfficientNet-B0, and every zoo network (CNNs at
64 x 64, the ViTs at 64 x 64, BERT on 16 tokens)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from simulator.workload.execute import execute
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import TORCHVISION_WARNING, import_torchvision, load
from simulator.workload.torch_import import from_torch_with_params
from simulator.workload.zoo import DECODER, ZOO

FAST_ZOO = ("squeezenet1_1", "mobilenet_v3_small", "deeplabv3_mobilenet_v3_large", "deit_s")
TORCHVISION = ("resnet18", "mobilenet_v2", "efficientnet_b0")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _torchvision():
    try:
        return import_torchvision()
    except ImportError:
        pytest.skip("torchvision is not installed")


def _with_statistics(module: nn.Module, seed: int) -> nn.Module:
    """`module` in eval mode with non-trivial BatchNorm statistics and BatchNorm and LayerNorm
    affine parameters (fresh ones are the identity, which would let a wrong BatchNorm fold or
    a norm imported without its scale and shift pass)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.normal_(generator=gen)
            elif isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.normal_(generator=gen)
    return module.eval()


def _assert_runs_like(module: nn.Module, shape: tuple[int, ...]) -> None:
    graph, params = from_torch_with_params(module, shape)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = module(x)
    if isinstance(ref, dict):  # segmentation models return {"out": ...}
        ref = ref["out"]
    (y,) = execute(graph, params, x)
    assert y.shape == ref.shape
    assert float((y - ref).abs().max()) <= 1e-4 * float(ref.abs().max())


@pytest.mark.parametrize("shape", [(1, 3, 64, 64),
                                   pytest.param((1, 3, 224, 224), marks=pytest.mark.slow)],
                         ids=["64", "224"])
@pytest.mark.parametrize("name", TORCHVISION)
def test_torchvision_model_with_its_weights(name, shape):
    tv = _torchvision()
    torch.manual_seed(0)
    _assert_runs_like(_with_statistics(getattr(tv.models, name)(), seed=2), shape)


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in FAST_ZOO else pytest.mark.slow)
                                  for n in ZOO if ZOO[n].kind != DECODER])  # test_decoder.py
def test_zoo_network_with_its_weights(name):
    entry = ZOO[name]
    shape = entry.shape_at((16,) if entry.family == "bert" else (64,))
    torch.manual_seed(0)
    _assert_runs_like(_with_statistics(entry.build(shape), seed=3), shape)


def test_torchvision_model_loads_by_module_callable_name():
    module = _torchvision().models.efficientnet_b0()
    graph = load("torchvision.models:efficientnet_b0", (1, 3, 64, 64))
    assert graph.name == "efficientnet_b0"
    # StochasticDepth is an alias at inference; every BatchNorm (2C) folds into a bias (C).
    bn_channels = sum(m.num_features for m in module.modules() if isinstance(m, nn.BatchNorm2d))
    assert graph.total_weights == sum(p.numel() for p in module.parameters()) - bn_channels
    assert len(graph) == 190


@pytest.mark.slow
def test_cli_inspects_a_torchvision_model_with_at_most_one_warning():
    _torchvision()
    done = subprocess.run(
        [sys.executable, "-m", "fusion_dse", "inspect", "torchvision.models:resnet18",
         "--input-shape", "1,3,32,32", "--format", "json"],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert ComputeGraph.from_json(done.stdout).name == "resnet18"
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warnings) <= 1
    assert all(TORCHVISION_WARNING in line for line in warnings)
