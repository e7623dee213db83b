"""PyTorch front end: an `nn.Module` traced with torch.fx into a `ComputeGraph`.

Tracing works at module granularity: each leaf module (conv, batchnorm, activation, pool, linear,
...) and each tensor function (add, mul, cat, flatten, interpolate, ...) becomes one op; dropout,
identity and no-op reshapes are removed. BatchNorm that directly follows a convolution with no
other consumer is folded into it numerically (`fold_batchnorm`), as ONNX inference exports do.
Shapes come from running the traced module once, node by node, on a random input.
"""

from __future__ import annotations

import copy
import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from simulator import limits
from simulator.workload.builder import GraphBuilder
from simulator.workload.errors import InputShapeError, UnsupportedOpError
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.ops import (
    ACTIVATIONS,
    adaptive_window,
    conv_kind,
    conv_macs,
    is_identity_window,
    linear_macs,
)

__all__ = ["check_input_shape", "fold_batchnorm", "from_torch", "trace"]

_ALIAS = object()  # an op that forwards its input unchanged (dropout, identity, same-shape view)

_BINARY_FUNCS: dict[Any, str] = {
    operator.add: "add", operator.iadd: "add", torch.add: "add",
    operator.sub: "sub", operator.isub: "sub", torch.sub: "sub",
    operator.mul: "mul", operator.imul: "mul", torch.mul: "mul",
    operator.truediv: "div", operator.itruediv: "div", torch.div: "div",
}
_BINARY_METHODS = {"add": "add", "add_": "add", "sub": "sub", "sub_": "sub", "mul": "mul",
                   "mul_": "mul", "div": "div", "div_": "div"}
_ACT_FUNCS: dict[Any, str] = {
    torch.relu: "relu", F.relu: "relu", F.relu6: "relu6", F.hardswish: "hardswish",
    F.hardsigmoid: "hardsigmoid", F.silu: "silu", torch.sigmoid: "sigmoid",
    F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh", F.gelu: "gelu",
    F.leaky_relu: "leakyrelu", F.elu: "elu", F.hardtanh: "hardtanh", F.mish: "mish",
    F.softplus: "softplus", torch.exp: "exp", torch.sqrt: "sqrt", torch.abs: "abs",
    torch.neg: "neg",
}
_ACT_METHODS = {"relu", "relu_", "sigmoid", "sigmoid_", "tanh", "exp", "sqrt", "abs", "neg"}
_RESHAPE_FUNCS = {torch.flatten: "flatten", torch.reshape: "reshape", torch.squeeze: "squeeze",
                  torch.unsqueeze: "unsqueeze"}
_RESHAPE_METHODS = {"view", "reshape", "flatten", "squeeze", "unsqueeze", "view_as",
                    "reshape_as", "expand_as"}
_ALIAS_METHODS = {"contiguous", "clone", "detach", "to", "float", "type_as", "cpu"}
_ALIAS_FUNCS = {F.dropout, F.dropout2d, torch.clone}
_CAT_FUNCS = {torch.cat, torch.concat, torch.concatenate}
_TRANSPOSE_FUNCS = {torch.transpose, torch.permute, F.pixel_shuffle, F.pixel_unshuffle,
                    torch.channel_shuffle}
_SPLIT_FUNCS = {torch.chunk, torch.split, torch.tensor_split, torch.unbind}
_SPLIT_METHODS = {"chunk", "split", "tensor_split", "unbind"}


def check_input_shape(shape: Sequence[int] | str) -> tuple[int, ...]:
    """Parse and validate an input shape such as ``(1, 3, 224, 224)`` or ``"1,3,224,224"``."""
    text = shape if isinstance(shape, str) else ",".join(str(s) for s in shape)
    try:
        dims = tuple(int(s) for s in text.replace("x", ",").split(","))
    except ValueError:
        raise InputShapeError(f"input shape {text!r} is not a comma-separated list of "
                              "integers (expected N,C,H,W such as 1,3,224,224)") from None
    if not dims or any(d <= 0 for d in dims):
        raise InputShapeError(f"input shape {text!r} must have positive dimensions")
    return limits.check_input_size(dims, text, InputShapeError)


