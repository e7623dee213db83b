"""The IR executor: each op kind on tiny hand-built graphs against torch's functional calls."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from simulator.errors import InputError
from simulator.workload.builder import GraphBuilder
from simulator.workload.execute import (
    ExecutionError,
    activation_text,
    apply_activation,
    execute,
    param_shapes,
    random_params,
)
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.ops import ACTIVATIONS

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _x(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _one_op(in_shape, out_shape, kind, op_type, **fields) -> ComputeGraph:
    b = GraphBuilder("t")
    b.add_input("x", in_shape)
    b.add_op("op", kind, op_type, ["x"], out_shape, **fields)
    return b.build(["op"])


def _run(g: ComputeGraph, x: torch.Tensor, params=None) -> torch.Tensor:
    return execute(g, params if params is not None else random_params(g, 1), x)[0]


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape
    scale = max(1.0, float(b.abs().max()))
    assert float((a - b).abs().max()) <= 1e-5 * scale


# --- convolution and linear --------------------------------------------------------------------


@pytest.mark.parametrize(("groups", "c_out", "bias"), [(1, 6, True), (2, 6, False), (4, 8, True)])
def test_conv_with_groups_dilation_and_asymmetric_padding(groups, c_out, bias):
    x = _x(1, 4, 9, 10)
    kernel, stride, dilation, pad = (3, 2), (2, 1), (2, 1), (1, 0, 2, 1)
    ho = (9 + 1 + 2 - 2 * 2 - 1) // 2 + 1
    wo = (10 + 0 + 1 - 1 * 1 - 1) // 1 + 1
    w_numel = c_out * (4 // groups) * 6
    kind = OpKind.DWCONV if groups == 4 else OpKind.CONV
    g = _one_op((1, 4, 9, 10), (1, c_out, ho, wo), kind, "conv", kernel=kernel, stride=stride,
                dilation=dilation, padding=pad, groups=groups,
                weight_elems=w_numel + (c_out if bias else 0))
    p = random_params(g, 3)
    assert ("bias" in p["op"]) == bias
    ref = F.conv2d(F.pad(x, (0, 1, 1, 2)), p["op"]["weight"], p["op"].get("bias"),
                   stride=stride, dilation=dilation, groups=groups)
    _close(_run(g, x, p), ref)


def test_conv_padding_mode_is_honoured():
    x = _x(1, 2, 5, 5)
    g = _one_op((1, 2, 5, 5), (1, 3, 5, 5), OpKind.CONV, "conv", kernel=(3, 3),
                padding=(1, 1, 1, 1), weight_elems=54, attrs={"padding_mode": "reflect"})
    p = random_params(g, 0)
    ref = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), p["op"]["weight"])
    _close(_run(g, x, p), ref)


def test_linear_on_last_axis_with_and_without_bias():
    x = _x(2, 3, 5)
    for bias in (True, False):
        g = _one_op((2, 3, 5), (2, 3, 4), OpKind.LINEAR, "linear",
                    weight_elems=20 + (4 if bias else 0))
        p = random_params(g, 0)
        _close(_run(g, x, p), F.linear(x, p["op"]["weight"], p["op"].get("bias")))


# --- pooling -----------------------------------------------------------------------------------


@pytest.mark.parametrize("ceil", [False, True])
@pytest.mark.parametrize("op_type", ["max", "avg"])
def test_pool_ceil_mode_symmetric_padding(op_type, ceil):
    x = _x(1, 3, 8, 8)
    fn = F.max_pool2d if op_type == "max" else F.avg_pool2d
    ref = fn(x, 3, 2, 1, ceil_mode=ceil)
    g = _one_op((1, 3, 8, 8), tuple(ref.shape), OpKind.POOL, op_type, kernel=(3, 3),
                stride=(2, 2), padding=(1, 1, 1, 1), attrs={"ceil_mode": ceil})
    _close(_run(g, x), ref)


def test_avg_pool_count_include_pad_false():
    x = _x(1, 2, 6, 6)
    ref = F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
    g = _one_op((1, 2, 6, 6), (1, 2, 6, 6), OpKind.POOL, "avg", kernel=(3, 3),
                padding=(1, 1, 1, 1), attrs={"count_include_pad": False})
    _close(_run(g, x), ref)


@pytest.mark.parametrize("include_pad", [True, False])
def test_asymmetric_pool_padding_matches_explicit_padding(include_pad):
    x = _x(1, 2, 7, 7)
    padded = F.pad(x, (0, 1, 0, 1))
    ref_max = F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=-math.inf), 3, 2)
    g_max = _one_op((1, 2, 7, 7), tuple(ref_max.shape), OpKind.POOL, "max", kernel=(3, 3),
                    stride=(2, 2), padding=(0, 0, 1, 1))
    _close(_run(g_max, x), ref_max)
    sums = F.avg_pool2d(padded, 3, 2, divisor_override=1)
    mask = F.pad(torch.ones(1, 1, 7, 7), (0, 1, 0, 1), value=1.0 if include_pad else 0.0)
    ref_avg = sums / F.avg_pool2d(mask, 3, 2, divisor_override=1)
    g_avg = _one_op((1, 2, 7, 7), tuple(ref_avg.shape), OpKind.POOL, "avg", kernel=(3, 3),
                    stride=(2, 2), padding=(0, 0, 1, 1),
                    attrs={"count_include_pad": include_pad})
    _close(_run(g_avg, x), ref_avg)


def test_adaptive_and_global_pools():
    x = _x(1, 3, 7, 9)
    g = _one_op((1, 3, 7, 9), (1, 3, 3, 4), OpKind.POOL, "avg", kernel=(3, 3), stride=(2, 2),
                attrs={"adaptive": True})
    _close(_run(g, x), F.adaptive_avg_pool2d(x, (3, 4)))
    g = _one_op((1, 3, 7, 9), (1, 3, 1, 1), OpKind.GLOBAL_POOL, "max", kernel=(7, 9),
                stride=(7, 9))
    _close(_run(g, x), torch.amax(x, (2, 3), keepdim=True))
    g = _one_op((1, 3, 7, 9), (1, 3), OpKind.GLOBAL_POOL, "avg", kernel=(7, 9), stride=(7, 9))
    _close(_run(g, x), x.mean((2, 3)))


# --- elementwise -------------------------------------------------------------------------------

_ACTIVATION_REFS = {
    "relu": (F.relu, {}), "relu6": (F.relu6, {}),
    "hardtanh": (lambda x: F.hardtanh(x, 0.0, 6.0), {"min_val": 0.0, "max_val": 6.0}),
    "clip": (lambda x: x.clamp(-0.5, 0.25), {"min_val": -0.5, "max_val": 0.25}),
    "hardswish": (F.hardswish, {}), "hardsigmoid": (F.hardsigmoid, {}),
    "sigmoid": (torch.sigmoid, {}), "silu": (F.silu, {}), "tanh": (torch.tanh, {}),
    "gelu": (lambda x: F.gelu(x, approximate="tanh"), {"approximate": "tanh"}),
    "elu": (lambda x: F.elu(x, 0.5), {"alpha": 0.5}),
    "leakyrelu": (lambda x: F.leaky_relu(x, 0.2), {"negative_slope": 0.2}),
    "mish": (F.mish, {}), "softplus": (lambda x: F.softplus(x, 2.0), {"beta": 2.0}),
    "selu": (F.selu, {}), "exp": (torch.exp, {}), "log": (lambda x: torch.log(x.abs()), {}),
    "sqrt": (lambda x: torch.sqrt(x.abs()), {}), "neg": (torch.neg, {}), "abs": (torch.abs, {}),
    "erf": (torch.erf, {}), "reciprocal": (torch.reciprocal, {}),
    "celu": (lambda x: F.celu(x, 0.7), {"alpha": 0.7}), "softsign": (F.softsign, {}),
    "tanhshrink": (F.tanhshrink, {}), "logsigmoid": (F.logsigmoid, {}),
    "hardshrink": (lambda x: F.hardshrink(x, 0.25), {"lambd": 0.25}),
    "softshrink": (lambda x: F.softshrink(x, 0.75), {"lambd": 0.75}),
    "threshold": (lambda x: F.threshold(x, 0.1, 2.0), {"threshold": 0.1, "value": 2.0}),
}


@pytest.mark.parametrize("op_type", sorted(set(ACTIVATIONS.values()) - {"prelu"}))
def test_every_activation_as_op_and_as_text(op_type):
    fn, attrs = _ACTIVATION_REFS[op_type]
    x = _x(1, 4, 3, 3)
    if op_type in ("log", "sqrt"):
        x = x.abs() + 0.1
    g = _one_op((1, 4, 3, 3), (1, 4, 3, 3), OpKind.ELTWISE_UNARY, op_type, attrs=attrs)
    _close(_run(g, x, {}), fn(x))
    text = activation_text(g[0])
    assert text == (op_type if not attrs else f"{op_type}(" + ",".join(
        f"{k}={v}" for k, v in sorted(attrs.items())) + ")")
    _close(apply_activation(text, x), fn(x))


def test_activation_text_parses_spellings_and_rejects_garbage():
    x = _x(8)
    _close(apply_activation("hardtanh(max_val=6.0,min_val=0.0)", x), F.relu6(x))
    _close(apply_activation("leaky_relu(negative_slope=0.3)", x), F.leaky_relu(x, 0.3))
    _close(apply_activation("swish", x), F.silu(x))
    for bad in ("nosuchthing", "relu(", "relu(x)", "", "clip(min_val=0.0,,)"):
        with pytest.raises(ExecutionError):
            apply_activation(bad, x)


def test_threshold_needs_both_parameters():
    x = _x(10)
    _close(apply_activation("threshold(threshold=0.5,value=-1.0)", x), F.threshold(x, 0.5, -1.0))
    with pytest.raises(ExecutionError, match="threshold needs"):
        apply_activation("threshold(threshold=0.5)", x)


def test_hardsigmoid_with_onnx_parameters():
    x = _x(10)
    _close(apply_activation("hardsigmoid(alpha=0.2,beta=0.5)", x), (0.2 * x + 0.5).clamp(0, 1))


def test_prelu_uses_its_slopes():
    x = _x(1, 3, 4, 4)
    g = _one_op((1, 3, 4, 4), (1, 3, 4, 4), OpKind.ELTWISE_UNARY, "prelu", weight_elems=3)
    p = random_params(g, 0)
    _close(_run(g, x, p), F.prelu(x, p["op"]["weight"]))
    with pytest.raises(ExecutionError, match="parameter tensor"):
        activation_text(g[0])


@pytest.mark.parametrize("op_type", ["add", "sub", "mul", "div", "pow", "max", "min"])
def test_binary_ops_broadcast(op_type):
    b = GraphBuilder("t")
    b.add_input("a", (1, 4, 3, 3))
    b.add_input("s", (1, 4, 1, 1))
    b.add_op("op", OpKind.ELTWISE_BINARY, op_type, ["s", "a"], (1, 4, 3, 3))
    g = b.build(["op"])
    a, s = _x(1, 4, 3, 3).abs() + 0.5, _x(1, 4, 1, 1, seed=1).abs() + 0.5
    fn = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
          "pow": torch.pow, "max": torch.maximum, "min": torch.minimum}[op_type]
    _close(execute(g, {}, [a, s])[0], fn(s, a))


@pytest.mark.parametrize("side", ["left", "right"])
def test_constant_operands_scalar_and_tensor(side):
    x = _x(1, 4, 3, 3)
    g = _one_op((1, 4, 3, 3), (1, 4, 3, 3), OpKind.ELTWISE_UNARY, "sub",
                attrs={"scalar": 2.5, "const_side": side})
    _close(_run(g, x, {}), 2.5 - x if side == "left" else x - 2.5)
    assert activation_text(g[0]) == f"sub(const_side={side},scalar=2.5)"
    g = _one_op((1, 4, 3, 3), (1, 4, 3, 3), OpKind.ELTWISE_UNARY, "div", weight_elems=4,
                attrs={"const_shape": (4, 1, 1), "const_side": side})
    p = random_params(g, 0)
    c = p["op"]["const"]
    assert c.shape == (4, 1, 1) and float(c.min()) >= 0.5
    _close(_run(g, x, p), c / x if side == "left" else x / c)


def test_arithmetic_without_a_recorded_constant_is_an_error():
    g = _one_op((1, 4), (1, 4), OpKind.ELTWISE_UNARY, "mul", weight_elems=3)
    with pytest.raises(ExecutionError, match="'op'"):
        random_params(g, 0)


def test_standalone_batchnorm():
    x = _x(1, 3, 4, 4)
    g = _one_op((1, 3, 4, 4), (1, 3, 4, 4), OpKind.BATCHNORM, "batchnorm", weight_elems=6,
                macs=48)
    p = random_params(g, 0)
    scale, shift = p["op"]["scale"], p["op"]["shift"]
    assert float((scale - 1).abs().max()) <= 0.2
    _close(_run(g, x, p), x * scale.view(1, 3, 1, 1) + shift.view(1, 3, 1, 1))


# --- data movement -----------------------------------------------------------------------------


def test_concat_axis_and_slice():
    b = GraphBuilder("t")
    b.add_input("a", (1, 2, 4, 4))
    b.add_input("b", (1, 3, 4, 4))
    b.add_op("cat", OpKind.CONCAT, "concat", ["a", "b"], (1, 5, 4, 4), attrs={"axis": 1})
    b.add_op("w", OpKind.CONCAT, "concat", ["a", "a"], (1, 2, 4, 8), attrs={"axis": -1})
    b.add_op("sl", OpKind.SLICE, "slice", ["cat"], (1, 2, 4, 4),
             attrs={"axis": 1, "start": 1, "end": 5, "step": 2})
    b.add_op("sl2", OpKind.SLICE, "slice", ["w"], (1, 2, 2, 3),
             attrs={"axis": (2, 3), "start": (1, 2), "end": (3, 8), "step": (1, 2)})
    b.add_op("pick", OpKind.SLICE, "slice", ["a"], (1, 4, 4),
             attrs={"axis": 1, "start": 1, "end": 2, "step": 1})
    g = b.build(["sl", "sl2", "pick"])
    a, c = _x(1, 2, 4, 4), _x(1, 3, 4, 4, seed=1)
    sl, sl2, pick = execute(g, {}, [a, c])
    _close(sl, torch.cat([a, c], 1)[:, 1:5:2])
    _close(sl2, torch.cat([a, a], -1)[:, :, 1:3, 2:8:2])
    _close(pick, a[:, 1])


def test_slice_without_bounds_is_an_error():
    g = _one_op((1, 4, 2, 2), (1, 2, 2, 2), OpKind.SLICE, "slice")
    with pytest.raises(ExecutionError, match="start/end"):
        _run(g, _x(1, 4, 2, 2))


@pytest.mark.parametrize(("mode", "align"), [("nearest", False), ("bilinear", False),
                                             ("bilinear", True), ("bicubic", False)])
def test_resize(mode, align):
    x = _x(1, 2, 5, 6)
    attrs = {"mode": mode, **({"align_corners": True} if align else {})}
    g = _one_op((1, 2, 5, 6), (1, 2, 10, 9), OpKind.RESIZE, "resize", attrs=attrs)
    kwargs = {} if mode == "nearest" else {"align_corners": align}
    _close(_run(g, x), F.interpolate(x, size=(10, 9), mode=mode, **kwargs))


@pytest.mark.parametrize(("mode", "value"), [("constant", 0.0), ("constant", 1.5),
                                             ("reflect", 0.0), ("replicate", 0.0),
                                             ("circular", 0.0)])
def test_pad_modes(mode, value):
    x = _x(1, 2, 5, 5)
    attrs = {**({"mode": mode} if mode != "constant" else {}), **({"value": value} if value
                                                                 else {})}
    g = _one_op((1, 2, 5, 5), (1, 2, 8, 6), OpKind.PAD, "pad", padding=(1, 0, 2, 1),
                attrs=attrs)
    ref = F.pad(x, (0, 1, 1, 2), mode=mode, **({"value": value} if mode == "constant" else {}))
    _close(_run(g, x), ref)


def test_reshape_flatten_and_transposes():
    x = _x(1, 8, 2, 3)
    g = _one_op((1, 8, 2, 3), (1, 48), OpKind.RESHAPE, "flatten")
    _close(_run(g, x), x.flatten(1))
    g = _one_op((1, 8, 2, 3), (1, 2, 3, 8), OpKind.TRANSPOSE, "permute",
                attrs={"perm": (0, 2, 3, 1)})
    _close(_run(g, x), x.permute(0, 2, 3, 1))
    g = _one_op((1, 8, 2, 3), (1, 2, 4, 6), OpKind.TRANSPOSE, "pixelshuffle",
                attrs={"upscale_factor": 2})
    _close(_run(g, x), F.pixel_shuffle(x, 2))
    g = _one_op((1, 8, 2, 4), (1, 32, 1, 2), OpKind.TRANSPOSE, "pixel_unshuffle",
                attrs={"downscale_factor": 2})
    y = _x(1, 8, 2, 4)
    _close(_run(g, y), F.pixel_unshuffle(y, 2))
    g = _one_op((1, 8, 2, 3), (1, 8, 2, 3), OpKind.TRANSPOSE, "channel_shuffle",
                attrs={"groups": 2})
    _close(_run(g, x), x.view(1, 2, 4, 2, 3).transpose(1, 2).reshape(1, 8, 2, 3))


def test_softmax_axes_and_log():
    x = _x(2, 3, 4)
    g = _one_op((2, 3, 4), (2, 3, 4), OpKind.SOFTMAX, "softmax", attrs={"axis": 1})
    _close(_run(g, x), F.softmax(x, 1))
    g = _one_op((2, 3, 4), (2, 3, 4), OpKind.SOFTMAX, "softmax", attrs={"log": True})
    _close(_run(g, x), F.log_softmax(x, -1))
    g = _one_op((2, 3, 4), (2, 3, 4), OpKind.SOFTMAX, "softmax", attrs={"axis": (1, 2)})
    _close(_run(g, x), F.softmax(x.reshape(2, 12), 1).reshape(2, 3, 4))


# --- graph-level behaviour ---------------------------------------------------------------------


def test_epilogue_applied_in_order():
    x = _x(1, 2, 4, 4)
    g = _one_op((1, 2, 4, 4), (1, 3, 4, 4), OpKind.CONV, "conv", weight_elems=9,
                attrs={"epilogue": ("mul(const_side=right,scalar=-3.0)",
                                    "hardtanh(max_val=6.0,min_val=0.0)")})
    p = random_params(g, 0)
    y = _run(g, x, p)
    _close(y, F.relu6(-3.0 * F.conv2d(x, p["op"]["weight"], p["op"]["bias"])))


def test_random_params_deterministic_per_seed_and_name():
    b = GraphBuilder("t")
    b.add_input("x", (1, 3, 8, 8))
    b.add_op("c1", OpKind.CONV, "conv", ["x"], (1, 4, 8, 8), kernel=(3, 3),
             padding=(1, 1, 1, 1), weight_elems=112)
    b.add_op("bn", OpKind.BATCHNORM, "batchnorm", ["c1"], (1, 4, 8, 8), weight_elems=8)
    b.add_op("fc", OpKind.LINEAR, "linear", ["bn"], (1, 4, 8, 5), weight_elems=40)
    g = b.build(["fc"])
    a, again, other = random_params(g, 7), random_params(g, 7), random_params(g, 8)
    assert set(a) == {"c1", "bn", "fc"} and set(a["fc"]) == {"weight"}
    for name in a:
        for key in a[name]:
            assert torch.equal(a[name][key], again[name][key])
            assert tuple(a[name][key].shape) == param_shapes(g[g.id_of(name)])[key]
    assert not torch.equal(a["c1"]["weight"], other["c1"]["weight"])
    x = _x(1, 3, 8, 8)
    assert torch.equal(execute(g, a, x)[0], execute(g, again, x)[0])
    assert float(execute(g, a, x)[0].abs().mean()) < 10  # values stay O(1)


def test_opaque_op_is_an_execution_error_naming_it():
    b = GraphBuilder("t")
    b.add_input("x", (1, 2, 4, 4))
    b.add_op("r", OpKind.ELTWISE_UNARY, "relu", ["x"], (1, 2, 4, 4))
    b.add_op("mystery", OpKind.OPAQUE, "roialign", ["r"], (1, 2, 4, 4))
    g = b.build(["mystery"])
    with pytest.raises(ExecutionError, match="'mystery'.*opaque") as err:
        execute(g, {}, _x(1, 2, 4, 4))
    assert isinstance(err.value, InputError)


def test_bad_inputs_and_params_are_execution_errors():
    g = _one_op((1, 2, 4, 4), (1, 3, 4, 4), OpKind.CONV, "conv", weight_elems=6)
    p = random_params(g, 0)
    with pytest.raises(ExecutionError, match="shape"):
        execute(g, p, _x(1, 2, 5, 4))
    with pytest.raises(ExecutionError, match="1 input"):
        execute(g, p, [_x(1, 2, 4, 4), _x(1, 2, 4, 4)])
    with pytest.raises(ExecutionError, match="'op'.*'weight'"):
        execute(g, {}, _x(1, 2, 4, 4))
    with pytest.raises(ExecutionError, match="'op'.*parameter 'weight' has shape"):
        execute(g, {"op": {"weight": torch.zeros(3, 2, 3, 3)}}, _x(1, 2, 4, 4))
    wrong = _one_op((1, 2, 4, 4), (1, 3, 5, 4), OpKind.CONV, "conv", weight_elems=6)
    with pytest.raises(ExecutionError, match="'op'.*records"):
        execute(wrong, p, _x(1, 2, 4, 4))


def test_outputs_in_graph_order_and_multiple_inputs():
    b = GraphBuilder("t")
    b.add_input("a", (1, 2))
    b.add_input("b", (1, 2))
    b.add_op("s", OpKind.ELTWISE_BINARY, "sub", ["a", "b"], (1, 2))
    b.add_op("r", OpKind.ELTWISE_UNARY, "relu", ["s"], (1, 2))
    g = b.build(["r", "s"])
    a, c = torch.tensor([[1.0, -1.0]]), torch.tensor([[0.5, 0.5]])
    r, s = execute(g, {}, (a, c))
    assert torch.equal(s, a - c) and torch.equal(r, F.relu(a - c))
