"""Every op of [workloads] item 1 that needs no new cost semantics imports, and runs in the IR
executor to torch's own output: identities at inference, activation variants, permute / reshape
chains, the channel-shuffle pattern, adaptive pooling of any size, softmax on any axis; tuple
results no IR op computes are refused by name."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from simulator.workload.errors import UnsupportedOpError
from simulator.workload.execute import execute
from simulator.workload.graph import OpKind
from simulator.workload.onnx_import import from_onnx_with_params
from simulator.workload.torch_import import from_torch, from_torch_with_params

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Wrap(nn.Module):
    """``body(x * 2)``: the scaling is one op, so an identity body leaves exactly that op."""

    def __init__(self, body: nn.Module | Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x * 2.0)


def L(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    return fn


X4 = (2, 4, 6, 6)
X3 = (2, 4, 6)

# (id, body, input shape, the (kind, op_type) of the ops after the scaling)
IDENTITIES = [
    ("Dropout", nn.Dropout(0.3), X4), ("Dropout1d", nn.Dropout1d(), X3),
    ("Dropout2d", nn.Dropout2d(), X4), ("Dropout3d", nn.Dropout3d(), (2, 4, 3, 6, 6)),
    ("AlphaDropout", nn.AlphaDropout(0.2), X4),
    ("FeatureAlphaDropout", nn.FeatureAlphaDropout(0.2), X4), ("Identity", nn.Identity(), X4),
    ("F.dropout", L(lambda x: F.dropout(x, 0.2, training=False)), X4),
    ("F.dropout1d", L(lambda x: F.dropout1d(x, training=False)), X3),
    ("F.dropout2d", L(lambda x: F.dropout2d(x, training=False)), X4),
    ("F.dropout3d", L(lambda x: F.dropout3d(x, training=False)), (2, 4, 3, 6, 6)),
    ("F.alpha_dropout", L(lambda x: F.alpha_dropout(x, 0.1, training=False)), X4),
    ("F.feature_alpha_dropout", L(lambda x: F.feature_alpha_dropout(x, 0.1, False)), X4),
    ("torch.dropout", L(lambda x: torch.dropout(x, 0.1, False)), X4),
    ("torch.feature_dropout", L(lambda x: torch.feature_dropout(x, 0.1, False)), X4),
    ("torch.detach", L(torch.detach), X4), ("Tensor.detach", L(lambda x: x.detach()), X4),
    ("contiguous", L(lambda x: x.contiguous()), X4), ("clone", L(lambda x: x.clone()), X4),
    ("to/double/float", L(lambda x: x.to(torch.float32).double().float()), X4),
    ("identity permute", L(lambda x: x.permute(0, 1, 2, 3)), X4),
    ("same-size adaptive pool", nn.AdaptiveAvgPool2d(6), X4),
]

U = OpKind.ELTWISE_UNARY
ACTIVATIONS = [
    ("GELU", nn.GELU(), (U, "gelu"), {}),
    ("GELU tanh", nn.GELU(approximate="tanh"), (U, "gelu"), {"approximate": "tanh"}),
    ("F.gelu tanh", L(lambda x: F.gelu(x, approximate="tanh")), (U, "gelu"),
     {"approximate": "tanh"}),
    ("Mish", nn.Mish(), (U, "mish"), {}), ("F.mish", L(F.mish), (U, "mish"), {}),
    ("SiLU", nn.SiLU(), (U, "silu"), {}), ("Hardswish", nn.Hardswish(), (U, "hardswish"), {}),
    ("Hardsigmoid", nn.Hardsigmoid(), (U, "hardsigmoid"), {}),
    ("ELU", nn.ELU(0.5), (U, "elu"), {"alpha": 0.5}),
    ("SELU", nn.SELU(), (U, "selu"), {}), ("torch.selu", L(torch.selu), (U, "selu"), {}),
    ("CELU", nn.CELU(0.7), (U, "celu"), {"alpha": 0.7}),
    ("F.celu", L(lambda x: F.celu(x, alpha=0.3)), (U, "celu"), {"alpha": 0.3}),
    ("LeakyReLU", nn.LeakyReLU(0.2), (U, "leakyrelu"), {"negative_slope": 0.2}),
    ("F.leaky_relu_", L(lambda x: F.leaky_relu_(x, 0.3)), (U, "leakyrelu"),
     {"negative_slope": 0.3}),
    ("PReLU", nn.PReLU(4, 0.1), (U, "prelu"), {}),
    ("RReLU", nn.RReLU(0.1, 0.3), (U, "leakyrelu"), {"negative_slope": 0.2}),
    ("F.rrelu", L(lambda x: F.rrelu(x, 0.2, 0.4)), (U, "leakyrelu"),
     {"negative_slope": pytest.approx(0.3)}),
    ("Softplus", nn.Softplus(2.0, 10.0), (U, "softplus"), {"beta": 2.0, "threshold": 10.0}),
    ("Softsign", nn.Softsign(), (U, "softsign"), {}),
    ("F.softsign", L(F.softsign), (U, "softsign"), {}),
    ("Tanhshrink", nn.Tanhshrink(), (U, "tanhshrink"), {}),
    ("LogSigmoid", nn.LogSigmoid(), (U, "logsigmoid"), {}),
    ("Hardshrink", nn.Hardshrink(0.3), (U, "hardshrink"), {"lambd": 0.3}),
    ("Tensor.hardshrink", L(lambda x: x.hardshrink(0.2)), (U, "hardshrink"), {"lambd": 0.2}),
    ("Softshrink", nn.Softshrink(0.2), (U, "softshrink"), {"lambd": 0.2}),
    ("Threshold", nn.Threshold(0.1, 2.0), (U, "threshold"), {"threshold": 0.1, "value": 2.0}),
    ("F.threshold", L(lambda x: F.threshold(x, -0.5, 0.0)), (U, "threshold"),
     {"threshold": -0.5, "value": 0.0}),
    ("torch.erf", L(torch.erf), (U, "erf"), {}),
    ("Tensor.log_", L(lambda x: x.abs().add(0.1).log_()), (U, "log"), {}),
]

T = OpKind.TRANSPOSE
R = OpKind.RESHAPE
CHAINS = [
    ("permute, flatten", L(lambda x: x.permute(0, 2, 3, 1).flatten(1)), X4,
     [(T, "permute"), (R, "flatten")]),
    ("view, transpose, view, reshape",
     L(lambda x: x.view(2, 2, 2, 36).transpose(1, 3).contiguous().view(2, -1).reshape(4, 72)),
     X4, [(R, "view"), (T, "transpose"), (R, "view"), (R, "reshape")]),
    ("swapaxes", L(lambda x: x.swapaxes(1, 2)), X4, [(T, "transpose")]),
    ("torch.swapdims", L(lambda x: torch.swapdims(x, 0, 3)), X4, [(T, "transpose")]),
    ("movedim", L(lambda x: x.movedim((1, 2), (3, 0))), X4, [(T, "permute")]),
    ("torch.moveaxis", L(lambda x: torch.moveaxis(x, 0, -1)), X4, [(T, "permute")]),
    ("mT", L(lambda x: x.mT), X4, [(T, "transpose")]),
    ("T of a matrix", L(lambda x: x.flatten(1).T), X4, [(R, "flatten"), (T, "permute")]),
    ("torch.t", L(lambda x: torch.t(x.flatten(1))), X4, [(R, "flatten"), (T, "transpose")]),
    ("unflatten", L(lambda x: x.unflatten(1, (2, 2))), X4, [(R, "unflatten")]),
    ("torch.unflatten", L(lambda x: torch.unflatten(x, -1, (3, -1))), X4, [(R, "unflatten")]),
]

P, G, S = OpKind.POOL, OpKind.GLOBAL_POOL, OpKind.SOFTMAX
POOLS_SOFTMAX = [
    ("adaptive avg 1", nn.AdaptiveAvgPool2d(1), (G, "avg"), {}),
    ("adaptive avg 4 of 6", nn.AdaptiveAvgPool2d(4), (P, "avg"), {"adaptive": True}),
    ("adaptive max (2, 5)", nn.AdaptiveMaxPool2d((2, 5)), (P, "max"), {"adaptive": True}),
    ("adaptive avg (5, None)", nn.AdaptiveAvgPool2d((5, None)), (P, "avg"), {"adaptive": True}),
    ("F.adaptive_max_pool2d 3", L(lambda x: F.adaptive_max_pool2d(x, 3)), (P, "max"),
     {"adaptive": True}),
    *[(f"Softmax({d})", nn.Softmax(d), (S, "softmax"), {"axis": d % 4}) for d in (0, 1, 2, 3)],
    ("Softmax(-1)", nn.Softmax(-1), (S, "softmax"), {"axis": 3}),
    ("Softmax2d", nn.Softmax2d(), (S, "softmax"), {"axis": 1}),
    ("Tensor.softmax(-2)", L(lambda x: x.softmax(-2)), (S, "softmax"), {"axis": 2}),
    ("F.log_softmax(0)", L(lambda x: F.log_softmax(x, 0)), (S, "softmax"),
     {"axis": 0, "log": True}),
]


def _run(body, shape: tuple[int, ...]):
    module = Wrap(body).eval()
    graph, params = from_torch_with_params(module, shape)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = module(x)
    (y,) = execute(graph, params, x)
    assert y.shape == ref.shape
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-6)
    assert graph[0].op_type == "mul"
    return graph


@pytest.mark.parametrize(("body", "shape"), [c[1:] for c in IDENTITIES],
                         ids=[c[0] for c in IDENTITIES])
def test_identities_at_inference_are_dropped(body, shape):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Dropout3d on an unbatched input warns
        graph = _run(body, shape)
    assert len(graph) == 1


@pytest.mark.parametrize(("body", "expected", "attrs"), [c[1:] for c in ACTIVATIONS],
                         ids=[c[0] for c in ACTIVATIONS])
def test_activation_variants_import_with_their_parameters(body, expected, attrs):
    graph = _run(body, X4)
    op = graph[len(graph) - 1]
    assert (op.kind, op.op_type) == expected
    assert {k: v for k, v in op.attrs if k != "epilogue"} == attrs


@pytest.mark.parametrize(("body", "shape", "expected"), [c[1:] for c in CHAINS],
                         ids=[c[0] for c in CHAINS])
def test_permute_and_reshape_chains(body, shape, expected):
    graph = _run(body, shape)
    assert [(op.kind, op.op_type) for op in graph][1:] == expected


@pytest.mark.parametrize(("body", "expected", "attrs"), [c[1:] for c in POOLS_SOFTMAX],
                         ids=[c[0] for c in POOLS_SOFTMAX])
def test_adaptive_pooling_of_any_size_and_softmax_on_any_axis(body, expected, attrs):
    graph = _run(body, X4)
    op = graph[1]
    assert len(graph) == 2 and (op.kind, op.op_type) == expected
    assert {k: v for k, v in op.attrs if k in attrs} == attrs


def _shuffle(x: torch.Tensor, groups: int = 2) -> torch.Tensor:
    """torchvision's ShuffleNetV2 channel_shuffle."""
    n, c, h, w = x.size()
    x = x.view(n, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(n, c, h, w)


def test_shufflenet_channel_shuffle_becomes_one_op():
    graph = _run(_shuffle, X4)
    assert [(op.kind, op.op_type, op.attr("groups")) for op in graph][1:] == [
        (T, "channel_shuffle", 2)]


def test_channel_shuffle_whose_intermediate_is_read_elsewhere_stays_three_ops():
    class Odd(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            split = (x * 2.0).view(2, 2, 2, 6, 6)
            return split.transpose(1, 2).reshape(2, 4, 6, 6), split

    graph = from_torch(Odd(), X4)
    assert [op.op_type for op in graph][1:] == ["view", "transpose", "reshape"]


def test_matmul_with_a_constant_matrix_is_linear():
    class Proj(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(6, 5))
            self.register_buffer("v", torch.randn(5, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.matmul(x @ self.w, self.v)

    module = Proj()
    graph, params = from_torch_with_params(module, X4)
    assert [(op.kind, op.weight_elems, op.macs) for op in graph] == [
        (OpKind.LINEAR, 30, 2 * 4 * 6 * 5 * 6), (OpKind.LINEAR, 15, 2 * 4 * 6 * 3 * 5)]
    x = torch.randn(X4)
    torch.testing.assert_close(execute(graph, params, x)[0], module(x).detach())


def test_product_with_a_constant_first_operand_is_refused_by_name():
    class Left(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(6, 6))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.w @ x

    with pytest.raises(UnsupportedOpError, match="unsupported op matmul"):
        from_torch(Left(), X4)


def test_tuple_results_no_ir_op_computes_are_refused_by_name():
    """nn.MultiheadAttention whose averaged attention weights are read (no IR op computes
    them) was silently dropped before (its getitem refused instead); torch.max(x, dim) returns
    (values, indices): it was sliced silently."""
    class Attend(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(6, 2, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, weights = self.attn(x, x, x)
            return out[..., :4] * weights

    class Max(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.max(x, 1)[0] + 1.0

    with pytest.raises(UnsupportedOpError, match="unsupported op MultiheadAttention at node"):
        from_torch(Attend(), X3)
    with pytest.raises(UnsupportedOpError, match="unsupported op max at node"):
        from_torch(Max(), X4)
    with pytest.warns(UserWarning, match="opaque"):
        graph = from_torch(Attend(), X3, allow_opaque=True)
    assert [(op.kind, op.op_type, op.output_shape) for op in graph][:2] == [
        (OpKind.OPAQUE, "multiheadattention", X3), (OpKind.OPAQUE, "multiheadattention",
                                                    (2, 4, 4))]
    assert graph[0].weight_elems == sum(p.numel() for p in Attend().parameters())


def test_concat_with_a_constant_operand_counts_its_weights():
    class Token(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.token = nn.Parameter(torch.zeros(1, 1, 6))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([self.token.expand(x.shape[0], -1, -1), x * 2.0], dim=1)

    cat = from_torch(Token(), X3)[1]
    assert cat.kind is OpKind.CONCAT and cat.weight_elems == 2 * 6


# --- ONNX ---------------------------------------------------------------------------------------


def _onnx_one(tmp_path, nodes, inits=(), shape=X4, out_shape=X4, opset=13):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        initializer=list(inits))
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return from_onnx_with_params(path)


ONNX_ACTIVATIONS = [
    ("Celu", {"alpha": 0.6}, "celu", lambda x: F.celu(x, 0.6)),
    ("Softsign", {}, "softsign", F.softsign),
    ("ThresholdedRelu", {"alpha": 0.4}, "threshold", lambda x: F.threshold(x, 0.4, 0.0)),
    ("Shrink", {"lambd": 0.3}, "hardshrink", lambda x: F.hardshrink(x, 0.3)),
    ("Shrink", {"lambd": 0.3, "bias": 0.3}, "softshrink", lambda x: F.softshrink(x, 0.3)),
]


@pytest.mark.parametrize(("op", "attrs", "op_type", "ref"), ONNX_ACTIVATIONS,
                         ids=[f"{c[0]}-{c[2]}" for c in ONNX_ACTIVATIONS])
def test_onnx_activations(tmp_path, op, attrs, op_type, ref):
    graph, params = _onnx_one(tmp_path, [helper.make_node(op, ["x"], ["y"], **attrs)])
    assert [o.op_type for o in graph] == [op_type]
    x = torch.randn(X4)
    torch.testing.assert_close(execute(graph, params, x)[0], ref(x))


def test_onnx_shrink_with_another_bias_is_refused(tmp_path):
    node = helper.make_node("Shrink", ["x"], ["y"], lambd=0.3, bias=0.1)
    with pytest.raises(UnsupportedOpError, match="Shrink.*neither 0"):
        _onnx_one(tmp_path, [node])


def _shuffle_nodes(perm: list[int]) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    inits = [numpy_helper.from_array(np.array([2, 2, 2, 6, 6], np.int64), "split"),
             numpy_helper.from_array(np.array(X4, np.int64), "back")]
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "split"], ["a"]),
             helper.make_node("Transpose", ["a"], ["b"], perm=perm),
             helper.make_node("Reshape", ["b", "back"], ["y"])]
    return nodes, inits


def test_onnx_channel_shuffle_pattern_becomes_one_op(tmp_path):
    nodes, inits = _shuffle_nodes([0, 2, 1, 3, 4])
    graph, params = _onnx_one(tmp_path, nodes, inits)
    assert [(o.op_type, o.attr("groups")) for o in graph] == [("relu", None),
                                                              ("channel_shuffle", 2)]
    x = torch.randn(X4)
    torch.testing.assert_close(execute(graph, params, x)[0], _shuffle(F.relu(x)))


def test_onnx_reshape_transpose_reshape_of_another_permutation_is_kept(tmp_path):
    nodes, inits = _shuffle_nodes([0, 1, 2, 4, 3])
    graph, params = _onnx_one(tmp_path, nodes, inits)
    assert [o.op_type for o in graph] == ["relu", "reshape", "transpose", "reshape"]
    x = torch.randn(X4)
    ref = F.relu(x).reshape(2, 2, 2, 6, 6).permute(0, 1, 2, 4, 3).reshape(X4)
    torch.testing.assert_close(execute(graph, params, x)[0], ref)


def test_onnx_softmax_on_any_axis(tmp_path):
    for axis in (0, 2, -1):
        graph, params = _onnx_one(tmp_path, [helper.make_node("Softmax", ["x"], ["y"],
                                                              axis=axis)])
        assert graph[0].attr("axis") == axis % 4
        x = torch.randn(X4)
        torch.testing.assert_close(execute(graph, params, x)[0], F.softmax(x, axis))


def test_rrelu_slope_is_the_mean_of_its_bounds():
    assert math.isclose(from_torch(Wrap(nn.RReLU(0.1, 0.5)), X4)[1].attr("negative_slope"),
                        0.3)


def test_indexing_with_sizes_slices_and_with_a_tensor_is_refused():
    """``x[:, : x.size(1) // 2]`` is basic indexing (it had no bounds before); a parameter table
    indexed by a buffer (MaxViT's relative position bias) is a constant, not an op; indexing an
    activation by a tensor is a gather, refused by name."""
    class Sizes(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = nn.Parameter(torch.randn(10, 6))
            self.register_buffer("rows", torch.tensor([1, 2, 3, 4, 5, 6]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.bias = self.table[self.rows]  # traced, but computed from constants only
            return x[:, : x.size(1) // 2] * 2.0

    class Gather(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("perm", torch.tensor([3, 0, 2, 1]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 2.0)[:, self.perm]

    module = Sizes()
    graph, params = from_torch_with_params(module, X4)
    assert [(op.op_type, op.attr("end")) for op in graph] == [("slice", 2), ("mul", None)]
    x = torch.randn(X4)
    torch.testing.assert_close(execute(graph, params, x)[0], module(x).detach())
    with pytest.raises(UnsupportedOpError, match="unsupported op getitem"):
        from_torch(Gather(), X4)


@pytest.mark.slow
def test_torchvision_shufflenet_v2_has_one_op_per_channel_shuffle_and_runs_like_the_module():
    from simulator.workload.loader import import_torchvision

    try:
        tv = import_torchvision()
    except ImportError:
        pytest.skip("torchvision is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = tv.models.shufflenet_v2_x0_5(weights=None).eval()
    shape = (1, 3, 64, 64)
    graph, params = from_torch_with_params(module, shape)
    shuffles = [op for op in graph if op.op_type == "channel_shuffle"]
    assert len(shuffles) == 16 and all(op.attr("groups") == 2 for op in shuffles)
    assert all(len(op.output_shape) <= 4 for op in graph)  # no rank-5 intermediates
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = module(x)
    torch.testing.assert_close(execute(graph, params, x)[0], ref, rtol=1e-4, atol=1e-4)