def trace(module: nn.Module, name: str = "model") -> fx.GraphModule:
    """Symbolically trace `module` (a deep copy, in eval mode) with torch.fx."""
    model = copy.deepcopy(module).eval()
    try:
        return fx.symbolic_trace(model)
    except Exception as err:  # torch.fx raises many types for untraceable code
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UnsupportedOpError(
            f"cannot trace model {name!r} with torch.fx ({type(err).__name__}: {first}); "
            "data-dependent control flow is not supported, export it to ONNX instead"
        ) from err


def fold_batchnorm(gm: fx.GraphModule) -> fx.GraphModule:
    """Fold each BatchNorm2d that directly follows a Conv2d with no other consumer into it.

    Returns a new GraphModule whose outputs equal the original's in eval mode (up to rounding);
    the input is not modified.
    """
    gm = copy.deepcopy(gm).eval()
    modules = dict(gm.named_modules())
    for node in list(gm.graph.nodes):
        conv_node = _foldable_conv(node, modules)
        if conv_node is None:
            continue
        fused = fuse_conv_bn_eval(modules[conv_node.target], modules[node.target])
        _set_submodule(gm, conv_node.target, fused)
        modules[conv_node.target] = fused
        node.replace_all_uses_with(conv_node)
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    return gm


def _foldable_conv(node: fx.Node, modules: dict[str, nn.Module]) -> fx.Node | None:
    if node.op != "call_module" or not isinstance(modules[node.target], nn.BatchNorm2d):
        return None
    bn = modules[node.target]
    if bn.running_mean is None or len(node.args) != 1:
        return None
    src = node.args[0]
    if (isinstance(src, fx.Node) and src.op == "call_module"
            and isinstance(modules[src.target], nn.Conv2d) and len(src.users) == 1):
        return src
    return None


def _set_submodule(gm: nn.Module, target: str, module: nn.Module) -> None:
    parent, _, leaf = target.rpartition(".")
    setattr(gm.get_submodule(parent) if parent else gm, leaf, module)


def from_torch(module: nn.Module, input_shape: Sequence[int] | str, *, name: str | None = None,
               fold_bn: bool = True, allow_opaque: bool = False) -> ComputeGraph:
    """Import a PyTorch module as a `ComputeGraph`.

    Args:
        module: The network; it is deep-copied and put in eval mode, never modified.
        input_shape: Shape of the single input tensor, e.g. ``(1, 3, 224, 224)``.
        name: Graph name (defaults to the module's class name).
        fold_bn: Fold BatchNorm into the preceding convolution.
        allow_opaque: Represent unsupported modules/functions as OPAQUE ops (with a warning)
            instead of raising `UnsupportedOpError`.

    Raises:
        InputShapeError: The shape is malformed or the model cannot run on it.
        UnsupportedOpError: The module cannot be traced or contains an unsupported op.
    """
    shape = check_input_shape(input_shape)
    name = name or type(module).__name__
    gm = trace(module, name)
    if fold_bn:
        gm = fold_batchnorm(gm)
    _propagate_shapes(gm, shape, name)
    return _Converter(gm, name, allow_opaque).convert()


class _ShapeRecorder(fx.Interpreter):
    """Runs the traced module node by node and records each tensor result's shape."""

    def run_node(self, n: fx.Node) -> Any:
        try:
            result = super().run_node(n)
        except Exception as err:  # a wrong shape surfaces as whatever the failing layer raises
            text = str(err).strip()
            first = text.splitlines()[0] if text else type(err).__name__
            raise _ShapeFailure(n.name, first) from err
        if isinstance(result, torch.Tensor):
            n.meta[_SHAPE] = tuple(int(d) for d in result.shape)
        elif isinstance(result, (tuple, list)) and result and all(
                isinstance(r, torch.Tensor) for r in result):
            n.meta[_SHAPE] = [tuple(int(d) for d in r.shape) for r in result]
        else:
            n.meta.pop(_SHAPE, None)
        return result


