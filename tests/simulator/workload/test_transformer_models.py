"""torchvision's ConvNeXt-T and Vision Transformers import through `from_torch` with the
module's parameters and run in the IR executor to the module's output; their ONNX exports do
too (ConvNeXt-T op for op as `from_torch` imports it)."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from simulator.workload.compare import graph_differences
from simulator.workload.execute import execute
from simulator.workload.graph import OpKind
from simulator.workload.onnx_import import from_onnx_with_params
from simulator.workload.torch_import import from_torch, from_torch_with_params
from tests.simulator.workload.conftest import torchvision_or_skip

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _nontrivial(module: nn.Module) -> nn.Module:
    """`module` in eval mode with its zero or tiny parameters redrawn: torchvision's ViT head is
    zero (its output would be the bias only) and ConvNeXt's layer scales are 1e-6 (every block
    would be nearly the identity), either of which would let a wrong import pass."""
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in module.parameters():
            if float(p.abs().max()) < 1e-3:
                p.copy_(torch.rand(p.shape, generator=g) * 0.4 - 0.2)
    return module.eval()


def _params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _runs_like(graph, params, module: nn.Module, shape: tuple[int, ...]) -> None:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = module(x)
    (y,) = execute(graph, params, x)
    assert y.shape == ref.shape
    assert float((y - ref).abs().max()) <= 1e-4 * float(ref.abs().max())


def tiny_vit(tv) -> nn.Module:
    """torchvision's VisionTransformer at 32 px: patches of 8, 2 layers, 2 heads, width 16."""
    torch.manual_seed(0)
    return _nontrivial(tv.models.VisionTransformer(32, 8, 2, 2, 16, 32, num_classes=10))


@pytest.fixture(scope="module")
def convnext():
    torch.manual_seed(0)
    return _nontrivial(torchvision_or_skip().models.convnext_tiny())


def test_convnext_tiny_imports_with_its_parameters_and_runs_like_the_module(convnext):
    shape = (1, 3, 64, 64)
    graph, params = from_torch_with_params(convnext, shape)
    assert graph.total_weights == _params(convnext)  # no BatchNorm: nothing folds
    norms = [op for op in graph if op.kind is OpKind.NORM]
    # 18 blocks and 3 downsamplings (on NHWC after a permute, axis 3), the stem and the head
    assert len(norms) == 23 and all(op.op_type == "layernorm" for op in norms)
    assert {op.attr("axes") for op in norms} == {(3,)}
    _runs_like(graph, params, convnext, shape)


def test_tiny_vision_transformer_is_its_primitives_and_runs_like_the_module():
    module = tiny_vit(torchvision_or_skip())
    shape = (1, 3, 32, 32)
    graph, params = from_torch_with_params(module, shape)
    # the class token and the position embedding are constant operands: weights (at the
    # shape they are used: the token expanded to a batch of N counts N times)
    assert graph.total_weights == _params(module)
    counts = {k: graph.count(k) for k in (OpKind.NORM, OpKind.MATMUL, OpKind.SOFTMAX,
                                          OpKind.LINEAR)}
    # per layer 2 norms, Q K^T and P V, 1 softmax, 4 attention and 2 MLP linears; the final
    # norm and the head
    assert counts == {OpKind.NORM: 5, OpKind.MATMUL: 4, OpKind.SOFTMAX: 2, OpKind.LINEAR: 13}
    concat = next(op for op in graph if op.kind is OpKind.CONCAT)
    assert concat.attr("const_at") == (0,) and concat.weight_elems == 16
    _runs_like(graph, params, module, shape)
    graph, params = from_torch_with_params(module, (2, 3, 32, 32))
    _runs_like(graph, params, module, (2, 3, 32, 32))


def test_onnx_export_of_the_tiny_vision_transformer_runs_like_the_module(tmp_path):
    """The exporter writes attention with shapes computed at run time and the class token
    expanded from a shape: those constants are folded."""
    module = tiny_vit(torchvision_or_skip())
    shape = (1, 3, 32, 32)
    path = tmp_path / "vit.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, torch.randn(shape), path, dynamo=False, opset_version=17)
    graph, params = from_onnx_with_params(path)
    assert graph.total_weights == from_torch(module, shape).total_weights == _params(module)
    assert graph.count(OpKind.MATMUL) == 4 and graph.count(OpKind.NORM) == 5
    _runs_like(graph, params, module, shape)


@pytest.mark.slow
def test_onnx_export_of_convnext_tiny_imports_op_for_op_as_from_torch(tmp_path, convnext):
    shape = (1, 3, 64, 64)
    path = tmp_path / "convnext.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(convnext, torch.randn(shape), path, dynamo=False, opset_version=17)
    graph, params = from_onnx_with_params(path)
    assert graph_differences(from_torch(convnext, shape), graph) == []
    _runs_like(graph, params, convnext, shape)


@pytest.mark.slow
def test_vit_b_16_imports_with_its_parameters_and_runs_like_the_module():
    torch.manual_seed(0)
    module = _nontrivial(torchvision_or_skip().models.vit_b_16())
    shape = (1, 3, 224, 224)
    graph, params = from_torch_with_params(module, shape)
    assert graph.total_weights == _params(module)
    assert graph.count(OpKind.MATMUL) == 24 and graph.count(OpKind.NORM) == 25
    _runs_like(graph, params, module, shape)
