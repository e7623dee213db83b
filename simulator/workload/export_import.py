"""PyTorch front end through ``torch.export``: an `nn.Module` exported, decomposed to the core
ATen op set and mapped op by op to a `ComputeGraph`.

``torch.export`` traces the module's Python code with real (fake) tensors, so functional calls,
control flow on static shapes (TF-style "same" padding, window partitions), optional forward
arguments and library code (timm, Hugging Face transformers) stop mattering. The exported
program is decomposed with the default core-ATen table less the ops the IR has one op for
(`PRESERVED`: ``linear``, ``matmul``, the norms, ``scaled_dot_product_attention``, activations
whose decomposition would split one IR op into several), then each ATen call becomes IR ops
(`ATEN_TABLE`, listed in docs/importers.md): convolutions (1-D as a 2-D convolution over a
unit height), BatchNorm folded into the convolution before it, reductions over any axes as a
global pool over a reshaped view (sum, variance and vector norms composed from it), padding,
slicing, indexing with constant indices, ``where`` with a constant condition, embedding lookups
(`OpKind.LINEAR`, op_type ``embedding``: the table is the op's weights), attention as its
primitives. Tensors computed from constants only (position embeddings, masks, rotary tables,
relative position biases gathered from a table) are constants: their values come from running
the program once on an example input, and they enter the IR as constant operands.

An ATen op without a mapping is refused by name (`UnsupportedOpError`, one line), or with
``allow_opaque`` becomes an `OpKind.OPAQUE` op. `from_torch` (torch.fx) stays the zoo's
importer: it names ops by module path, and the zoo's graphs and figures are fixed by it.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx, nn

from simulator.workload.builder import GraphBuilder
from simulator.workload.errors import InputShapeError, UnsupportedOpError
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.input_shape import check_input_shape
from simulator.workload.ops import conv_kind, conv_macs, linear_macs, matmul_macs, matmul_shape

__all__ = ["ATEN_TABLE", "PRESERVED", "ExportResult", "export_program", "from_export",
           "from_export_with_params"]

Params = dict[str, dict[str, torch.Tensor]]

aten = torch.ops.aten

PRESERVED: tuple[Any, ...] = tuple(
    getattr(getattr(aten, name), overload) for name, overload in (
        ("linear", "default"), ("matmul", "default"), ("layer_norm", "default"),
        ("group_norm", "default"), ("rms_norm", "default"), ("instance_norm", "default"),
        ("scaled_dot_product_attention", "default"), ("silu", "default"),
        ("hardswish", "default"), ("hardsigmoid", "default"), ("mish", "default"),
        ("softplus", "default"), ("celu", "default"), ("selu", "default"),
        ("hardshrink", "default"), ("softshrink", "default"), ("log_sigmoid", "default"),
        ("pixel_shuffle", "default"), ("pixel_unshuffle", "default"),
        ("channel_shuffle", "default"), ("upsample_nearest2d", "vec"),
        ("upsample_bilinear2d", "vec"), ("upsample_bicubic2d", "vec"),
        ("reflection_pad2d", "default"), ("replication_pad2d", "default"),
        ("reflection_pad1d", "default"), ("replication_pad1d", "default"),
        ("adaptive_avg_pool2d", "default"), ("pad", "default"), ("im2col", "default"),
    ) if hasattr(aten, name) and hasattr(getattr(aten, name), overload))
"""ATen ops kept whole when decomposing: each is one IR op (or attention's primitives)."""


class _Refused(Exception):
    """An ATen call with no IR mapping (`reason` says what about it)."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class _Alias:
    """A call that forwards an IR tensor unchanged (clone, dropout, same-shape view)."""

    def __init__(self, name: str) -> None:
        self.name = name


# --- export ------------------------------------------------------------------------------


def export_program(module: nn.Module, example: Sequence[torch.Tensor],
                   name: str) -> torch.export.ExportedProgram:
    """`module` exported with `example` inputs and decomposed to core ATen less `PRESERVED`.

    Raises:
        UnsupportedOpError: torch.export cannot export the module (its first line).
    """
    from torch.export import default_decompositions, export

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = export(module, tuple(example), strict=False)
            table = default_decompositions()
            for op in PRESERVED:
                table.pop(op, None)
            return ep.run_decompositions(table)
    except Exception as err:  # torch.export's errors are of many types; one line each
        text = str(err).strip()
        first = text.splitlines()[0] if text else type(err).__name__
        raise UnsupportedOpError(f"torch.export cannot export model {name!r}: "
                                 f"{type(err).__name__}: {first[:300]}") from None


# --- the converter -----------------------------------------------------------------------


def _schema_args(node: fx.Node) -> dict[str, Any]:
    """The call's arguments by schema name, defaults filled in."""
    schema = node.target._schema
    out: dict[str, Any] = {}
    for k, arg in enumerate(schema.arguments):
        if k < len(node.args) and not arg.kwarg_only:
            out[arg.name] = node.args[k]
        elif arg.name in node.kwargs:
            out[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
        else:
            out[arg.name] = None
    return out


def _op_name(target: Any) -> str:
    return getattr(target, "_opname", getattr(target, "__name__", str(target)))


_CONST_LIKE = frozenset({
    "full_like", "zeros_like", "ones_like", "empty_like", "new_zeros", "new_ones",
    "new_full", "new_empty", "sym_size", "sym_numel", "sym_stride", "sym_storage_offset",
    "scalar_tensor", "arange", "full", "zeros", "ones", "empty", "empty_strided",
    "_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size",
})
"""ATen calls whose result does not depend on their tensor operands' values."""

_ALIAS_OPS = frozenset({"clone", "alias", "contiguous", "_to_copy", "detach", "lift_fresh_copy",
                        "dropout", "native_dropout", "to", "_unsafe_view_copy"})

_UNARY: dict[str, str] = {
    "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "silu": "silu",
    "hardswish": "hardswish", "hardsigmoid": "hardsigmoid", "mish": "mish", "exp": "exp",
    "log": "log", "sqrt": "sqrt", "neg": "neg", "abs": "abs", "erf": "erf",
    "reciprocal": "reciprocal", "selu": "selu", "log_sigmoid": "logsigmoid",
    "logsigmoid": "logsigmoid",
}
_ACT_ATTRS: dict[str, tuple[tuple[str, str, Any], ...]] = {
    # aten op: (schema argument, IR attr, torch default)
    "gelu": (("approximate", "approximate", "none"),),
    "leaky_relu": (("negative_slope", "negative_slope", 0.01),),
    "elu": (("alpha", "alpha", 1.0),),
    "celu": (("alpha", "alpha", 1.0),),
    "softplus": (("beta", "beta", 1.0), ("threshold", "threshold", 20.0)),
    "hardshrink": (("lambd", "lambd", 0.5),),
    "softshrink": (("lambd", "lambd", 0.5),),
    "threshold": (("threshold", "threshold", None), ("value", "value", None)),
}
_ACT_TYPE = {"gelu": "gelu", "leaky_relu": "leakyrelu", "elu": "elu", "celu": "celu",
             "softplus": "softplus", "hardshrink": "hardshrink", "softshrink": "softshrink",
             "threshold": "threshold"}
_ARITH = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow",
          "maximum": "max", "minimum": "min", "rsub": "rsub"}


class _Converter:
    """Runs an exported program node by node on the example inputs, emitting IR ops."""

    def __init__(self, ep: torch.export.ExportedProgram, name: str, fold_bn: bool,
                 allow_opaque: bool, example: Sequence[torch.Tensor]) -> None:
        self.ep = ep
        self.gm = ep.graph_module
        self.name = name
        self.fold_bn = fold_bn
        self.allow_opaque = allow_opaque
        self.example = list(example)
        self.val: dict[fx.Node, Any] = {}
        self.tensor: dict[fx.Node, str] = {}  # node -> IR tensor (an activation)
        self.items: dict[fx.Node, list[str | None]] = {}  # tuple results: IR tensor per item
        self.splits: dict[fx.Node, tuple[str, list[dict[str, Any]]]] = {}
        self.specs: dict[str, dict[str, Any]] = {}  # IR op name -> fields, in emission order
        self.params: Params = {}
        self.inputs: list[tuple[str, tuple[int, ...]]] = []
        self.used: set[str] = set()
        self.opaque: list[str] = []
        self.conv_of: dict[fx.Node, str] = {}  # convolution node -> its IR conv op
        self.folded: list[tuple[str, int, int]] = []  # (conv, BN parameters, bias added)
        self.node: fx.Node | None = None

    # --- driver ---------------------------------------------------------------------------

    def convert(self) -> ComputeGraph:
        sig = self.ep.graph_signature
        consts = {**self.ep.state_dict, **self.ep.constants}
        lifted = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
                  **sig.inputs_to_lifted_tensor_constants}
        user = iter(self.example)
        outputs: list[str] = []
        for node in self.gm.graph.nodes:
            self.node = node
            if node.op == "placeholder":
                if node.name in lifted:
                    self.val[node] = consts[lifted[node.name]].detach()
                else:
                    x = next(user)
                    self.val[node] = x
                    self.inputs.append((node.name, tuple(int(d) for d in x.shape)))
                    self.tensor[node] = node.name
                    self.used.add(node.name)
            elif node.op == "call_function":
                self._call(node)
            elif node.op == "output":
                for n in _flat(node.args[0]):
                    if n in self.tensor and self.tensor[n] not in outputs:
                        outputs.append(self.tensor[n])
        if self.opaque:
            warnings.warn(f"{len(self.opaque)} unsupported op(s) imported as opaque: "
                          + ", ".join(self.opaque[:5]), stacklevel=4)
        if not outputs:
            raise UnsupportedOpError(f"model {self.name!r} computes no output from its input")
        b = GraphBuilder(self.name)
        for n, shape in self.inputs:
            b.add_input(n, shape)
        for n, s in self.specs.items():
            fields = dict(s)
            b.add_op(n, fields.pop("kind"), fields.pop("op_type"), fields.pop("inputs"),
                     fields.pop("shape"), attrs=fields.pop("attrs", None), **fields)
        return b.build(outputs)

    def _call(self, node: fx.Node) -> None:
        args = fx.node.map_arg((node.args, node.kwargs), lambda n: self.val.get(n))
        if node.target is operator.getitem:
            self.val[node] = args[0][0][args[0][1]]
        else:
            try:
                # a view of a tensor the program's eager ops left non-contiguous: reshape
                target = aten.reshape.default if node.target is aten.view.default \
                    else node.target
                with torch.no_grad():
                    self.val[node] = target(*args[0], **args[1])
            except Exception as err:
                text = str(err).strip()
                first = text.splitlines()[0] if text else type(err).__name__
                raise InputShapeError(f"model {self.name!r} fails at {node.name!r} "
                                      f"({_op_name(node.target)}): {first[:300]}") from None
        acts = [n for n in node.all_input_nodes if n in self.tensor or n in self.items
                or n in self.splits]
        if not acts:
            return  # computed from constants only: a constant
        if node.target is operator.getitem:
            self._getitem(node)
            return
        op = _op_name(node.target)
        if op in _CONST_LIKE:
            return
        value = self.val[node]
        if value is None:
            return
        try:
            result = self._dispatch(node, op)
        except _Refused as refused:
            result = self._opaque(node, op, refused.reason)
        if isinstance(result, _Alias):
            self.tensor[node] = result.name
        elif isinstance(result, str):
            self.tensor[node] = result
        elif isinstance(result, list):
            self.items[node] = result

    def _dispatch(self, node: fx.Node, op: str) -> Any:
        handler = _HANDLERS.get(op)
        if handler is not None:
            return handler(self, node, _schema_args(node))
        if op in _ALIAS_OPS:
            return _Alias(self.tensor[self._first_act(node)])
        if op in _UNARY:
            return self._unary(node, _UNARY[op])
        if op in _ACT_ATTRS:
            a = _schema_args(node)
            attrs = {}
            for arg, key, default in _ACT_ATTRS[op]:
                v = a.get(arg)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    v = float(v)
                if v != default:
                    attrs[key] = v
            if op == "elu" and (a.get("scale", 1) != 1 or a.get("input_scale", 1) != 1):
                if (round(float(a["alpha"]), 4), round(float(a["scale"]), 4)) == (1.6733,
                                                                                   1.0507):
                    return self._unary(node, "selu")
                raise _Refused("elu with scale or input_scale")
            return self._unary(node, _ACT_TYPE[op], attrs)
        if op in _ARITH:
            return self._arith_node(node, _ARITH[op])
        raise _Refused()

    # --- helpers ----------------------------------------------------------------------------

    def _first_act(self, node: fx.Node) -> fx.Node:
        return next(n for n in node.all_input_nodes if n in self.tensor)

    def is_act(self, arg: Any) -> bool:
        return isinstance(arg, fx.Node) and arg in self.tensor

    def shape(self, arg: Any) -> tuple[int, ...]:
        v = self.val[arg] if isinstance(arg, fx.Node) else arg
        return tuple(int(d) for d in v.shape)

    def const(self, arg: Any) -> Any:
        """The value of a constant argument (a tensor, a number, a list, None)."""
        if isinstance(arg, fx.Node):
            if arg in self.tensor:
                raise _Refused("an activation where a constant is expected")
            return self.val[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.const(a) for a in arg)
        return arg

    def base(self, node: fx.Node, module_name: bool = False) -> str:
        if module_name:
            stack = node.meta.get("nn_module_stack") or {}
            if stack:
                path = list(stack.values())[-1][0]
                path = path.replace("L['self'].", "").replace("L__self___", "")
                if path and path not in self.used and path not in self.specs:
                    return path
        return node.name

    def emit(self, base: str, kind: OpKind, op_type: str, inputs: Sequence[str],
             shape: Sequence[int], attrs: dict[str, Any] | None = None,
             params: dict[str, torch.Tensor | None] | None = None, **fields: Any) -> str:
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}#{k}", k + 1
        self.used.add(name)
        attrs = dict(attrs or {})  # infinite values made finite by `freeze_attrs`
        self.specs[name] = {"kind": kind, "op_type": op_type, "inputs": list(inputs),
                            "shape": tuple(int(d) for d in shape), "attrs": attrs, **fields}
        if params:
            kept = {k: v.detach().to(torch.float32).clone() for k, v in params.items()
                    if v is not None}
            if kept:
                self.params[name] = kept
        return name

    def _opaque(self, node: fx.Node, op: str, reason: str) -> Any:
        what = f"aten.{op}" + (f" ({reason})" if reason else "")
        if not self.allow_opaque:
            raise UnsupportedOpError(
                f"unsupported op {what} at node {node.name!r} of model {self.name!r}; "
                "inspect, evaluate and simulate take --allow-opaque to import it as an opaque "
                "op")
        self.opaque.append(f"{what} at {node.name}")
        inputs = list(dict.fromkeys(self.tensor[n] for n in node.all_input_nodes
                                    if n in self.tensor))
        weights = sum(int(v.numel()) for n in node.all_input_nodes if n not in self.tensor
                      for v in [self.val.get(n)] if isinstance(v, torch.Tensor))
        value = self.val[node]
        if isinstance(value, torch.Tensor):
            return self.emit(node.name, OpKind.OPAQUE, f"aten.{op}", inputs, value.shape,
                             weight_elems=weights)
        if isinstance(value, (tuple, list)):
            names: list[str | None] = []
            for k, v in enumerate(value):
                names.append(self.emit(f"{node.name}.{k}", OpKind.OPAQUE, f"aten.{op}", inputs,
                                       v.shape, weight_elems=weights if k == 0 else 0)
                             if isinstance(v, torch.Tensor) and v.dim() > 0 else None)
            return names
        return None

    def _getitem(self, node: fx.Node) -> None:
        src, k = node.args[0], node.args[1]
        if src in self.items:
            item = self.items[src][k]
            if item is not None:
                self.tensor[node] = item
            return
        if src in self.splits:
            x, specs = self.splits[src]
            spec = specs[k]
            if spec is None:
                self.tensor[node] = x
                return
            self.tensor[node] = self.emit(f"{src.name}.{k}", OpKind.SLICE, "slice", [x],
                                          self.shape(node), attrs=spec)

    # --- elementwise ------------------------------------------------------------------------

    def _unary(self, node: fx.Node, op_type: str, attrs: dict[str, Any] | None = None,
               x: Any = None) -> str:
        x = self.tensor[x if x is not None else node.args[0]] if not isinstance(x, str) else x
        return self.emit(node.name, OpKind.ELTWISE_UNARY, op_type, [x], self.shape(node),
                         attrs=attrs)

    def arith(self, base: str, op_type: str, a: Any, b: Any,
              shape: Sequence[int]) -> str:
        """`a op b` where each operand is an IR tensor name or a constant (number or tensor);
        at least one is an IR tensor."""
        a_act, b_act = isinstance(a, str), isinstance(b, str)
        if op_type == "rsub":
            a, b, a_act, b_act, op_type = b, a, b_act, a_act, "sub"
        if a_act and b_act:
            return self.emit(base, OpKind.ELTWISE_BINARY, op_type, [a, b], shape)
        x, c, side = (a, b, "right") if a_act else (b, a, "left")
        attrs: dict[str, Any] = {"const_side": side}
        params: dict[str, torch.Tensor] | None = None
        weights = 0
        if isinstance(c, torch.Tensor) and c.numel() == 1:
            c = float(c.reshape(()).item())
        if isinstance(c, bool) or not isinstance(c, (int, float, torch.Tensor)):
            raise _Refused("a non-numeric operand")
        if isinstance(c, torch.Tensor):
            if c.dtype == torch.bool:
                c = c.to(torch.float32)
            attrs["const_shape"] = tuple(int(d) for d in c.shape)
            params = {"const": c}
            weights = int(c.numel())
        else:
            attrs["scalar"] = float(c)
        return self.emit(base, OpKind.ELTWISE_UNARY, op_type, [x], shape, attrs=attrs,
                         params=params, weight_elems=weights)

    def operand(self, arg: Any) -> Any:
        return self.tensor[arg] if self.is_act(arg) else self.const(arg)

    def _arith_node(self, node: fx.Node, op_type: str) -> str:
        a = _schema_args(node)
        names = list(a)
        x, y = a[names[0]], a[names[1]]
        if a.get("rounding_mode") is not None:
            raise _Refused("div with a rounding mode")
        alpha = a.get("alpha", 1)
        if alpha is not None and alpha != 1:
            if self.is_act(y):
                y = self.arith(f"{node.name}.alpha", "mul", self.tensor[y], float(alpha),
                               self.shape(y))
            else:
                y = self.const(y) * alpha
        xo = x if isinstance(x, str) else self.operand(x)
        yo = y if isinstance(y, str) else self.operand(y)
        return self.arith(node.name, op_type, xo, yo, self.shape(node))

    # --- reductions -------------------------------------------------------------------------

    def reduce(self, base: str, x: str, in_shape: tuple[int, ...], dims: Any, keepdim: bool,
               pool: str = "avg") -> tuple[str, tuple[int, ...], int]:
        """A mean (or max) of IR tensor `x` over `dims`: a global pool over (H, W) of a 4-D
        map, else over the reduced axes moved last and flattened into H of a (1, M, R, 1)
        view. Returns (IR tensor, its shape, the number of elements reduced)."""
        rank = len(in_shape)
        if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
            dims = list(range(rank))
        dims = sorted({int(d) % rank for d in ([dims] if isinstance(dims, int) else dims)})
        kept = [d for d in range(rank) if d not in dims]
        count = math.prod(in_shape[d] for d in dims)
        out_shape = tuple(1 if d in dims else in_shape[d] for d in range(rank)) if keepdim \
            else tuple(in_shape[d] for d in kept)
        if rank == 4 and dims == [2, 3]:
            h, w = in_shape[2:]
            return self.emit(base, OpKind.GLOBAL_POOL, pool, [x], out_shape, kernel=(h, w),
                             stride=(h, w)), out_shape, count
        perm = tuple(kept + dims)
        if perm != tuple(range(rank)):
            x = self.emit(f"{base}.permute", OpKind.TRANSPOSE, "permute", [x],
                          tuple(in_shape[p] for p in perm), attrs={"perm": perm})
        m = math.prod(in_shape[d] for d in kept)
        x = self.emit(f"{base}.view", OpKind.RESHAPE, "reshape", [x], (1, m, count, 1))
        y = self.emit(f"{base}.pool", OpKind.GLOBAL_POOL, pool, [x], (1, m, 1, 1),
                      kernel=(count, 1), stride=(count, 1))
        if out_shape != (1, m, 1, 1):
            y = self.emit(base, OpKind.RESHAPE, "reshape", [y], out_shape)
        return y, out_shape, count