class _ShapeFailure(Exception):
    def __init__(self, node: str, message: str) -> None:
        super().__init__(node, message)
        self.node, self.message = node, message


_SHAPE = "fusion_dse_shape"


def _propagate_shapes(gm: fx.GraphModule, shape: tuple[int, ...], name: str) -> None:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != 1:
        raise InputShapeError(f"model {name!r} takes {len(placeholders)} inputs; "
                              "only single-input models are supported")
    example = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    try:
        with torch.no_grad():
            _ShapeRecorder(gm).run(example)
    except _ShapeFailure as err:
        raise InputShapeError(f"input shape {','.join(map(str, shape))} does not fit model "
                              f"{name!r}: at {err.node!r}: {err.message[:300]}") from None


def _meta(node: Any) -> tuple[int, ...] | None:
    if isinstance(node, fx.Node):
        meta = node.meta.get(_SHAPE)
        if isinstance(meta, tuple):
            return meta
    return None


def _shape(node: fx.Node) -> tuple[int, ...]:
    return _meta(node)


def _is_tuple_of_tensors(node: fx.Node) -> bool:
    return isinstance(node.meta.get(_SHAPE), list)


def _flat_nodes(args: Any) -> list[fx.Node]:
    found: list[fx.Node] = []
    fx.node.map_arg(args, found.append)
    return found


