"""Running a `ComputeGraph` with torch on the CPU: the judge of importers and graph rewrites.

The IR carries no weights; `execute` takes them as `Params`, a dict from op name to that op's
named tensors (formats below), and runs every op kind the importers and the zoo emit. Ops whose
behaviour depends on more than their kind and window fields read it from `Op.attrs` (recorded by
both importers under the same names):

==================  ==========================================================================
kind                attrs read (all optional unless noted)
==================  ==========================================================================
conv / dwconv       ``padding_mode`` ("zeros", "reflect", "replicate", "circular")
pool                ``ceil_mode``, ``count_include_pad`` (default True), ``adaptive``
eltwise_unary       activation parameters (`activation_text`); arithmetic with a constant:
                    ``scalar`` (float) or a ``const`` tensor (shape ``const_shape``), and
                    ``const_side`` ("left" | "right", default "right")
concat / softmax    ``axis`` (default 1 / the last axis; softmax: an int or a tuple of
                    consecutive axes), softmax ``log`` (log-softmax); concat ``const_at``:
                    the positions of constant operands among all operands (parameters
                    ``const0``, ``const1``, ... in that order, shapes ``const_shapes``)
norm                ``axes`` (normalised axes, required; trailing for layernorm / rmsnorm,
                    (1, ..., rank - 1) for groupnorm), ``eps`` (default 1e-5), ``groups``
                    (groupnorm), ``affine`` (default False: no scale or bias)
slice               ``axis``, ``start``, ``end``, ``step`` (required; ints or equal-length tuples)
resize              ``mode`` (default "nearest"), ``align_corners``
pad                 ``mode`` ("constant", "reflect", "replicate", "circular"), ``value``
transpose           ``perm`` (transpose/permute), ``upscale_factor`` (pixel shuffle),
                    ``downscale_factor`` (pixel unshuffle), ``groups`` (channel shuffle),
                    ``axis`` and ``indices`` (gather: constant indices along one axis)
any op              ``epilogue``: activation texts applied in order to the op's output
==================  ==========================================================================

Parameter formats (float32):

- conv / dwconv: ``weight`` (C_out, C_in/groups, kh, kw); ``bias`` (C_out,) present iff the op's
  ``weight_elems`` exceeds the weight's numel.
- linear: ``weight`` (out_features, in_features), ``bias`` likewise; applied on the last axis.
  op_type ``embedding``: ``weight`` (attr ``num_embeddings``, dim), read at the input's ids.
- batchnorm: ``scale`` (C,), ``shift`` (C,): ``y = x * scale[c] + shift[c]``.
- norm (when ``affine``): ``weight`` and, iff the op's ``weight_elems`` exceeds the weight's
  numel, ``bias``: per channel (C,) for groupnorm, the normalised shape for layernorm / rmsnorm
  (rmsnorm has no bias).
- matmul: none (both operands are activations: ``torch.matmul(a, b)``).
- eltwise with a constant tensor operand: ``const``, broadcastable to the output.
- prelu: ``weight`` (1 or C slopes, along axis 1).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from simulator.errors import InputError
from simulator.workload.graph import (
    ComputeGraph,
    Op,
    OpKind,
    is_network_input,
    network_input_index,
)
from simulator.workload.ops import ACTIVATIONS, const_operand_shape, norm_param_shape

__all__ = [
    "ARITHMETIC",
    "ExecutionError",
    "Params",
    "activation_text",
    "apply_activation",
    "execute",
    "random_params",
]

Params = dict[str, dict[str, torch.Tensor]]
"""Per op name, its named parameter tensors; ops without parameters are absent."""

ARITHMETIC = ("add", "sub", "mul", "div", "pow", "max", "min")
"""Elementwise arithmetic op types (binary, or unary with a constant operand)."""


class ExecutionError(InputError):
    """A graph, its parameters or its inputs that the executor cannot run (names the op)."""


# --- activations --------------------------------------------------------------------------------

_TEXT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$")
_NOT_ACTIVATION_ATTRS = frozenset({"epilogue", "const_shape"})


def _arith(op_type: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
            "pow": torch.pow, "max": torch.maximum, "min": torch.minimum}[op_type]


def _clip(x: torch.Tensor, p: Mapping[str, Any]) -> torch.Tensor:
    low, high = p.get("min_val"), p.get("max_val")
    return torch.clamp(x, None if low is None else float(low),
                       None if high is None else float(high))


def _hardsigmoid(x: torch.Tensor, p: Mapping[str, Any]) -> torch.Tensor:
    if "alpha" not in p and "beta" not in p:
        return F.hardsigmoid(x)
    return torch.clamp(x * float(p.get("alpha", 1 / 6)) + float(p.get("beta", 0.5)), 0.0, 1.0)


def _threshold(x: torch.Tensor, p: Mapping[str, Any]) -> torch.Tensor:
    if "threshold" not in p or "value" not in p:
        raise ExecutionError("threshold needs its threshold and value parameters")
    return F.threshold(x, float(p["threshold"]), float(p["value"]))


def _causal_mask(x: torch.Tensor, p: Mapping[str, Any]) -> torch.Tensor:
    """Scores ``(..., R, S)`` whose row r is query ``r // group`` at position ``r // group +
    offset``: key j kept iff j <= that position, -inf elsewhere (group 1, offset 0: torch's
    ``is_causal``)."""
    rows, cols = x.shape[-2:]
    pos = torch.arange(rows) // int(p.get("group", 1)) + int(p.get("offset", 0))
    keep = torch.arange(cols)[None, :] <= pos[:, None]
    return x.masked_fill(~keep.to(x.device), -math.inf)


_ACTIVATION_FNS: dict[str, Callable[[torch.Tensor, Mapping[str, Any]], torch.Tensor]] = {
    "causal_mask": _causal_mask,
    "relu": lambda x, p: F.relu(x),
    "relu6": lambda x, p: F.relu6(x),
    "hardtanh": lambda x, p: F.hardtanh(x, float(p.get("min_val", -1.0)),
                                        float(p.get("max_val", 1.0))),
    "clip": _clip,
    "hardswish": lambda x, p: F.hardswish(x),
    "hardsigmoid": _hardsigmoid,
    "sigmoid": lambda x, p: torch.sigmoid(x),
    "silu": lambda x, p: F.silu(x),
    "tanh": lambda x, p: torch.tanh(x),
    "gelu": lambda x, p: F.gelu(x, approximate=str(p.get("approximate", "none"))),
    "elu": lambda x, p: F.elu(x, float(p.get("alpha", 1.0))),
    "leakyrelu": lambda x, p: F.leaky_relu(x, float(p.get("negative_slope", 0.01))),
    "mish": lambda x, p: F.mish(x),
    "softplus": lambda x, p: F.softplus(x, float(p.get("beta", 1.0)),
                                        float(p.get("threshold", 20.0))),
    "selu": lambda x, p: F.selu(x),
    "celu": lambda x, p: F.celu(x, float(p.get("alpha", 1.0))),
    "softsign": lambda x, p: F.softsign(x),
    "tanhshrink": lambda x, p: F.tanhshrink(x),
    "logsigmoid": lambda x, p: F.logsigmoid(x),
    "hardshrink": lambda x, p: F.hardshrink(x, float(p.get("lambd", 0.5))),
    "softshrink": lambda x, p: F.softshrink(x, float(p.get("lambd", 0.5))),
    "threshold": _threshold,
    "exp": lambda x, p: torch.exp(x),
    "log": lambda x, p: torch.log(x),
    "sqrt": lambda x, p: torch.sqrt(x),
    "neg": lambda x, p: torch.neg(x),
    "abs": lambda x, p: torch.abs(x),
    "erf": lambda x, p: torch.erf(x),
    "reciprocal": lambda x, p: torch.reciprocal(x),
}


def _scalar_arith(op_type: str) -> Callable[[torch.Tensor, Mapping[str, Any]], torch.Tensor]:
    fn = _arith(op_type)

    def run(x: torch.Tensor, p: Mapping[str, Any]) -> torch.Tensor:
        if "scalar" not in p:
            raise ExecutionError(f"activation text {op_type!r} needs a scalar parameter")
        c = torch.tensor(float(p["scalar"]), dtype=x.dtype)
        return fn(c, x) if p.get("const_side", "right") == "left" else fn(x, c)

    return run


_ACTIVATION_FNS.update({t: _scalar_arith(t) for t in ARITHMETIC})


def _format_value(v: Any) -> str:
    if isinstance(v, bool) or isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    text = str(v)
    if not text or any(c in text for c in ",()= "):
        raise ExecutionError(f"activation parameter value {text!r} cannot be written as text")
    return text


def _parse_value(text: str) -> Any:
    text = text.strip()
    if text in ("True", "False"):
        return text == "True"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def activation_text(op: Op) -> str:
    """The text of a standalone activation op, as an ``epilogue`` entry holds it.

    ``op_type`` alone when the op has no parameters, else ``op_type(k=v,...)`` with its
    attributes sorted by key (a unary arithmetic op with a scalar constant included, e.g.
    ``mul(const_side=right,scalar=0.5)``).

    Raises:
        ExecutionError: The op is not an elementwise unary op, or it needs a parameter tensor
            (PReLU slopes, a constant tensor operand) that text cannot carry.
    """
    if op.kind is not OpKind.ELTWISE_UNARY:
        raise ExecutionError(f"op {op.name!r} ({op.kind.value}) is not an activation")
    name = ACTIVATIONS.get(op.op_type, op.op_type)
    if name == "prelu" or (name in ARITHMETIC and op.attr("scalar") is None):
        raise ExecutionError(f"op {op.name!r} ({op.op_type}) has a parameter tensor; it cannot "
                             "be written as an activation text")
    if name not in _ACTIVATION_FNS:
        raise ExecutionError(f"op {op.name!r}: unknown activation {op.op_type!r}")
    params = [(k, v) for k, v in op.attrs if k not in _NOT_ACTIVATION_ATTRS]
    if not params:
        return name
    return f"{name}(" + ",".join(f"{k}={_format_value(v)}" for k, v in sorted(params)) + ")"


def parse_activation(text: str) -> tuple[str, dict[str, Any]]:
    """(canonical op type, parameters) of an activation text (inverse of `activation_text`)."""
    m = _TEXT.match(text) if isinstance(text, str) else None
    if m is None:
        raise ExecutionError(f"malformed activation text {str(text)[:60]!r}")
    name = ACTIVATIONS.get(m[1].lower(), m[1].lower())
    if name not in _ACTIVATION_FNS:
        raise ExecutionError(f"unknown activation {m[1]!r} in {text[:60]!r}")
    params: dict[str, Any] = {}
    if m[2] is not None and m[2].strip():
        for part in m[2].split(","):
            key, eq, value = part.partition("=")
            if not eq or not key.strip():
                raise ExecutionError(f"malformed activation parameter {part!r} in {text[:60]!r}")
            params[key.strip()] = _parse_value(value)
    return name, params


def apply_activation(text: str, x: torch.Tensor) -> torch.Tensor:
    """Apply the activation an `activation_text` string names to `x`."""
    name, params = parse_activation(text)
    return _ACTIVATION_FNS[name](x, params)


# --- random parameters -------------------------------------------------------------------------


def _generator(seed: int, name: str) -> torch.Generator:
    digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") & (2**63 - 1))


def _uniform(shape: Sequence[int], low: float, high: float, g: torch.Generator) -> torch.Tensor:
    return torch.rand(tuple(shape), generator=g) * (high - low) + low


def param_shapes(op: Op) -> dict[str, tuple[int, ...]]:
    """Shapes of the parameter tensors `execute` expects for `op` (empty if it has none)."""
    if op.kind in (OpKind.CONV, OpKind.DWCONV):
        c_in = op.input_shapes[0][1]
        if c_in % op.groups:
            raise ExecutionError(f"op {op.name!r}: {c_in} input channels are not divisible "
                                 f"into {op.groups} groups")
        weight = (op.output_shape[1], c_in // op.groups, *op.kernel)
        shapes = {"weight": weight}
        if op.weight_elems > math.prod(weight):
            shapes["bias"] = (op.output_shape[1],)
        return shapes
    if op.kind is OpKind.LINEAR and op.op_type == "embedding":
        return {"weight": (int(op.attr("num_embeddings", 1)), op.output_shape[-1])}
    if op.kind is OpKind.LINEAR:
        weight = (op.output_shape[-1], op.input_shapes[0][-1])
        shapes = {"weight": weight}
        if op.weight_elems > math.prod(weight):
            shapes["bias"] = (op.output_shape[-1],)
        return shapes
    if op.kind is OpKind.BATCHNORM:
        c = op.output_shape[1]
        return {"scale": (c,), "shift": (c,)}
    if op.kind is OpKind.NORM:
        if not op.attr("affine", False):
            return {}
        shape = norm_param_shape(op)
        shapes = {"weight": shape}
        if op.weight_elems > math.prod(shape):
            shapes["bias"] = shape
        return shapes
    if op.kind is OpKind.CONCAT and op.attr("const_at") is not None:
        return {f"const{k}": tuple(int(d) for d in shape)
                for k, shape in enumerate(op.attr("const_shapes") or ())}
    if op.kind is OpKind.ELTWISE_UNARY and ACTIVATIONS.get(op.op_type) == "prelu":
        return {"weight": (max(1, op.weight_elems),)}
    if _needs_const(op):
        return {"const": _const_shape(op)}
    return {}


def _needs_const(op: Op) -> bool:
    return (op.kind is OpKind.ELTWISE_UNARY and op.op_type in ARITHMETIC
            and op.attr("scalar") is None)


def _const_shape(op: Op) -> tuple[int, ...]:
    shape = const_operand_shape(op)
    if shape is not None:
        return shape
    raise ExecutionError(f"op {op.name!r} ({op.op_type}) has neither a scalar nor the shape of "
                         "its constant operand recorded; re-import the model")


def random_params(graph: ComputeGraph, seed: int = 0) -> Params:
    """Random parameters for every op of `graph` that has any, deterministic per seed.

    Each op's tensors depend only on the seed and the op's name and shapes, so ops a rewrite
    leaves alone keep their parameters. Weights are scaled by 1/sqrt(fan-in), biases and
    BatchNorm shifts are small and BatchNorm scales near 1, so activations stay O(1); constant
    operands lie in [0.5, 1.5] (safe for division).
    """
    params: Params = {}
    for op in graph.ops:
        shapes = param_shapes(op)
        if not shapes:
            continue
        g = _generator(seed, op.name)
        tensors: dict[str, torch.Tensor] = {}
        for key, shape in shapes.items():
            if key == "weight" and op.kind is OpKind.NORM:  # a scale near 1
                tensors[key] = _uniform(shape, 0.8, 1.2, g)
            elif key == "weight" and op.kind is not OpKind.ELTWISE_UNARY:
                bound = math.sqrt(3.0 / max(1, math.prod(shape[1:])))
                tensors[key] = _uniform(shape, -bound, bound, g)
            elif key == "weight":  # prelu slopes
                tensors[key] = _uniform(shape, 0.0, 0.5, g)
            elif key == "scale":
                tensors[key] = _uniform(shape, 0.8, 1.2, g)
            elif key.startswith("const"):
                tensors[key] = _uniform(shape, 0.5, 1.5, g)
            else:  # bias, shift
                tensors[key] = _uniform(shape, -0.1, 0.1, g)
        params[op.name] = tensors
    return params


# --- execution ---------------------------------------------------------------------------------


def execute(graph: ComputeGraph, params: Mapping[str, Mapping[str, torch.Tensor]],
            inputs: torch.Tensor | Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Run `graph` on `inputs` with `params`; the network outputs in `graph.outputs` order.

    Args:
        graph: The graph.
        params: Parameter tensors per op name (see the module docstring).
        inputs: One tensor per network input (a bare tensor for a single-input graph), each of
            the graph's input shape.

    Raises:
        ExecutionError: An op the executor cannot run (an opaque op, missing attributes or
            parameters), inputs of the wrong number or shape, or an op whose result does not
            have the output shape the graph records.
    """
    xs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
    if len(xs) != len(graph.input_shapes):
        raise ExecutionError(f"graph {graph.name!r} takes {len(graph.input_shapes)} input(s), "
                             f"got {len(xs)}")
    for k, (x, shape) in enumerate(zip(xs, graph.input_shapes, strict=True)):
        if not isinstance(x, torch.Tensor) or tuple(x.shape) != tuple(shape):
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ExecutionError(f"input {k} ({graph.input_names[k]!r}) of graph "
                                 f"{graph.name!r} must have shape {tuple(shape)}, got {got}")
    last_use = _last_uses(graph)
    values: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for op in graph.ops:
            args = [xs[network_input_index(r)] if is_network_input(r) else values[r]
                    for r in op.inputs]
            y = _run_op(op, args, params.get(op.name, {}))
            for text in op.attr("epilogue") or ():
                y = _in_op(op, apply_activation, text, y)
            if tuple(y.shape) != tuple(op.output_shape):
                raise ExecutionError(f"op {op.name!r} ({op.kind.value} {op.op_type}) computed "
                                     f"shape {tuple(y.shape)}, the graph records "
                                     f"{tuple(op.output_shape)}")
            values[op.id] = y
            for r in set(op.inputs):
                if r >= 0 and last_use[r] == op.id and r not in graph.output_set:
                    del values[r]
    return [values[o] for o in graph.outputs]