def _flat(args: Any) -> list[fx.Node]:
    out: list[fx.Node] = []
    fx.node.map_arg(args, lambda n: out.append(n))
    return out


def _pair(v: Any) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    v = list(v)
    return (int(v[0]), int(v[-1])) if len(v) else (1, 1)


# --- handlers ------------------------------------------------------------------------------


def _conv(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = a["input"]
    w = c.const(a["weight"])
    b = c.const(a["bias"])
    if a["transposed"]:
        raise _Refused("a transposed convolution: no IR kind")
    rank = len(c.shape(x))
    if rank not in (3, 4) or not isinstance(w, torch.Tensor):
        raise _Refused(f"a {rank - 2}-D convolution: the IR's windows are 2-D")
    groups = int(a["groups"])
    stride, padding, dilation = list(a["stride"]), list(a["padding"]), list(a["dilation"])
    out = c.shape(node)
    name = c.base(node, module_name=True)
    xi = c.tensor[x]
    in_shape = c.shape(x)
    if rank == 3:  # Conv1d: a 2-D convolution over a unit height
        xi = c.emit(f"{name}.view", OpKind.RESHAPE, "unsqueeze", [xi],
                    (in_shape[0], in_shape[1], 1, in_shape[2]))
        in_shape = (in_shape[0], in_shape[1], 1, in_shape[2])
        w = w.unsqueeze(2)
        stride, padding, dilation = [1, *stride], [0, *padding], [1, *dilation]
        conv_out = (out[0], out[1], 1, out[2])
    else:
        conv_out = out
    kernel = (int(w.shape[2]), int(w.shape[3]))
    ph, pw = _pair(padding)
    conv = c.emit(name, conv_kind(groups, in_shape[1]), "conv", [xi], conv_out,
                  params={"weight": w, "bias": b}, kernel=kernel, stride=_pair(stride),
                  dilation=_pair(dilation), padding=(ph, pw, ph, pw), groups=groups,
                  weight_elems=int(w.numel()) + (int(b.numel()) if b is not None else 0),
                  macs=conv_macs(conv_out, in_shape[1], groups, kernel))
    c.conv_of[node] = conv
    if rank == 3:
        return c.emit(f"{name}.out", OpKind.RESHAPE, "squeeze", [conv], out)
    return conv


def _batch_norm(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = a["input"]
    w, b = c.const(a.get("weight")), c.const(a.get("bias"))
    mean, var = c.const(a.get("running_mean")), c.const(a.get("running_var"))
    if mean is None or var is None:
        raise _Refused("batch statistics")
    eps = float(a["eps"])
    scale = torch.rsqrt(var.double() + eps)
    if w is not None:
        scale = scale * w.double()
    shift = -mean.double() * scale
    if b is not None:
        shift = shift + b.double()
    channels = int(scale.numel())
    conv = c.conv_of.get(x) if isinstance(x, fx.Node) else None
    if c.fold_bn and conv is not None and len(x.users) == 1 and conv in c.specs:
        spec = c.specs[conv]
        p = c.params.setdefault(conv, {})
        weight = p["weight"].double()
        p["weight"] = (weight * scale.reshape(-1, *([1] * (weight.dim() - 1)))).float()
        had_bias = "bias" in p
        bias = p["bias"].double() if had_bias else torch.zeros(channels, dtype=torch.float64)
        p["bias"] = (bias * scale + shift).float()
        if not had_bias:
            spec["weight_elems"] += channels
        c.folded.append((conv, 2 * channels, 0 if had_bias else channels))
        return [c.tensor[x], None, None]
    value = c.val[node]
    shape = tuple((value[0] if isinstance(value, (tuple, list)) else value).shape)
    name = c.emit(c.base(node, module_name=True), OpKind.BATCHNORM, "batchnorm",
                  [c.tensor[x]], shape, params={"scale": scale.float(), "shift": shift.float()},
                  weight_elems=2 * channels, macs=math.prod(shape))
    return [name, None, None]


def _batch_norm_plain(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    items = _batch_norm(c, node, a)
    return items[0]


def _linear(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    w, b = a["weight"], a.get("bias")
    if c.is_act(w):
        raise _Refused("a weight computed from the input")
    w, b = c.const(w), c.const(b)
    out = c.shape(node)
    return c.emit(c.base(node, module_name=True), OpKind.LINEAR, "linear",
                  [c.tensor[a["input"]]], out, params={"weight": w, "bias": b},
                  weight_elems=int(w.numel()) + (int(b.numel()) if b is not None else 0),
                  macs=linear_macs(out, int(w.shape[-1])))


def _matmul(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    names = list(a)
    x, y = a[names[0]], a[names[1]]
    out = c.shape(node)
    if c.is_act(x) and c.is_act(y):
        return c.emit(node.name, OpKind.MATMUL, "matmul", [c.tensor[x], c.tensor[y]], out,
                      macs=matmul_macs(out, c.shape(x)))
    if c.is_act(x):
        w = c.const(y)
        if w.dim() != 2:
            raise _Refused("a product with a constant of rank other than 2")
        return c.emit(node.name, OpKind.LINEAR, "linear", [c.tensor[x]], out,
                      params={"weight": w.T.contiguous()}, weight_elems=int(w.numel()),
                      macs=linear_macs(out, int(w.shape[0])))
    w = c.const(x)  # constant @ activation = (activation^T @ constant^T)^T
    ys = c.shape(y)
    if w.dim() != 2 or len(ys) < 2:
        raise _Refused("a constant first operand of rank other than 2")
    rank = len(ys)
    perm = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    yt = c.emit(f"{node.name}.t", OpKind.TRANSPOSE, "transpose", [c.tensor[y]],
                tuple(ys[p] for p in perm), attrs={"perm": perm})
    lin_shape = (*ys[:-2], ys[-1], int(w.shape[0]))
    lin = c.emit(f"{node.name}.linear", OpKind.LINEAR, "linear", [yt], lin_shape,
                 params={"weight": w}, weight_elems=int(w.numel()),
                 macs=linear_macs(lin_shape, int(w.shape[1])))
    return c.emit(node.name, OpKind.TRANSPOSE, "transpose", [lin], out, attrs={"perm": perm})


def _addmm(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    bias, m1, m2 = a["self"], a["mat1"], a["mat2"]
    if a.get("beta", 1) != 1 or a.get("alpha", 1) != 1:
        raise _Refused("addmm with alpha or beta")
    out = c.shape(node)
    if c.is_act(m1) and not c.is_act(m2) and not c.is_act(bias):
        w, b = c.const(m2), c.const(bias)
        if w.dim() == 2 and (not isinstance(b, torch.Tensor) or b.numel() in (1, w.shape[1])):
            b = b.reshape(-1).expand(int(w.shape[1])).contiguous() \
                if isinstance(b, torch.Tensor) else torch.full((int(w.shape[1]),), float(b))
            return c.emit(c.base(node, module_name=True), OpKind.LINEAR, "linear",
                          [c.tensor[m1]], out, params={"weight": w.T.contiguous(), "bias": b},
                          weight_elems=int(w.numel() + b.numel()),
                          macs=linear_macs(out, int(w.shape[0])))
    prod = _matmul(c, node, {"self": m1, "mat2": m2})
    return c.arith(f"{node.name}.bias", "add", prod, c.operand(bias), out)


def _norm(c: _Converter, node: fx.Node, op_type: str, axes: tuple[int, ...], eps: Any,
          w: Any, b: Any, groups: int | None = None) -> str:
    w, b = c.const(w), c.const(b)
    if w is None and b is not None:
        raise _Refused("a shift without a scale")
    if eps is None:
        eps = torch.finfo(torch.float32).eps
    attrs: dict[str, Any] = {"eps": float(eps), "axes": axes, "affine": w is not None}
    if groups is not None:
        attrs["groups"] = int(groups)
    x = node.args[0]
    shape = c.shape(x)
    return c.emit(c.base(node, module_name=True), OpKind.NORM, op_type, [c.tensor[x]], shape,
                  attrs=attrs, params={"weight": w, "bias": b},
                  weight_elems=sum(int(t.numel()) for t in (w, b) if t is not None))


def _layer_norm(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    rank = len(c.shape(a["input"]))
    n = len(a["normalized_shape"])
    name = _norm(c, node, "layernorm", tuple(range(rank - n, rank)), a["eps"], a["weight"],
                 a["bias"])
    return [name, None, None] if _op_name(node.target) == "native_layer_norm" else name


def _rms_norm(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    rank = len(c.shape(a["input"]))
    n = len(a["normalized_shape"])
    return _norm(c, node, "rmsnorm", tuple(range(rank - n, rank)), a["eps"], a["weight"], None)


def _group_norm(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    rank = len(c.shape(a["input"]))
    groups = a.get("num_groups", a.get("group"))
    name = _norm(c, node, "groupnorm", tuple(range(1, rank)), a["eps"], a["weight"], a["bias"],
                 groups)
    return [name, None, None] if _op_name(node.target) == "native_group_norm" else name


def _instance_norm(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    if not a["use_input_stats"]:
        return _batch_norm_plain(c, node, {"input": a["input"], "weight": a["weight"],
                                           "bias": a["bias"], "running_mean": a["running_mean"],
                                           "running_var": a["running_var"], "eps": a["eps"]})
    shape = c.shape(a["input"])
    return _norm(c, node, "groupnorm", tuple(range(1, len(shape))), a["eps"], a["weight"],
                 a["bias"], shape[1])


def _softmax(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    rank = len(c.shape(node))
    attrs: dict[str, Any] = {"axis": int(a["dim"]) % rank}
    if "log" in _op_name(node.target):
        attrs["log"] = True
    return c.emit(node.name, OpKind.SOFTMAX, "softmax", [c.tensor[node.args[0]]],
                  c.shape(node), attrs=attrs)


def _reshape(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    if c.shape(x) == c.shape(node):
        return _Alias(c.tensor[x])
    op = _op_name(node.target)
    op_type = {"_unsafe_view": "view", "squeeze": "squeeze", "unsqueeze": "unsqueeze",
               "flatten": "flatten", "reshape": "reshape"}.get(op, "view")
    return c.emit(node.name, OpKind.RESHAPE, op_type, [c.tensor[x]], c.shape(node))


def _expand(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    if c.shape(x) == c.shape(node):
        return _Alias(c.tensor[x])
    xi, shape = c.tensor[x], c.shape(x)
    out = c.shape(node)
    if len(shape) < len(out):
        shape = (1,) * (len(out) - len(shape)) + shape
        xi = c.emit(f"{node.name}.view", OpKind.RESHAPE, "unsqueeze", [xi], shape)
    return c.emit(node.name, OpKind.RESHAPE, "expand", [xi], out)


def _repeat(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    reps = [int(r) for r in a["repeats"]]
    shape = c.shape(x)
    xi = c.tensor[x]
    if len(reps) > len(shape):
        shape = (1,) * (len(reps) - len(shape)) + shape
        xi = c.emit(f"{node.name}.view", OpKind.RESHAPE, "unsqueeze", [xi], shape)
    if all(r == 1 for r in reps):
        return _Alias(xi)
    # x.repeat(r) = x[None].expand(r, ...).reshape: every repeated axis gets a new axis before it
    inter = tuple(d for s, r in zip(shape, reps, strict=True) for d in (r, s))
    ones = tuple(d for s in shape for d in (1, s))
    v = c.emit(f"{node.name}.split", OpKind.RESHAPE, "unsqueeze", [xi], ones)
    e = c.emit(f"{node.name}.expand", OpKind.RESHAPE, "expand", [v], inter)
    return c.emit(node.name, OpKind.RESHAPE, "reshape", [e], c.shape(node))


def _permute(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    rank = len(c.shape(x))
    op = _op_name(node.target)
    if op == "permute":
        perm = tuple(int(d) % rank for d in a["dims"])
    else:
        perm_l = list(range(rank))
        if op == "t" or rank < 2:
            d0, d1 = (0, 1) if rank == 2 else (0, 0)
        else:
            d0, d1 = int(a["dim0"]) % rank, int(a["dim1"]) % rank
        perm_l[d0], perm_l[d1] = perm_l[d1], perm_l[d0]
        perm = tuple(perm_l)
    if perm == tuple(range(rank)):
        return _Alias(c.tensor[x])
    return c.emit(node.name, OpKind.TRANSPOSE, "permute" if op == "permute" else "transpose",
                  [c.tensor[x]], c.shape(node), attrs={"perm": perm})


def _cat(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    tensors = list(a["tensors"])
    rank = len(c.shape(node))
    axis = int(a["dim"]) % rank
    acts, consts = [], []
    for k, t in enumerate(tensors):
        if c.is_act(t):
            acts.append(c.tensor[t])
        else:
            v = c.const(t)
            if v.numel() == 0:
                continue
            consts.append((k, v.to(torch.float32)))
    if not consts and len(acts) == 1:
        return _Alias(acts[0])
    # positions among the operands kept (empty constants dropped)
    kept = [t for t in tensors if c.is_act(t) or c.const(t).numel()]
    at = tuple(k for k, t in enumerate(kept) if not c.is_act(t))
    attrs: dict[str, Any] = {"axis": axis}
    params: dict[str, torch.Tensor] = {}
    if consts:
        attrs.update(const_at=at, const_shapes=tuple(tuple(v.shape) for _, v in consts))
        params = {f"const{k}": v for k, (_, v) in enumerate(consts)}
    return c.emit(node.name, OpKind.CONCAT, "concat", acts, c.shape(node), attrs=attrs,
                  params=params, weight_elems=sum(int(v.numel()) for _, v in consts))


def _slice(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    shape = c.shape(x)
    dim = int(a["dim"]) % len(shape)
    start, end, step = slice(a["start"], a["end"], int(a["step"] or 1)).indices(shape[dim])
    if (start, end, step) == (0, shape[dim], 1):
        return _Alias(c.tensor[x])
    return c.emit(node.name, OpKind.SLICE, "slice", [c.tensor[x]], c.shape(node),
                  attrs={"axis": dim, "start": start, "end": max(start, end), "step": step})


def _select(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    shape = c.shape(x)
    dim = int(a["dim"]) % len(shape)
    index = int(a["index"]) % shape[dim]
    return c.emit(node.name, OpKind.SLICE, "slice", [c.tensor[x]], c.shape(node),
                  attrs={"axis": dim, "start": index, "end": index + 1, "step": 1})


def _split(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    shape = c.shape(x)
    rank = len(shape)
    dim = int(a.get("dim") or 0) % rank
    specs: list[Any] = []
    start = 0
    for v in c.val[node]:
        size = int(v.shape[dim]) if v.dim() == rank else 1
        if v.dim() == rank and size == shape[dim]:
            specs.append(None)
        else:
            specs.append({"axis": dim, "start": start, "end": start + size, "step": 1})
        start += size
    c.splits[node] = (c.tensor[x], specs)
    return None


def _index(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    indices = list(a["indices"])
    shape = c.shape(x)
    if any(c.is_act(i) for i in indices if i is not None):
        raise _Refused("indices computed from the input (a gather)")
    given = [(k, c.const(i)) for k, i in enumerate(indices) if i is not None]
    if len(given) == 1:
        k, idx = given[0]
        if idx.dtype == torch.bool:
            idx = idx.nonzero().reshape(-1)
        flat = idx.reshape(-1).tolist()
        if idx.dim() == 1 and flat and flat == list(range(flat[0], flat[0] + len(flat))):
            start = int(flat[0]) % shape[k]
            return c.emit(node.name, OpKind.SLICE, "slice", [c.tensor[x]], c.shape(node),
                          attrs={"axis": k, "start": start, "end": start + len(flat),
                                 "step": 1})
        if idx.dim() == 1 and len(flat) > 1:
            steps = {b - a_ for a_, b in zip(flat, flat[1:], strict=False)}
            if len(steps) == 1 and next(iter(steps)) > 0 and flat[0] >= 0:
                step = next(iter(steps))
                return c.emit(node.name, OpKind.SLICE, "slice", [c.tensor[x]], c.shape(node),
                              attrs={"axis": k, "start": flat[0],
                                     "end": flat[-1] + 1, "step": step})
        if idx.dim() == 1 and len(flat) <= MAX_GATHER:
            return c.emit(node.name, OpKind.TRANSPOSE, "gather", [c.tensor[x]], c.shape(node),
                          attrs={"axis": k, "indices": tuple(int(i) % shape[k]
                                                             for i in flat)})
    raise _Refused("indexing by several index tensors, or by more than "
                   f"{MAX_GATHER} indices")


MAX_GATHER = 4096
"""Most indices a ``gather`` op records (its attr ``indices``)."""


def _as_strided(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    """``as_strided`` that reads its input in order (what decompositions write for a copy or
    a view): a reshape; any other is refused."""
    x = node.args[0]
    value, src = c.val[node], c.val[x]
    if value.numel() == src.numel() and torch.equal(value.reshape(-1),
                                                    src.contiguous().reshape(-1)):
        if tuple(value.shape) == tuple(src.shape):
            return _Alias(c.tensor[x])
        return c.emit(node.name, OpKind.RESHAPE, "view", [c.tensor[x]], c.shape(node))
    raise _Refused("a strided view other than a reshape")


def _index_select(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    indices = [None] * len(c.shape(node.args[0]))
    indices[int(a["dim"]) % len(indices)] = a["index"]
    return _index(c, node, {"indices": indices})


def _embedding(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    w, ids = a["weight"], a["indices"]
    if c.is_act(w) or not c.is_act(ids):
        raise _Refused("a table computed from the input")
    w = c.const(w)
    return c.emit(c.base(node, module_name=True), OpKind.LINEAR, "embedding", [c.tensor[ids]],
                  c.shape(node), attrs={"num_embeddings": int(w.shape[0])},
                  params={"weight": w}, weight_elems=int(w.numel()))


def _pad(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    pad = [int(p) for p in a["pad"]]
    op = _op_name(node.target)
    mode = {"reflection_pad2d": "reflect", "reflection_pad1d": "reflect",
            "replication_pad2d": "replicate", "replication_pad1d": "replicate"}.get(op,
                                                                                   "constant")
    if op == "pad":
        mode = str(a.get("mode") or "constant")
        mode = {"reflect": "reflect", "replicate": "replicate", "circular": "circular"}.get(
            mode, "constant")
    if len(pad) > 4 and any(pad[4:]):
        raise _Refused("padding of an axis other than the last two")
    if any(p < 0 for p in pad):
        raise _Refused("negative padding (a crop)")
    if not any(pad):
        return _Alias(c.tensor[x])
    left, right, top, bottom = (pad + [0, 0, 0, 0])[:4]
    attrs: dict[str, Any] = {}
    value = a.get("value")
    if mode != "constant":
        attrs["mode"] = mode
    elif value:
        attrs["value"] = float(value)
    return c.emit(node.name, OpKind.PAD, "pad", [c.tensor[x]], c.shape(node), attrs=attrs,
                  padding=(top, left, bottom, right))


def _max_pool(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    if len(c.shape(x)) != 4:
        raise _Refused("a pool over other than (H, W) of a 4-D map")
    k = _pair(a["kernel_size"])
    s = _pair(a["stride"] if a["stride"] else a["kernel_size"])
    p = _pair(a["padding"])
    out = c.shape(node) if isinstance(c.val[node], torch.Tensor) else \
        tuple(c.val[node][0].shape)
    if k == (1, 1) and s == (1, 1) and p == (0, 0):
        name = c.tensor[x]
    else:
        name = c.emit(node.name, OpKind.POOL, "max", [c.tensor[x]], out, kernel=k, stride=s,
                      padding=(p[0], p[1], p[0], p[1]), dilation=_pair(a["dilation"]),
                      attrs={"ceil_mode": bool(a["ceil_mode"])})
    return [name, None] if isinstance(c.val[node], tuple) else name


def _avg_pool(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    if len(c.shape(x)) != 4:
        raise _Refused("a pool over other than (H, W) of a 4-D map")
    if a.get("divisor_override"):
        raise _Refused("divisor_override")
    k = _pair(a["kernel_size"])
    s = _pair(a["stride"] if a["stride"] else a["kernel_size"])
    p = _pair(a["padding"])
    if k == (1, 1) and s == (1, 1) and p == (0, 0):
        return _Alias(c.tensor[x])
    attrs: dict[str, Any] = {"ceil_mode": bool(a["ceil_mode"])}
    if not a["count_include_pad"] and any(p):
        attrs["count_include_pad"] = False
    return c.emit(node.name, OpKind.POOL, "avg", [c.tensor[x]], c.shape(node), kernel=k,
                  stride=s, padding=(p[0], p[1], p[0], p[1]), attrs=attrs)


def _adaptive_pool(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    from simulator.workload.ops import adaptive_window

    x = node.args[0]
    shape = c.shape(x)
    op_type = "max" if "max" in _op_name(node.target) else "avg"
    value = c.val[node]
    out = tuple(value[0].shape) if isinstance(value, tuple) else tuple(value.shape)
    if len(shape) != 4:
        raise _Refused("an adaptive pool over other than (H, W) of a 4-D map")
    (h, w), (oh, ow) = shape[-2:], out[-2:]
    if (oh, ow) == (1, 1):
        name = c.emit(node.name, OpKind.GLOBAL_POOL, op_type, [c.tensor[x]], out,
                      kernel=(h, w), stride=(h, w))
    elif (oh, ow) == (h, w):
        name = c.tensor[x]
    else:
        (kh, sh), (kw, sw) = adaptive_window(h, oh), adaptive_window(w, ow)
        name = c.emit(node.name, OpKind.POOL, op_type, [c.tensor[x]], out, kernel=(kh, kw),
                      stride=(sh, sw), attrs={"adaptive": True})
    return [name, None] if isinstance(value, tuple) else name


def _mean(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    op = _op_name(node.target)
    dims = a.get("dim")
    keep = bool(a.get("keepdim") or False)
    pool = "max" if op == "amax" else "avg"
    if op == "amin":
        neg = c.emit(f"{node.name}.neg", OpKind.ELTWISE_UNARY, "neg", [c.tensor[x]], c.shape(x))
        y, shape, _ = c.reduce(f"{node.name}.max", neg, c.shape(x), dims, keep, "max")
        return c.emit(node.name, OpKind.ELTWISE_UNARY, "neg", [y], shape)
    y, shape, count = c.reduce(node.name if op in ("mean", "amax") else f"{node.name}.mean",
                               c.tensor[x], c.shape(x), dims, keep, pool)
    if op == "sum":
        return c.arith(node.name, "mul", y, float(count), shape)
    return y


def _var(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    xs = c.shape(x)
    dims, keep = a.get("dim"), bool(a.get("keepdim") or False)
    correction = a.get("correction")
    correction = 1 if correction is None and a.get("unbiased", True) else (correction or 0)
    m, m_shape, count = c.reduce(f"{node.name}.mean", c.tensor[x], xs, dims, True)
    d = c.emit(f"{node.name}.dev", OpKind.ELTWISE_BINARY, "sub", [c.tensor[x], m], xs)
    sq = c.emit(f"{node.name}.sq", OpKind.ELTWISE_BINARY, "mul", [d, d], xs)
    v, shape, _ = c.reduce(f"{node.name}.var" if correction else node.name, sq, xs, dims, keep)
    if correction:
        v = c.arith(node.name, "mul", v, count / max(count - float(correction), 1e-30), shape)
    if _op_name(node.target) == "var_mean":
        mean = m if keep else c.emit(f"{node.name}.m", OpKind.RESHAPE, "reshape", [m], shape)
        return [v, mean]
    return v


def _vector_norm(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = node.args[0]
    xs = c.shape(x)
    ord_ = float(a.get("ord", 2))
    dims, keep = a.get("dim"), bool(a.get("keepdim") or False)
    if ord_ == 2:
        sq = c.emit(f"{node.name}.sq", OpKind.ELTWISE_BINARY, "mul", [c.tensor[x]] * 2, xs)
        m, shape, count = c.reduce(f"{node.name}.mean", sq, xs, dims, keep)
        s = c.arith(f"{node.name}.sum", "mul", m, float(count), shape)
        return c.emit(node.name, OpKind.ELTWISE_UNARY, "sqrt", [s], shape)
    ab = c.emit(f"{node.name}.abs", OpKind.ELTWISE_UNARY, "abs", [c.tensor[x]], xs)
    if ord_ == 1:
        m, shape, count = c.reduce(f"{node.name}.mean", ab, xs, dims, keep)
        return c.arith(node.name, "mul", m, float(count), shape)
    if ord_ == math.inf:
        return c.reduce(node.name, ab, xs, dims, keep, "max")[0]
    raise _Refused(f"a vector norm of order {ord_}")


def _clamp(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    op = _op_name(node.target)
    low = a.get("min") if op != "clamp_max" else None
    high = a.get("max") if op != "clamp_min" else None
    if op == "clamp_min":
        low = a.get("min")
    if op == "clamp_max":
        high = a.get("max")
    if op == "hardtanh":
        low, high = a.get("min_val"), a.get("max_val")
    if any(isinstance(v, fx.Node) for v in (low, high)):
        lo = c.const(low) if low is not None else None
        hi = c.const(high) if high is not None else None
        if not all(v is None or (isinstance(v, torch.Tensor) and v.numel() == 1)
                   for v in (lo, hi)):
            raise _Refused("tensor bounds")
        low = float(lo) if lo is not None else None
        high = float(hi) if hi is not None else None
    attrs = {k: float(v) for k, v in (("min_val", low), ("max_val", high)) if v is not None}
    if attrs == {"min_val": 0.0, "max_val": 6.0}:
        return c._unary(node, "relu6")
    if attrs == {"min_val": 0.0}:
        return c._unary(node, "relu")
    if op == "hardtanh":
        return c._unary(node, "hardtanh", {k: v for k, v in attrs.items()
                                           if (k, v) not in (("min_val", -1.0),
                                                             ("max_val", 1.0))})
    return c._unary(node, "clip", attrs)


def _rsqrt(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    return c.arith(node.name, "pow", c.tensor[node.args[0]], -0.5, c.shape(node))


def _square(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    x = c.tensor[node.args[0]]
    return c.emit(node.name, OpKind.ELTWISE_BINARY, "mul", [x, x], c.shape(node))


def _addcmul(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    out = c.shape(node)
    t1, t2 = c.operand(a["tensor1"]), c.operand(a["tensor2"])
    if not isinstance(t1, str) and not isinstance(t2, str):
        prod: Any = t1 * t2
    else:
        prod = c.arith(f"{node.name}.mul", "mul", t1, t2,
                       torch.broadcast_shapes(c.shape(a["tensor1"]), c.shape(a["tensor2"])))
    value = a.get("value", 1)
    if value != 1:
        prod = c.arith(f"{node.name}.value", "mul", prod, float(value),
                       c.shape(a["tensor1"])) if isinstance(prod, str) else prod * value
    return c.arith(node.name, "add", c.operand(a["self"]), prod, out)


def _where(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    cond, x, y = a["condition"], a["self"], a["other"]
    if c.is_act(cond):
        raise _Refused("a condition computed from the input")
    keep = c.const(cond).to(torch.bool)
    if c.is_act(x) and c.is_act(y):
        raise _Refused("selecting between two activations")
    out = c.shape(node)
    if c.is_act(x):
        act, fill, keep_act = x, c.const(y), keep
    else:
        act, fill, keep_act = y, c.const(x), ~keep
    fill = torch.as_tensor(fill, dtype=torch.float32)
    if bool(keep_act.all()):
        return _Alias(c.tensor[act]) if c.shape(act) == out else \
            _expand(c, node, {})
    # act where keep_act, fill elsewhere: act * keep + where(keep, 0, fill); an infinite fill
    # needs no multiply (x + -inf = -inf)
    add = torch.where(keep_act, torch.zeros(()), fill).to(torch.float32)
    xi = c.tensor[act]
    finite = bool(torch.isfinite(torch.where(keep_act, torch.zeros(()), fill)).all())
    if finite and bool((fill != 0).any() | (~keep_act).any()):
        xi = c.arith(f"{node.name}.keep", "mul", xi, keep_act.to(torch.float32),
                     torch.broadcast_shapes(c.shape(act), tuple(keep_act.shape)))
    if bool((add != 0).any()):
        return c.arith(node.name, "add", xi, add, out)
    return xi


def _sdpa(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    q, k, v = a["query"], a["key"], a["value"]
    if not all(c.is_act(t) for t in (q, k, v)):
        raise _Refused("a constant query, key or value")
    qs, ks, vs = c.shape(q), c.shape(k), c.shape(v)
    base = node.name
    ki, vi = c.tensor[k], c.tensor[v]
    if a.get("enable_gqa") and qs[-3] != ks[-3]:
        g = qs[-3] // ks[-3]
        for t, shape, label in ((ki, ks, "k"), (vi, vs, "v")):
            five = (*shape[:-2], 1, *shape[-2:])
            five = (*shape[:-3], shape[-3], 1, *shape[-2:])
            r = c.emit(f"{base}.{label}_heads", OpKind.RESHAPE, "unsqueeze", [t], five)
            big = (*shape[:-3], shape[-3], g, *shape[-2:])
            e = c.emit(f"{base}.{label}_expand", OpKind.RESHAPE, "expand", [r], big)
            merged = (*shape[:-3], shape[-3] * g, *shape[-2:])
            name = c.emit(f"{base}.{label}_repeat", OpKind.RESHAPE, "reshape", [e], merged)
            if label == "k":
                ki, ks = name, merged
            else:
                vi, vs = name, merged
    rank = len(ks)
    perm = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    kt_shape = tuple(ks[p] for p in perm)
    kt = c.emit(f"{base}.k_t", OpKind.TRANSPOSE, "transpose", [ki], kt_shape,
                attrs={"perm": perm})
    s_shape = matmul_shape(qs, kt_shape)
    s = c.emit(f"{base}.scores", OpKind.MATMUL, "matmul", [c.tensor[q], kt], s_shape,
               macs=matmul_macs(s_shape, qs))
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(qs[-1]) if scale is None else float(scale)
    s = c.arith(f"{base}.scale", "mul", s, scale, s_shape)
    mask = a.get("attn_mask")
    if a.get("is_causal"):  # top-left aligned, as torch's: key j of query i kept iff j <= i
        s = c.emit(f"{base}.causal", OpKind.ELTWISE_UNARY, "causal_mask", [s], s_shape,
                   attrs={"group": 1, "offset": 0})
    if mask is not None:
        if c.is_act(mask):
            if c.val[mask].dtype == torch.bool:
                raise _Refused("a boolean mask computed from the input")
            m_shape = tuple(torch.broadcast_shapes(s_shape, c.shape(mask)))
            s = c.emit(f"{base}.mask", OpKind.ELTWISE_BINARY, "add", [s, c.tensor[mask]],
                       m_shape)
            s_shape = m_shape
        else:
            m = c.const(mask)
            if m.dtype == torch.bool:
                m = torch.zeros(m.shape).masked_fill(~m, -math.inf)
            s_shape = tuple(torch.broadcast_shapes(s_shape, tuple(m.shape)))
            s = c.arith(f"{base}.mask", "add", s, m.to(torch.float32), s_shape)
    p = c.emit(f"{base}.softmax", OpKind.SOFTMAX, "softmax", [s], s_shape,
               attrs={"axis": len(s_shape) - 1})
    out = c.shape(node)
    return c.emit(base, OpKind.MATMUL, "matmul", [p, vi], out, macs=matmul_macs(out, s_shape))


def _causal_mask(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    """The zoo decoder's ``fusion_dse::causal_mask`` (`simulator.workload.zoo.llama`)."""
    return c.emit(node.name, OpKind.ELTWISE_UNARY, "causal_mask", [c.tensor[a["scores"]]],
                  c.shape(node), attrs={"group": int(a["group"]), "offset": int(a["offset"])})


def _resize(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    op = _op_name(node.target)
    mode = {"upsample_nearest2d": "nearest", "upsample_bilinear2d": "bilinear",
            "upsample_bicubic2d": "bicubic"}[op]
    attrs: dict[str, Any] = {"mode": mode}
    if a.get("align_corners"):
        attrs["align_corners"] = True
    out = c.shape(node)
    if mode == "nearest":
        x = c.shape(node.args[0])
        scale = a.get("scale_factors")
        if scale and any(o != int(i * s) for o, i, s in zip(out[2:], x[2:], scale,
                                                             strict=False)):
            raise _Refused("a nearest resize whose size is not the scaled input's")
    attrs["size"] = tuple(out[2:])
    return c.emit(node.name, OpKind.RESIZE, "resize", [c.tensor[node.args[0]]], out,
                  attrs=attrs)


def _shuffle(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    op = _op_name(node.target)
    key = {"pixel_shuffle": "upscale_factor", "pixel_unshuffle": "downscale_factor",
           "channel_shuffle": "groups"}[op]
    value = a.get(key, a.get("groups"))
    return c.emit(node.name, OpKind.TRANSPOSE, op, [c.tensor[node.args[0]]], c.shape(node),
                  attrs={key: int(value)})


def _im2col(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    """``F.unfold`` (im2col): a convolution with one group per channel whose kh x kw outputs
    per channel pick one window position each (one-hot weights, counted as no weights)."""
    x = node.args[0]
    n, ch, h, w = c.shape(x)
    k, d = _pair(a["kernel_size"]), _pair(a["dilation"])
    p, s = _pair(a["padding"]), _pair(a["stride"])
    taps = k[0] * k[1]
    weight = torch.zeros(ch * taps, 1, *k)
    for t in range(taps):
        weight[t::taps, 0, t // k[1], t % k[1]] = 1.0
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    conv_out = (n, ch * taps, oh, ow)
    conv = c.emit(f"{node.name}.windows", OpKind.DWCONV, "im2col", [c.tensor[x]], conv_out,
                  params={"weight": weight}, kernel=k, stride=s, dilation=d,
                  padding=(p[0], p[1], p[0], p[1]), groups=ch, weight_elems=0, macs=0)
    return c.emit(node.name, OpKind.RESHAPE, "view", [conv], c.shape(node))


def _unfold(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    """``Tensor.unfold(dim, size, step)``: the windows' elements gathered along `dim`, split
    into (windows, size) and the window axis moved last."""
    x = node.args[0]
    shape = c.shape(x)
    rank = len(shape)
    dim = int(a["dimension"]) % rank
    size, step = int(a["size"]), int(a["step"])
    n = (shape[dim] - size) // step + 1
    indices = tuple(i * step + j for i in range(n) for j in range(size))
    if len(indices) > MAX_GATHER:
        raise _Refused(f"more than {MAX_GATHER} window elements")
    g_shape = (*shape[:dim], n * size, *shape[dim + 1:])
    g = c.emit(f"{node.name}.gather", OpKind.TRANSPOSE, "gather", [c.tensor[x]], g_shape,
               attrs={"axis": dim, "indices": indices})
    split = (*shape[:dim], n, size, *shape[dim + 1:])
    v = c.emit(f"{node.name}.split", OpKind.RESHAPE, "reshape", [g], split)
    perm = tuple(d for d in range(rank + 1) if d != dim + 1) + (dim + 1,)
    if perm == tuple(range(rank + 1)):
        return v
    return c.emit(node.name, OpKind.TRANSPOSE, "permute", [v], c.shape(node),
                  attrs={"perm": perm})


def _flip(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    """``torch.flip``: a gather of the reversed indices along each flipped axis."""
    x = node.args[0]
    shape = c.shape(x)
    name = c.tensor[x]
    dims = sorted({int(d) % len(shape) for d in a["dims"]})
    for k, d in enumerate(dims):
        if shape[d] > MAX_GATHER:
            raise _Refused(f"an axis of more than {MAX_GATHER} elements")
        name = c.emit(node.name if k == len(dims) - 1 else f"{node.name}.{d}", OpKind.TRANSPOSE,
                      "gather", [name], shape,
                      attrs={"axis": d, "indices": tuple(range(shape[d] - 1, -1, -1))})
    return _Alias(name) if not dims else name


def _repeat_interleave(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    raise _Refused("repeats given as a tensor")


def _const_like(c: _Converter, node: fx.Node, a: dict[str, Any]) -> Any:
    return None


_HANDLERS: dict[str, Callable[[_Converter, fx.Node, dict[str, Any]], Any]] = {
    "convolution": _conv, "conv2d": _conv, "conv1d": _conv,
    "_native_batch_norm_legit_no_training": _batch_norm,
    "batch_norm": _batch_norm_plain, "instance_norm": _instance_norm,
    "linear": _linear, "matmul": _matmul, "mm": _matmul, "bmm": _matmul, "addmm": _addmm,
    "layer_norm": _layer_norm, "native_layer_norm": _layer_norm, "rms_norm": _rms_norm,
    "group_norm": _group_norm, "native_group_norm": _group_norm,
    "_softmax": _softmax, "_log_softmax": _softmax, "softmax": _softmax,
    "log_softmax": _softmax, "_safe_softmax": _softmax,
    "view": _reshape, "_unsafe_view": _reshape, "reshape": _reshape, "squeeze": _reshape,
    "unsqueeze": _reshape, "flatten": _reshape,
    "expand": _expand, "repeat": _repeat,
    "permute": _permute, "transpose": _permute, "t": _permute,
    "cat": _cat, "slice": _slice, "select": _select,
    "split": _split, "split_with_sizes": _split, "unbind": _split, "chunk": _split,
    "index": _index, "index_select": _index_select, "embedding": _embedding,
    "constant_pad_nd": _pad, "pad": _pad, "reflection_pad2d": _pad,
    "replication_pad2d": _pad, "reflection_pad1d": _pad, "replication_pad1d": _pad,
    "max_pool2d_with_indices": _max_pool, "max_pool2d": _max_pool, "avg_pool2d": _avg_pool,
    "_adaptive_avg_pool2d": _adaptive_pool, "adaptive_avg_pool2d": _adaptive_pool,
    "adaptive_max_pool2d": _adaptive_pool,
    "mean": _mean, "sum": _mean, "amax": _mean, "amin": _mean,
    "var": _var, "var_mean": _var, "linalg_vector_norm": _vector_norm,
    "clamp": _clamp, "clamp_min": _clamp, "clamp_max": _clamp, "hardtanh": _clamp,
    "rsqrt": _rsqrt, "square": _square, "addcmul": _addcmul, "where": _where,
    "scaled_dot_product_attention": _sdpa, "causal_mask": _causal_mask,
    "upsample_nearest2d": _resize, "upsample_bilinear2d": _resize,
    "upsample_bicubic2d": _resize,
    "pixel_shuffle": _shuffle, "pixel_unshuffle": _shuffle, "channel_shuffle": _shuffle,
    "im2col": _im2col, "as_strided": _as_strided, "unfold": _unfold, "flip": _flip,
}
ATEN_TABLE = sorted({*_HANDLERS, *_ALIAS_OPS, *_UNARY, *_ACT_ATTRS, *_ARITH, *_CONST_LIKE})
"""Every ATen op name the converter maps (docs/importers.md)."""


# --- entry points --------------------------------------------------------------------------


class ExportResult:
    """What `from_export_with_params` found besides the graph: BatchNorms folded (for the
    parameter count's reconciliation with the module's) and the ops imported as opaque."""

    def __init__(self, folded: list[tuple[str, int, int]], opaque: list[str]) -> None:
        self.folded = folded
        self.opaque = opaque

    @property
    def folded_params(self) -> int:
        """Module parameters a folded BatchNorm removed (its scale and shift), less the conv
        biases folding added."""
        return sum(bn - added for _, bn, added in self.folded)


def _examples(module: nn.Module, input_shape: Any,
              example: Sequence[torch.Tensor] | None) -> list[torch.Tensor]:
    """`example`, or one input of `input_shape`: token ids (integers below every embedding
    table's size) for a rank-2 shape of a module with an ``nn.Embedding`` (a language model
    named by ``module:callable``), else a float tensor."""
    if example is not None:
        return [t for t in example]
    shape = check_input_shape(input_shape)
    gen = torch.Generator().manual_seed(0)
    tables = [m.num_embeddings for m in module.modules() if isinstance(m, nn.Embedding)]
    if len(shape) == 2 and tables:
        return [torch.randint(0, min(tables), shape, generator=gen)]
    return [torch.randn(shape, generator=gen)]


def from_export_with_params(module: nn.Module, input_shape: Sequence[int] | str | None = None,
                            *, name: str | None = None, fold_bn: bool = True,
                            allow_opaque: bool = False,
                            example: Sequence[torch.Tensor] | None = None,
                            ) -> tuple[ComputeGraph, Params, ExportResult]:
    """Import `module` through ``torch.export``: the graph, its parameters in the executor's
    format (`simulator.workload.execute`) and the import's `ExportResult`.

    Args:
        module: The network (put in eval mode; not modified otherwise).
        input_shape: Shape of the single input (float; token ids for a rank-2 shape of a
            module with an ``nn.Embedding``); or give `example`.
        name: Graph name (default: the module's class name).
        fold_bn: Fold a BatchNorm into the convolution before it.
        allow_opaque: Import ATen ops without a mapping as opaque ops (with a warning).
        example: The example inputs (token ids for a language model: an integer tensor; the
            graph's input then has its shape and the executor takes the ids as floats).

    Raises:
        InputShapeError, UnsupportedOpError (one line, naming the ATen op and node).
    """
    name = name or type(module).__name__
    inputs = _examples(module, input_shape, example)
    module = module.eval()
    ep = export_program(module, inputs, name)
    conv = _Converter(ep, name, fold_bn, allow_opaque, inputs)
    graph = conv.convert()
    return graph, conv.params, ExportResult(conv.folded, conv.opaque)


def from_export(module: nn.Module, input_shape: Sequence[int] | str | None = None, *,
                name: str | None = None, fold_bn: bool = True, allow_opaque: bool = False,
                example: Sequence[torch.Tensor] | None = None) -> ComputeGraph:
    """`from_export_with_params`'s graph alone."""
    return from_export_with_params(module, input_shape, name=name, fold_bn=fold_bn,
                                   allow_opaque=allow_opaque, example=example)[0]


# --- coverage (docs/importers.md, simulator.workload.coverage) ------------------------------

DROPPED = "(none: dropped)"
COVERAGE: tuple[tuple[tuple[str, ...], str, str, str], ...] = (
    (tuple(sorted(_ALIAS_OPS)), DROPPED, "", "the identity at inference (dtype and layout "
     "do not change the IR)"),
    (tuple(sorted(_CONST_LIKE)), "(constant)", "", "no data of an activation: the value is "
     "computed when the program runs once and enters the IR as a constant operand"),
    (("convolution", "conv2d", "conv1d"), "conv / dwconv", "conv", "2-D; 1-D as a 2-D "
     "convolution over a unit height (reshapes around it); constant weights; transposed and "
     "3-D refused"),
    (("_native_batch_norm_legit_no_training", "batch_norm"), "batchnorm", "batchnorm",
     "running statistics (F.batch_norm, timm's BatchNormAct2d, BatchNorm1d); folded into the "
     "convolution before it when that convolution has no other reader (then no op)"),
    (("instance_norm",), "norm / batchnorm", "groupnorm / batchnorm",
     "one group per channel; with running statistics a batchnorm"),
    (("linear",), "linear", "linear", "constant weight and bias"),
    (("matmul", "mm", "bmm"), "matmul / linear", "matmul / linear",
     "two activations: matmul; a constant 2-D second operand: linear (weight W^T); a constant "
     "2-D first operand: transpose, linear, transpose"),
    (("addmm",), "linear", "linear", "constant matrix and bias (alpha = beta = 1)"),
    (("layer_norm", "native_layer_norm"), "norm", "layernorm", "trailing axes (attr axes)"),
    (("rms_norm",), "norm", "rmsnorm", "trailing axes (attr axes)"),
    (("group_norm", "native_group_norm"), "norm", "groupnorm", "attr groups"),
    (("_softmax", "_log_softmax", "softmax", "log_softmax", "_safe_softmax"), "softmax",
     "softmax", "any axis; log: attr log"),
    (("view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "flatten"), "reshape",
     "view / reshape / squeeze / unsqueeze / flatten", "a same-shape reshape is dropped"),
    (("expand",), "reshape", "expand", "a broadcast copy of an activation"),
    (("repeat",), "reshape", "unsqueeze, expand, reshape", "as a broadcast copy"),
    (("permute", "transpose", "t"), "transpose", "permute / transpose",
     "attr perm; the identity is dropped"),
    (("cat",), "concat", "concat", "constant operands (a class token) count as weights "
     "(attrs const_at, const_shapes)"),
    (("slice", "select"), "slice", "slice", "constant bounds; select drops the axis"),
    (("split", "split_with_sizes", "unbind", "chunk"), "slice", "slice", "one slice per item "
     "read"),
    (("index", "index_select"), "slice / transpose", "slice / gather",
     "one constant index tensor: a strided range is a slice, any other a gather (attrs axis, "
     "indices; torch.roll decomposes to it); indices computed from the input refused"),
    (("unfold",), "transpose, reshape", "gather, reshape, permute", "Tensor.unfold's windows"),
    (("flip",), "transpose", "gather", "the reversed indices along each flipped axis"),
    (("as_strided",), "reshape", "view", "only a strided view that reads its input in order"),
    (("im2col",), "dwconv, reshape", "im2col, view", "F.unfold: a convolution per channel "
     "with one-hot weights (counted as no weights, no MACs)"),
    (("embedding",), "linear", "embedding", "token ids read rows of the table (its weights, "
     "attr num_embeddings); the executor takes the ids as floats"),
    (("constant_pad_nd", "pad", "reflection_pad2d", "replication_pad2d", "reflection_pad1d",
      "replication_pad1d"), "pad", "pad", "the last two axes only; an infinite value is "
     "written as float32's largest"),
    (("max_pool2d_with_indices", "max_pool2d"), "pool", "max", "a 1x1 stride-1 window is "
     "dropped"),
    (("avg_pool2d",), "pool", "avg", "divisor_override refused"),
    (("_adaptive_avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d"),
     "global_pool / pool", "avg / max", "1x1 output: a global pool; else the widest window "
     "(attr adaptive)"),
    (("mean", "sum", "amax", "amin"), "global_pool", "avg / max",
     "over (H, W) of a 4-D map a global pool; over any other axes: the reduced axes moved "
     "last (transpose), a (1, M, R, 1) view (reshape), a global pool, a reshape; sum multiplies "
     "by R, amin negates around a max"),
    (("var", "var_mean"), "global_pool, eltwise", "avg, sub, mul",
     "mean, deviation, its square, mean, the correction as a multiply"),
    (("linalg_vector_norm",), "eltwise, global_pool", "mul / abs, avg / max, sqrt",
     "orders 1, 2 and infinity (F.normalize)"),
    (("clamp", "clamp_min", "clamp_max", "hardtanh"), "eltwise_unary",
     "clip / relu6 / relu / hardtanh", "constant bounds"),
    (("rsqrt",), "eltwise_unary", "pow", "attr scalar -0.5"),
    (("square",), "eltwise_binary", "mul", "x * x"),
    (("addcmul",), "eltwise", "mul, add", "value != 1 adds a multiply"),
    (("where",), "eltwise_unary", "mul, add", "a constant condition and one activation: "
     "the kept values multiplied by the condition, the fill added (an infinite fill needs no "
     "multiply); a condition computed from the input refused"),
    (("scaled_dot_product_attention",), "transpose, matmul, eltwise_unary, softmax",
     "", "K^T, Q @ K^T, the scale, is_causal as a causal_mask op (no weights), a constant "
     "mask's additive 0 / -inf, softmax, P @ V; grouped-query heads repeated (unsqueeze, "
     "expand, reshape)"),
    (("causal_mask",), "eltwise_unary", "causal_mask", "the zoo decoder's fusion_dse::"
     "causal_mask (attrs group, offset): no weights"),
    (("upsample_nearest2d", "upsample_bilinear2d", "upsample_bicubic2d"), "resize", "resize",
     "attrs mode, align_corners, size"),
    (("pixel_shuffle", "pixel_unshuffle", "channel_shuffle"), "transpose",
     "pixel_shuffle / pixel_unshuffle / channel_shuffle", ""),
    (tuple(sorted(_UNARY)), "eltwise_unary", "(the same name)", ""),
    (tuple(sorted(_ACT_ATTRS)), "eltwise_unary", "(the same name)",
     "parameters that differ from torch's defaults as attrs"),
    (tuple(sorted(_ARITH)), "eltwise_binary / eltwise_unary", "add / sub / mul / div / pow / "
     "max / min", "two activations: binary; an activation and a constant: unary with attr "
     "scalar or a const tensor (alpha applied; rsub swaps; div with a rounding mode refused)"),
)
"""What each ATen op becomes (docs/importers.md); every name of `ATEN_TABLE` once."""