class _Converter:
    """Walks a shape-propagated GraphModule and emits ops into a GraphBuilder."""

    def __init__(self, gm: fx.GraphModule, name: str, allow_opaque: bool) -> None:
        self.gm = gm
        self.modules = dict(gm.named_modules())
        self.allow_opaque = allow_opaque
        self.builder = GraphBuilder(name)
        self.tensor: dict[fx.Node, str] = {}  # fx node -> name of the IR tensor it denotes
        self.tuple_source: dict[fx.Node, fx.Node] = {}  # split/chunk node -> its input node
        self.used_names: set[str] = set()
        self.opaque: list[str] = []

    def convert(self) -> ComputeGraph:
        outputs: list[str] = []
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.builder.add_input(node.name, _shape(node))
                self.tensor[node] = node.name
            elif node.op == "output":
                outputs = [self.tensor[n] for n in _flat_nodes(node.args) if n in self.tensor]
            elif node.op in ("call_module", "call_function", "call_method"):
                self._convert_call(node)
        if self.opaque:
            warnings.warn(f"{len(self.opaque)} unsupported op(s) imported as opaque: "
                          + ", ".join(self.opaque[:5]), stacklevel=3)
        return self.builder.build(outputs)

    def _tensor_inputs(self, node: fx.Node) -> list[fx.Node]:
        return [n for n in _flat_nodes((node.args, node.kwargs)) if n in self.tensor]

    def _convert_call(self, node: fx.Node) -> None:
        if _is_tuple_of_tensors(node):
            self._remember_split(node)
            return
        if _meta(node) is None:
            return  # a shape, a size or another non-tensor value: not an op
        if node.op == "call_function" and node.target is operator.getitem:
            src = self.tuple_source.get(node.args[0], node.args[0])
            inputs = [src] if src in self.tensor else []
            spec = _slice_spec(node, src) if inputs else None
        else:
            inputs = self._tensor_inputs(node)
            if not inputs:
                return  # a tensor computed from constants only (e.g. a buffer): not an op
            spec = self._dispatch(node)
        if spec is _ALIAS:
            self.tensor[node] = self.tensor[inputs[0]]
            return
        if spec is None:
            spec = self._opaque(node)
        self._emit(node, spec, [self.tensor[n] for n in inputs])

    def _remember_split(self, node: fx.Node) -> None:
        inputs = self._tensor_inputs(node)
        if len(inputs) != 1:
            self._fail(node)
        self.tuple_source[node] = inputs[0]

    def _dispatch(self, node: fx.Node) -> dict[str, Any] | object | None:
        if node.op == "call_module":
            return self._module(node, self.modules[node.target])
        if node.op == "call_function":
            return self._function(node)
        return self._method(node)

    def _emit(self, node: fx.Node, spec: dict[str, Any], inputs: list[str]) -> None:
        name = self._op_name(node)
        fields = dict(spec)
        self.builder.add_op(name, fields.pop("kind"), fields.pop("op_type"), inputs,
                            _shape(node), attrs=fields.pop("attrs", None), **fields)
        self.tensor[node] = name

    def _op_name(self, node: fx.Node) -> str:
        base = node.target if node.op == "call_module" else node.name
        name, k = base, 1
        while name in self.used_names or self.builder.has(name):
            name, k = f"{base}#{k}", k + 1
        self.used_names.add(name)
        return name

    def _opaque(self, node: fx.Node) -> dict[str, Any]:
        what = _describe(node, self.modules)
        if not self.allow_opaque:
            self._fail(node)
        self.opaque.append(f"{what} at {node.name}")
        weights = 0
        if node.op == "call_module":
            weights = sum(p.numel() for p in self.modules[node.target].parameters())
        return {"kind": OpKind.OPAQUE, "op_type": what.lower(), "weight_elems": weights}

    def _fail(self, node: fx.Node) -> None:
        raise UnsupportedOpError(
            f"unsupported op {_describe(node, self.modules)} at node {node.name!r} of model "
            f"{self.builder.name!r}; inspect, evaluate and simulate take --allow-opaque to "
            "import it as an opaque op"
        )

    # --- call_module ----------------------------------------------------------------------

    def _module(self, node: fx.Node, mod: nn.Module) -> dict[str, Any] | object | None:
        for types, handler in _MODULE_HANDLERS:
            if isinstance(mod, types):
                return handler(self, node, mod)
        act = ACTIVATIONS.get(type(mod).__name__.lower())
        if act is not None:
            weights = sum(p.numel() for p in mod.parameters())
            return {"kind": OpKind.ELTWISE_UNARY, "op_type": act, "weight_elems": weights}
        return None

    def _conv(self, node: fx.Node, mod: nn.Conv2d) -> dict[str, Any]:
        in_shape, out_shape = _shape(node.args[0]), _shape(node)
        kernel = tuple(mod.kernel_size)
        return {
            "kind": conv_kind(mod.groups, mod.in_channels), "op_type": "conv",
            "kernel": kernel, "stride": tuple(mod.stride), "dilation": tuple(mod.dilation),
            "padding": _conv_padding(mod.padding, in_shape, out_shape, kernel, mod.stride,
                                     mod.dilation),
            "groups": mod.groups, "weight_elems": sum(p.numel() for p in mod.parameters()),
            "macs": conv_macs(out_shape, mod.in_channels, mod.groups, kernel),
        }

    def _batchnorm(self, node: fx.Node, mod: nn.BatchNorm2d) -> dict[str, Any]:
        out = _shape(node)
        return {"kind": OpKind.BATCHNORM, "op_type": "batchnorm",
                "weight_elems": 2 * mod.num_features, "macs": math.prod(out)}

    def _linear(self, node: fx.Node, mod: nn.Linear) -> dict[str, Any]:
        return {"kind": OpKind.LINEAR, "op_type": "linear",
                "weight_elems": sum(p.numel() for p in mod.parameters()),
                "macs": linear_macs(_shape(node), mod.in_features)}

    def _pool(self, node: fx.Node, mod: nn.MaxPool2d | nn.AvgPool2d) -> dict[str, Any] | object:
        op_type = "max" if isinstance(mod, nn.MaxPool2d) else "avg"
        dilation = mod.dilation if isinstance(mod, nn.MaxPool2d) else 1
        return _window_pool(op_type, mod.kernel_size, mod.stride, mod.padding, dilation,
                            mod.ceil_mode)

    def _adaptive_pool(self, node: fx.Node, mod: nn.Module) -> dict[str, Any] | object:
        op_type = "max" if isinstance(mod, nn.AdaptiveMaxPool2d) else "avg"
        return _adaptive(op_type, _shape(node.args[0]), _shape(node))

    def _reshape(self, node: fx.Node, mod: nn.Module) -> dict[str, Any] | object:
        return _reshape_spec(node, "flatten")

    def _alias(self, node: fx.Node, mod: nn.Module) -> object:
        return _ALIAS

    def _upsample(self, node: fx.Node, mod: nn.Upsample) -> dict[str, Any]:
        return {"kind": OpKind.RESIZE, "op_type": "resize", "attrs": {"mode": mod.mode}}

    def _softmax(self, node: fx.Node, mod: nn.Module) -> dict[str, Any]:
        return {"kind": OpKind.SOFTMAX, "op_type": "softmax"}

    def _pad(self, node: fx.Node, mod: nn.Module) -> dict[str, Any]:
        return _pad_spec(node, tuple(mod.padding))

    def _shuffle(self, node: fx.Node, mod: nn.Module) -> dict[str, Any]:
        return {"kind": OpKind.TRANSPOSE, "op_type": type(mod).__name__.lower()}

    # --- call_function / call_method -----------------------------------------------------

    def _function(self, node: fx.Node) -> dict[str, Any] | object | None:
        t = node.target
        if t in _BINARY_FUNCS:
            return self._arith(node, _BINARY_FUNCS[t])
        if t in _ACT_FUNCS:
            return {"kind": OpKind.ELTWISE_UNARY, "op_type": _ACT_FUNCS[t]}
        if t in _RESHAPE_FUNCS:
            return _reshape_spec(node, _RESHAPE_FUNCS[t])
        if t in _ALIAS_FUNCS:
            return _ALIAS
        if t in _CAT_FUNCS:
            return {"kind": OpKind.CONCAT, "op_type": "concat"}
        if t in _TRANSPOSE_FUNCS:
            return {"kind": OpKind.TRANSPOSE, "op_type": t.__name__}
        handler = _FUNCTION_HANDLERS.get(t)
        return handler(self, node) if handler else None

    def _method(self, node: fx.Node) -> dict[str, Any] | object | None:
        m = node.target
        if m in _BINARY_METHODS:
            return self._arith(node, _BINARY_METHODS[m])
        if m in _ACT_METHODS:
            return {"kind": OpKind.ELTWISE_UNARY, "op_type": m.rstrip("_")}
        if m in _RESHAPE_METHODS:
            return _reshape_spec(node, m)
        if m in _ALIAS_METHODS:
            return _ALIAS
        if m in ("permute", "transpose"):
            return {"kind": OpKind.TRANSPOSE, "op_type": m}
        if m == "mean":
            return self._mean(node)
        if m == "softmax":
            return {"kind": OpKind.SOFTMAX, "op_type": "softmax"}
        return None

    def _arith(self, node: fx.Node, op_type: str) -> dict[str, Any]:
        tensors = self._tensor_inputs(node)
        const = sum(_const_numel(self.gm, a) for a in _flat_nodes(node.args))
        if len(tensors) >= 2:
            return {"kind": OpKind.ELTWISE_BINARY, "op_type": op_type,
                    "weight_elems": const if const > 1 else 0}
        return {"kind": OpKind.ELTWISE_UNARY, "op_type": op_type,
                "weight_elems": const if const > 1 else 0}

    def _mean(self, node: fx.Node) -> dict[str, Any] | None:
        in_shape, out_shape = _shape(node.args[0]), _shape(node)
        if len(in_shape) == 4 and math.prod(out_shape) == in_shape[0] * in_shape[1]:
            return _adaptive("avg", in_shape, (*in_shape[:2], 1, 1))
        return None

    def _f_adaptive_pool(self, node: fx.Node) -> dict[str, Any] | object:
        op_type = "max" if node.target is F.adaptive_max_pool2d else "avg"
        return _adaptive(op_type, _shape(node.args[0]), _shape(node))

    def _f_pool(self, node: fx.Node) -> dict[str, Any] | object:
        a = _normalized(node, self.gm)
        op_type = "max" if node.target is F.max_pool2d else "avg"
        return _window_pool(op_type, a["kernel_size"], a.get("stride") or a["kernel_size"],
                            a.get("padding", 0), a.get("dilation", 1), a.get("ceil_mode", False))

    def _f_interpolate(self, node: fx.Node) -> dict[str, Any]:
        mode = node.kwargs.get("mode", node.args[3] if len(node.args) > 3 else "nearest")
        return {"kind": OpKind.RESIZE, "op_type": "resize", "attrs": {"mode": mode}}

    def _f_pad(self, node: fx.Node) -> dict[str, Any]:
        pad = node.args[1] if len(node.args) > 1 else node.kwargs["pad"]
        return _pad_spec(node, tuple(pad))

    def _f_softmax(self, node: fx.Node) -> dict[str, Any]:
        return {"kind": OpKind.SOFTMAX, "op_type": "softmax"}

    def _f_mean(self, node: fx.Node) -> dict[str, Any] | None:
        return self._mean(node)

    def _f_conv(self, node: fx.Node) -> dict[str, Any] | None:
        a = _normalized(node, self.gm)
        w = _const_shape(self.gm, a["weight"])
        if w is None or len(w) != 4:
            return None
        in_shape, out_shape = _shape(a["input"]), _shape(node)
        kernel, groups = (w[2], w[3]), int(a.get("groups", 1))
        stride, dilation = _pair(a.get("stride", 1)), _pair(a.get("dilation", 1))
        bias = _const_numel(self.gm, a.get("bias"))
        return {
            "kind": conv_kind(groups, in_shape[1]), "op_type": "conv", "kernel": kernel,
            "stride": stride, "dilation": dilation, "groups": groups,
            "padding": _conv_padding(a.get("padding", 0), in_shape, out_shape, kernel, stride,
                                     dilation),
            "weight_elems": math.prod(w) + bias,
            "macs": conv_macs(out_shape, in_shape[1], groups, kernel),
        }

    def _f_linear(self, node: fx.Node) -> dict[str, Any] | None:
        a = _normalized(node, self.gm)
        w = _const_shape(self.gm, a["weight"])
        if w is None:
            return None
        return {"kind": OpKind.LINEAR, "op_type": "linear",
                "weight_elems": math.prod(w) + _const_numel(self.gm, a.get("bias")),
                "macs": linear_macs(_shape(node), w[-1])}