def _last_uses(graph: ComputeGraph) -> dict[int, int]:
    last = {op.id: op.id for op in graph.ops}
    for op in graph.ops:
        for r in op.inputs:
            if r >= 0:
                last[r] = op.id
    return last


def _in_op(op: Op, fn: Callable[..., torch.Tensor], *args: Any) -> torch.Tensor:
    try:
        return fn(*args)
    except ExecutionError as err:
        raise ExecutionError(f"op {op.name!r}: {err}") from None


def _run_op(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    runner = _RUNNERS.get(op.kind)
    if runner is None:
        raise ExecutionError(f"op {op.name!r} is opaque ({op.op_type}); the executor cannot "
                             "run it")
    for key, shape in param_shapes(op).items():
        t = p.get(key)
        if t is None:
            raise ExecutionError(f"op {op.name!r} ({op.kind.value}) has no parameter {key!r}")
        if tuple(t.shape) != tuple(shape) and not (key == "const" and _broadcasts(t, op)):
            raise ExecutionError(f"op {op.name!r}: parameter {key!r} has shape "
                                 f"{tuple(t.shape)}, expected {tuple(shape)}")
    try:
        return runner(op, args, p)
    except ExecutionError as err:
        if op.name in str(err):
            raise
        raise ExecutionError(f"op {op.name!r} ({op.kind.value} {op.op_type}): {err}") from None
    except (RuntimeError, ValueError, IndexError, TypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ExecutionError(f"op {op.name!r} ({op.kind.value} {op.op_type}) failed: "
                             f"{first[:200]}") from err


def _broadcasts(t: torch.Tensor, op: Op) -> bool:
    try:
        return tuple(torch.broadcast_shapes(tuple(t.shape), op.output_shape)) == op.output_shape
    except RuntimeError:
        return False


def _spatial_pad(x: torch.Tensor, padding: Sequence[int], mode: str = "constant",
                 value: float = 0.0) -> torch.Tensor:
    top, left, bottom, right = padding
    if not any(padding):
        return x
    if mode == "constant":
        return F.pad(x, (left, right, top, bottom), value=value)
    return F.pad(x, (left, right, top, bottom), mode=mode)


def _conv(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    mode = str(op.attr("padding_mode", "zeros"))
    x = _spatial_pad(args[0], op.padding, "constant" if mode == "zeros" else mode)
    return F.conv2d(x, p["weight"], p.get("bias"), stride=op.stride, padding=0,
                    dilation=op.dilation, groups=op.groups)


def _linear(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    if op.op_type == "embedding":  # token ids (any dtype) read rows of the table
        return F.embedding(args[0].round().long(), p["weight"])
    return F.linear(args[0], p["weight"], p.get("bias"))


def _pool(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    x = args[0]
    if op.attr("adaptive"):
        size = tuple(op.output_shape[-2:])
        return (F.adaptive_max_pool2d(x, size) if op.op_type == "max"
                else F.adaptive_avg_pool2d(x, size))
    ceil = bool(op.attr("ceil_mode", False))
    top, left, bottom, right = op.padding
    symmetric = top == bottom and left == right and 2 * top <= op.kernel[0] \
        and 2 * left <= op.kernel[1]
    if op.op_type == "max":
        if symmetric:
            return F.max_pool2d(x, op.kernel, op.stride, (top, left), op.dilation,
                                ceil_mode=ceil)
        x = _spatial_pad(x, op.padding, value=-math.inf)
        return F.max_pool2d(x, op.kernel, op.stride, 0, op.dilation, ceil_mode=ceil)
    if op.op_type != "avg":
        raise ExecutionError(f"unknown pooling {op.op_type!r}")
    if op.dilation != (1, 1):
        raise ExecutionError("dilated average pooling is not supported")
    include_pad = bool(op.attr("count_include_pad", True))
    if symmetric:
        return F.avg_pool2d(x, op.kernel, op.stride, (top, left), ceil_mode=ceil,
                            count_include_pad=include_pad)
    # Asymmetric padding: window sums over the padded tensor divided by the count of elements
    # that count (the real ones, plus the padding when count_include_pad).
    ones = torch.ones((1, 1, *x.shape[-2:]), dtype=x.dtype)
    mask = _spatial_pad(ones, op.padding, value=1.0 if include_pad else 0.0)
    sums = F.avg_pool2d(_spatial_pad(x, op.padding), op.kernel, op.stride, 0, ceil_mode=ceil,
                        divisor_override=1)
    counts = F.avg_pool2d(mask, op.kernel, op.stride, 0, ceil_mode=ceil, divisor_override=1)
    return sums / counts


def _global_pool(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    x = args[0]
    y = torch.amax(x, dim=(2, 3), keepdim=True) if op.op_type == "max" else \
        torch.mean(x, dim=(2, 3), keepdim=True)
    return y.reshape(op.output_shape)


def _unary(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    x = args[0]
    name = ACTIVATIONS.get(op.op_type, op.op_type)
    if name == "prelu":
        w = p["weight"]
        return F.prelu(x, w if w.numel() > 1 or x.dim() < 2 else w.reshape(1))
    if _needs_const(op):
        c = p["const"].to(x.dtype)
        fn = _arith(op.op_type)
        return fn(c, x) if op.attr("const_side", "right") == "left" else fn(x, c)
    if name not in _ACTIVATION_FNS:
        raise ExecutionError(f"unknown elementwise function {op.op_type!r}")
    params = {k: v for k, v in op.attrs if k not in _NOT_ACTIVATION_ATTRS}
    return _ACTIVATION_FNS[name](x, params)


def _binary(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    if op.op_type not in ARITHMETIC:
        raise ExecutionError(f"unknown elementwise operation {op.op_type!r}")
    if len(args) != 2:
        raise ExecutionError(f"{op.op_type} takes 2 inputs, the graph gives {len(args)}")
    return _arith(op.op_type)(args[0], args[1])


def _batchnorm(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    x = args[0]
    view = (1, -1, *([1] * (x.dim() - 2)))
    return x * p["scale"].reshape(view) + p["shift"].reshape(view)


def _axis(op: Op, rank: int, default: int) -> int:
    axis = op.attr("axis", default)
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise ExecutionError(f"axis {axis!r} is not an axis of a rank-{rank} tensor")
    return axis % rank


def _concat(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    at = op.attr("const_at")
    if at is None and op.weight_elems:
        raise ExecutionError("concatenation with constant operands of unknown position "
                             "(re-import the model)")
    operands = list(args)
    for k, pos in enumerate(_as_tuple(at) if at is not None else ()):
        operands.insert(pos, p[f"const{k}"].to(args[0].dtype))
    return torch.cat(operands, dim=_axis(op, args[0].dim(), 1))


def _as_tuple(v: Any) -> tuple[int, ...]:
    return tuple(int(a) for a in v) if isinstance(v, (tuple, list)) else (int(v),)


def _slice(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    x = args[0]
    if op.attr("start") is None or op.attr("end") is None:
        raise ExecutionError("slice has no start/end recorded (re-import the model)")
    starts, ends = _as_tuple(op.attr("start")), _as_tuple(op.attr("end"))
    axes = _as_tuple(op.attr("axis", 1))
    steps = _as_tuple(op.attr("step", 1))
    if len(steps) == 1:
        steps = steps * len(starts)
    if not len(axes) == len(starts) == len(ends) == len(steps):
        raise ExecutionError("slice axis/start/end/step have different lengths")
    index: list[slice] = [slice(None)] * x.dim()
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        if not -x.dim() <= axis < x.dim() or step < 1:
            raise ExecutionError(f"bad slice on axis {axis} with step {step}")
        index[axis % x.dim()] = slice(start, end, step)
    y = x[tuple(index)]
    return y.reshape(op.output_shape) if y.numel() == math.prod(op.output_shape) else y


def _resize(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    x = args[0]
    mode = str(op.attr("mode", "nearest"))
    size = tuple(op.output_shape[2:])
    if mode in ("linear", "bilinear", "bicubic", "trilinear"):
        mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(size)] if mode != "bicubic" \
            else mode
        return F.interpolate(x, size=size, mode=mode,
                             align_corners=bool(op.attr("align_corners", False)))
    return F.interpolate(x, size=size, mode=mode)


def _pad(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    mode = str(op.attr("mode", "constant"))
    return _spatial_pad(args[0], op.padding, mode, float(op.attr("value", 0.0)))


def _reshape(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    x = args[0]
    if op.op_type in ("expand_as", "expand"):
        return x.expand(op.output_shape)
    return x.reshape(op.output_shape)


def _transpose(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    x = args[0]
    kind = op.op_type.replace("_", "")
    if kind == "pixelshuffle":
        r = op.attr("upscale_factor") or op.output_shape[-1] // x.shape[-1]
        return F.pixel_shuffle(x, int(r))
    if kind == "pixelunshuffle":
        r = op.attr("downscale_factor") or x.shape[-1] // op.output_shape[-1]
        return F.pixel_unshuffle(x, int(r))
    if kind == "channelshuffle":
        groups = op.attr("groups")
        if groups is None:
            raise ExecutionError("channel shuffle has no groups recorded")
        n, c, *rest = x.shape
        return x.reshape(n, int(groups), c // int(groups), *rest).transpose(1, 2) \
            .reshape(x.shape)
    if kind == "gather":  # constant indices along one axis (a roll, a window reorder)
        index = torch.tensor(_as_tuple(op.attr("indices")), dtype=torch.long)
        return x.index_select(int(op.attr("axis", 0)) % x.dim(), index)
    perm = op.attr("perm")
    if perm is None:
        raise ExecutionError("transpose has no perm recorded (re-import the model)")
    return x.permute(*_as_tuple(perm))


def _softmax(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    x = args[0]
    fn = F.log_softmax if op.attr("log") else F.softmax
    axis = op.attr("axis", -1)
    if isinstance(axis, tuple):  # softmax over consecutive axes (ONNX < 13 coercion)
        axes = sorted(a % x.dim() for a in axis)
        if axes != list(range(axes[0], axes[-1] + 1)):
            raise ExecutionError(f"softmax axes {axis} are not consecutive")
        flat = x.reshape(*x.shape[:axes[0]], -1, *x.shape[axes[-1] + 1:])
        return fn(flat, dim=axes[0]).reshape(x.shape)
    return fn(x, dim=_axis(op, x.dim(), -1))


def _norm(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    x = args[0]
    axes = op.attr("axes")
    if axes is None:
        raise ExecutionError("norm has no axes recorded (re-import the model)")
    axes = sorted(a % x.dim() for a in _as_tuple(axes))
    eps = float(op.attr("eps", 1e-5))
    weight, bias = p.get("weight"), p.get("bias")
    if op.op_type == "groupnorm":
        groups = int(op.attr("groups", 1))
        if axes != list(range(1, x.dim())) or x.shape[1] % groups:
            raise ExecutionError(f"group norm over axes {tuple(axes)} in {groups} groups of "
                                 f"a {tuple(x.shape)} tensor")
        return F.group_norm(x, groups, weight, bias, eps)
    if axes != list(range(x.dim() - len(axes), x.dim())):
        raise ExecutionError(f"{op.op_type} over axes {tuple(axes)}: not the trailing axes")
    shape = tuple(x.shape[axes[0]:])
    if op.op_type == "layernorm":
        return F.layer_norm(x, shape, weight, bias, eps)
    if op.op_type == "rmsnorm":
        return F.rms_norm(x, shape, weight, eps)
    raise ExecutionError(f"unknown normalisation {op.op_type!r}")


def _matmul(op: Op, args: list[torch.Tensor], p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    if len(args) != 2:
        raise ExecutionError(f"matmul takes 2 inputs, the graph gives {len(args)}")
    return torch.matmul(args[0], args[1])


_RUNNERS: dict[OpKind, Callable[[Op, list[torch.Tensor], Mapping[str, torch.Tensor]],
                                torch.Tensor]] = {
    OpKind.CONV: _conv,
    OpKind.DWCONV: _conv,
    OpKind.LINEAR: _linear,
    OpKind.POOL: _pool,
    OpKind.GLOBAL_POOL: _global_pool,
    OpKind.ELTWISE_UNARY: _unary,
    OpKind.ELTWISE_BINARY: _binary,
    OpKind.BATCHNORM: _batchnorm,
    OpKind.CONCAT: _concat,
    OpKind.SLICE: _slice,
    OpKind.RESIZE: _resize,
    OpKind.PAD: _pad,
    OpKind.RESHAPE: _reshape,
    OpKind.TRANSPOSE: _transpose,
    OpKind.SOFTMAX: _softmax,
    OpKind.NORM: _norm,
    OpKind.MATMUL: _matmul,
}
