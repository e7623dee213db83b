"""The torch.fx front end: zoo graphs, BatchNorm folding, functional ops, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from simulator.workload.errors import InputShapeError, UnsupportedOpError
from simulator.workload.graph import MappingType, OpKind
from simulator.workload.loader import load_zoo, zoo_module
from simulator.workload.torch_import import fold_batchnorm, from_torch, trace
from simulator.workload.zoo import DECODER, ZOO


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)
                                  if n in ("vit_b_16", "bert_base") else n for n in ZOO
                                  if ZOO[n].kind != DECODER])  # torch.export: test_decoder.py
def test_zoo_graph_is_topologically_numbered_and_consistent(name):
    g = load_zoo(name)
    assert all(i < j for i, j in g.edges())
    assert [op.id for op in g] == list(range(len(g)))
    assert g.outputs and all(o < len(g) for o in g.outputs)
    assert g.count(OpKind.BATCHNORM) == 0  # every BN of the zoo follows a conv
    assert g.count(OpKind.OPAQUE) == 0
    module = zoo_module(name)
    params = sum(p.numel() for p in module.parameters())
    bn_channels = sum(m.num_features for m in module.modules() if isinstance(m, nn.BatchNorm2d))
    # every zoo BN follows a bias-free conv: folding trades gamma and beta (2C) for a bias (C)
    assert g.total_weights == params - bn_channels


def test_known_mac_counts():
    # torchvision's published GFLOPS (as GMACs): resnet50 4.09, mobilenet_v2 0.30, vgg16 15.47
    assert round(load_zoo("resnet50").total_macs / 1e9, 2) == 4.09
    assert round(load_zoo("mobilenet_v2").total_macs / 1e9, 2) == 0.30
    assert round(load_zoo("vgg16").total_macs / 1e9, 2) == 15.47


def test_resnet18_structure():
    g = load_zoo("resnet18")
    assert g.count(OpKind.CONV) == 20
    adds = [op for op in g if op.kind is OpKind.ELTWISE_BINARY]
    assert len(adds) == 8 and all(len(g.predecessors(op.id)) == 2 for op in adds)
    assert g[0].kind is OpKind.CONV and g[0].kernel == (7, 7) and g[0].stride == (2, 2)
    assert g[0].padding == (3, 3, 3, 3)
    fc = g[g.outputs[0]]
    assert fc.kind is OpKind.LINEAR and fc.weight_elems == 512 * 1000 + 1000


def test_squeeze_excitation_multiply_is_one_to_many():
    g = load_zoo("mobilenet_v3_large")
    se_muls = [op for op in g if op.kind is OpKind.ELTWISE_BINARY and op.op_type == "mul"]
    assert se_muls and all(op.mapping is MappingType.ONE_TO_MANY for op in se_muls)
    dw = [op for op in g if op.kind is OpKind.DWCONV]
    assert dw and all(op.groups == op.input_shapes[0][1] for op in dw)


def test_deeplab_is_dilated_with_output_stride_16():
    g = load_zoo("deeplabv3_mobilenet_v3_large")
    assert any(op.dilation == (2, 2) for op in g if op.kind is OpKind.DWCONV)
    assert {op.dilation for op in g if op.kind is OpKind.CONV} >= {(12, 12), (24, 24), (36, 36)}
    assert g[g.outputs[0]].output_shape == (1, 21, 513, 513)
    assert g.count(OpKind.RESIZE) == 2


def test_resolution_override_changes_shapes_not_weights():
    base, big = load_zoo("resnet50"), load_zoo("resnet50", (1, 3, 320, 320))
    assert big.total_weights == base.total_weights
    gap = next(op for op in big if op.kind is OpKind.GLOBAL_POOL)
    assert gap.input_shapes[0] == (1, 2048, 10, 10)
    assert big.total_macs > base.total_macs


class ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.side = nn.Conv2d(8, 8, 1)
        self.bn_shared = nn.BatchNorm2d(8)

    def forward(self, x):
        y = self.act(self.bn(self.conv(x)))
        z = self.bn2(self.conv2(y))
        s = self.side(z)
        return self.bn_shared(s) + s  # side conv has two consumers: its BN is not folded


def _randomise_bn(model: nn.Module) -> nn.Module:
    gen = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen))
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.randn(m.num_features, generator=gen))
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen))
    return model.eval()


def test_bn_folding_keeps_outputs_and_removes_only_bn_macs():
    model = _randomise_bn(ConvBN())
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    folded = fold_batchnorm(trace(model))
    with torch.no_grad():
        torch.testing.assert_close(folded(x), model(x), rtol=1e-4, atol=1e-4)
    g_fold = from_torch(model, (2, 3, 16, 16))
    g_raw = from_torch(model, (2, 3, 16, 16), fold_bn=False)
    bn_ops = [op for op in g_raw if op.kind is OpKind.BATCHNORM]
    assert len(bn_ops) == 3 and g_fold.count(OpKind.BATCHNORM) == 1
    folded_bn_macs = sum(op.macs for op in bn_ops) - sum(
        op.macs for op in g_fold if op.kind is OpKind.BATCHNORM)
    assert g_raw.total_macs - folded_bn_macs == g_fold.total_macs
    assert g_fold.total_macs == sum(op.macs for op in g_raw if op.kind is not OpKind.BATCHNORM) \
        + math.prod((2, 8, 8, 8))  # the unfolded shared BN: one MAC per output element
    assert g_fold[0].weight_elems == 3 * 8 * 9 + 8  # the folded conv gained a bias


def test_bn_folding_on_a_zoo_network_keeps_outputs():
    model = _randomise_bn(zoo_module("mobilenet_v3_small"))
    x = torch.randn(1, 3, 96, 96, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(fold_batchnorm(trace(model))(x), model(x),
                                   rtol=1e-3, atol=1e-3)


class Functional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding="same")
        self.w = nn.Parameter(torch.randn(10, 8))

    def forward(self, x):
        y = torch.nn.functional.relu(self.conv(x))
        a, b = torch.chunk(y, 2, dim=1)
        y = torch.cat([a * 0.5, torch.sigmoid(b)], dim=1)
        y = torch.nn.functional.max_pool2d(y, 2)
        y = torch.nn.functional.interpolate(y, scale_factor=2.0, mode="nearest")
        y = y.mean((2, 3))
        return torch.nn.functional.linear(y, self.w)


def test_functional_calls_map_to_ir_ops():
    g = from_torch(Functional(), (1, 4, 8, 8))
    kinds = [op.kind for op in g]
    assert kinds == [OpKind.CONV, OpKind.ELTWISE_UNARY, OpKind.SLICE, OpKind.SLICE,
                     OpKind.ELTWISE_UNARY, OpKind.ELTWISE_UNARY, OpKind.CONCAT, OpKind.POOL,
                     OpKind.RESIZE, OpKind.GLOBAL_POOL, OpKind.LINEAR]
    assert g[0].padding == (1, 1, 1, 1)
    assert g[7].kernel == (2, 2) and g[7].stride == (2, 2)
    assert g[10].weight_elems == 80 and g[10].macs == 80


def test_wrong_input_shape_is_reported():
    with pytest.raises(InputShapeError, match="does not fit model 'resnet18'"):
        from_torch(zoo_module("resnet18"), (1, 4, 224, 224), name="resnet18")
    with pytest.raises(InputShapeError, match="positive"):
        from_torch(zoo_module("resnet18"), (1, 0, 224, 224))
    with pytest.raises(InputShapeError, match="not a comma-separated"):
        from_torch(zoo_module("resnet18"), "1,3,a,224")


class WithLSTMCell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.odd = nn.Conv3d(1, 1, 1)

    def forward(self, x):
        return self.odd(self.conv(x).unsqueeze(1))


def test_unsupported_op_is_named_or_imported_opaque_with_a_warning():
    with pytest.raises(UnsupportedOpError, match="Conv3d.*'odd'.*--allow-opaque"):
        from_torch(WithLSTMCell(), (1, 3, 4, 4))
    with pytest.warns(UserWarning, match="opaque: Conv3d"):
        g = from_torch(WithLSTMCell(), (1, 3, 4, 4), allow_opaque=True)
    assert g[g.outputs[0]].kind is OpKind.OPAQUE and g[g.outputs[0]].weight_elems == 2


class DataDependent(nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x


def test_untraceable_model_is_reported():
    with pytest.raises(UnsupportedOpError, match="cannot trace"):
        from_torch(DataDependent(), (1, 3, 4, 4))