_MODULE_HANDLERS: list[tuple[Any, Callable[..., Any]]] = [
    (nn.Conv2d, _Converter._conv),
    (nn.BatchNorm2d, _Converter._batchnorm),
    (nn.Linear, _Converter._linear),
    ((nn.MaxPool2d, nn.AvgPool2d), _Converter._pool),
    ((nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d), _Converter._adaptive_pool),
    ((nn.Flatten, nn.Unflatten), _Converter._reshape),
    ((nn.Dropout, nn.Dropout2d, nn.Dropout1d, nn.AlphaDropout, nn.Identity), _Converter._alias),
    (nn.Upsample, _Converter._upsample),
    ((nn.Softmax, nn.Softmax2d, nn.LogSoftmax), _Converter._softmax),
    ((nn.ZeroPad2d, nn.ConstantPad2d, nn.ReflectionPad2d, nn.ReplicationPad2d), _Converter._pad),
    ((nn.PixelShuffle, nn.PixelUnshuffle, nn.ChannelShuffle), _Converter._shuffle),
]
_FUNCTION_HANDLERS: dict[Any, Callable[..., Any]] = {
    F.adaptive_avg_pool2d: _Converter._f_adaptive_pool,
    F.adaptive_max_pool2d: _Converter._f_adaptive_pool,
    F.max_pool2d: _Converter._f_pool,
    F.avg_pool2d: _Converter._f_pool,
    F.interpolate: _Converter._f_interpolate,
    F.upsample: _Converter._f_interpolate,
    F.pad: _Converter._f_pad,
    F.softmax: _Converter._f_softmax,
    torch.softmax: _Converter._f_softmax,
    torch.mean: _Converter._f_mean,
    F.conv2d: _Converter._f_conv,
    F.linear: _Converter._f_linear,
}


def _describe(node: fx.Node, modules: dict[str, nn.Module]) -> str:
    if node.op == "call_module":
        return type(modules[node.target]).__name__
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    return getattr(node.target, "__name__", str(node.target))


def _pair(v: Any) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _conv_padding(padding: Any, in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                  kernel: Sequence[int], stride: Any, dilation: Any) -> tuple[int, int, int, int]:
    if isinstance(padding, str):  # 'same' / 'valid': recover the implicit padding
        s, d = _pair(stride), _pair(dilation)
        total = [max(0, (out_shape[2 + i] - 1) * s[i] + d[i] * (kernel[i] - 1) + 1
                     - in_shape[2 + i]) for i in range(2)]
        return (total[0] // 2, total[1] // 2, total[0] - total[0] // 2, total[1] - total[1] // 2)
    ph, pw = _pair(padding)
    return (ph, pw, ph, pw)


def _window_pool(op_type: str, kernel: Any, stride: Any, padding: Any, dilation: Any,
                 ceil_mode: bool) -> dict[str, Any] | object:
    k, s, p = _pair(kernel), _pair(stride if stride is not None else kernel), _pair(padding)
    pad = (p[0], p[1], p[0], p[1])
    if is_identity_window(k, s, pad):
        return _ALIAS
    return {"kind": OpKind.POOL, "op_type": op_type, "kernel": k, "stride": s, "padding": pad,
            "dilation": _pair(dilation), "attrs": {"ceil_mode": bool(ceil_mode)}}


def _adaptive(op_type: str, in_shape: tuple[int, ...],
              out_shape: tuple[int, ...]) -> dict[str, Any] | object:
    (h, w), (oh, ow) = in_shape[-2:], out_shape[-2:]
    if (oh, ow) == (1, 1):
        return {"kind": OpKind.GLOBAL_POOL, "op_type": op_type, "kernel": (h, w),
                "stride": (h, w)}
    if (oh, ow) == (h, w):
        return _ALIAS
    (kh, sh), (kw, sw) = adaptive_window(h, oh), adaptive_window(w, ow)
    return {"kind": OpKind.POOL, "op_type": op_type, "kernel": (kh, kw), "stride": (sh, sw),
            "attrs": {"adaptive": True}}


def _slice_spec(node: fx.Node, src: fx.Node) -> dict[str, Any] | object:
    if _shape(node) == _shape(src):
        return _ALIAS
    return {"kind": OpKind.SLICE, "op_type": "slice"}


def _reshape_spec(node: fx.Node, op_type: str) -> dict[str, Any] | object:
    ins = [n for n in _flat_nodes(node.args) if _meta(n) is not None]
    if ins and _shape(ins[0]) == _shape(node):
        return _ALIAS
    return {"kind": OpKind.RESHAPE, "op_type": op_type}


def _pad_spec(node: fx.Node, pad: tuple[int, ...]) -> dict[str, Any]:
    left, right, top, bottom = (tuple(pad) + (0, 0, 0, 0))[:4]
    return {"kind": OpKind.PAD, "op_type": "pad",
            "padding": (int(top), int(left), int(bottom), int(right))}


def _normalized(node: fx.Node, gm: fx.GraphModule) -> dict[str, Any]:
    pair = node.normalized_arguments(gm, normalize_to_only_use_kwargs=True)
    return dict(pair.kwargs) if pair is not None else dict(node.kwargs)


def _const(gm: fx.GraphModule, arg: Any) -> torch.Tensor | None:
    if isinstance(arg, fx.Node) and arg.op == "get_attr":
        value = gm
        for part in str(arg.target).split("."):
            value = getattr(value, part)
        return value if isinstance(value, torch.Tensor) else None
    return None


def _const_numel(gm: fx.GraphModule, arg: Any) -> int:
    t = _const(gm, arg)
    return int(t.numel()) if t is not None else 0


def _const_shape(gm: fx.GraphModule, arg: Any) -> tuple[int, ...] | None:
    t = _const(gm, arg)
    return tuple(t.shape) if t is not None else None
