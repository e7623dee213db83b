"""What the importers handle: the coverage table, read from the converters themselves.

`torch_entries` and `onnx_entries` list, for every torch module type, torch function, tensor
method or attribute and ONNX op type that `from_torch` / `from_onnx` convert, the IR kind and
op_type it becomes. The names come from the converters' own dispatch tables, so a name added
there appears here; what each handler produces is described once per handler, and a handler
without a description is an error (`CoverageError`), so the table cannot silently fall behind.
`REFUSED_TORCH` / `REFUSED_ONNX` name the ops known to be refused, with the reason.
`markdown` renders docs/importers.md's generated part::

    python -m simulator.workload.coverage --markdown > docs/importers.md

`survey_torch` imports a module the way `from_torch` does, but with every unsupported op kept as
an opaque op and named, so that one pass tells whether a model imports and which ops refuse
(benchmarks/torchvision_coverage.py counts the torchvision models with it).
"""

from __future__ import annotations

import argparse
import inspect
import json
import operator
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from simulator.workload import onnx_import as oi
from simulator.workload import torch_import as ti
from simulator.workload.errors import UnsupportedOpError
from simulator.workload.graph import ComputeGraph
from simulator.workload.ops import ACTIVATIONS

__all__ = [
    "REFUSED_ONNX",
    "REFUSED_TORCH",
    "CoverageError",
    "Entry",
    "Survey",
    "markdown",
    "onnx_entries",
    "survey_torch",
    "torch_entries",
]

DROPPED = "(none: dropped)"
"""The kind column of a name the importer removes (an identity at inference)."""


class CoverageError(Exception):
    """A converter handler that the coverage table does not describe (a programming error)."""


@dataclass(frozen=True, order=True)
class Entry:
    """One name an importer converts.

    Attributes:
        importer: "torch" or "onnx".
        form: "module", "function", "method" (a tensor method or attribute), "op" (an ONNX op
            type) or "pattern" (several calls or nodes imported as one op).
        kind: The IR kind (`OpKind` value, or `DROPPED`; "a / b" when it depends on the call).
        op_type: The IR op_type ("a / b" likewise).
        name: The name as a user writes it (``nn.Conv2d``, ``F.gelu``, ``Tensor.view``).
        note: When the conversion depends on arguments, or refuses some of them.
    """

    importer: str
    form: str
    kind: str
    op_type: str
    name: str
    note: str = ""


# --- torch --------------------------------------------------------------------------------------

_Result = tuple[str, str, str]  # kind, op_type, note

_TORCH_MODULE_HANDLERS: dict[Callable[..., object], _Result] = {
    ti._Converter._conv: ("conv / dwconv", "conv",
                          "dwconv when groups = input channels; any padding_mode"),
    ti._Converter._batchnorm: ("batchnorm", "batchnorm",
                               "folded into the Conv2d before it when that conv has no other "
                               "reader (then no op)"),
    ti._Converter._linear: ("linear", "linear", "applied on the last axis"),
    ti._Converter._pool: ("pool", "max / avg",
                          "a 1x1 stride-1 window is dropped; divisor_override is refused"),
    ti._Converter._adaptive_pool: ("global_pool / pool", "avg / max",
                                   "any output size: 1x1 is a global_pool, the input's size is "
                                   "dropped, any other a pool with the widest window (attr "
                                   "adaptive)"),
    ti._Converter._reshape: ("reshape", "flatten", "a same-shape reshape is dropped"),
    ti._Converter._alias: (DROPPED, "", "the identity at inference"),
    ti._Converter._upsample: ("resize", "resize", "attrs mode, align_corners"),
    ti._Converter._softmax: ("softmax", "softmax", "any axis (attr axis); LogSoftmax: attr log"),
    ti._Converter._pad: ("pad", "pad", "H and W only (a channel or batch pad is refused)"),
    ti._Converter._shuffle: ("transpose", "", ""),
    ti._Converter._layer_norm: ("norm", "", ""),
    ti._Converter._group_norm: ("norm", "", ""),
}
# Module handlers whose op_type and note depend on the class.
_NORM_MODULES: dict[type, tuple[str, str, str]] = {
    nn.LayerNorm: ("norm", "layernorm", "over the trailing normalized_shape axes (attr axes); "
                   "attrs eps, affine; weights: scale and bias"),
    nn.RMSNorm: ("norm", "rmsnorm", "over the trailing normalized_shape axes (attr axes); "
                 "attrs eps (None: float32's), affine; weights: scale"),
    nn.GroupNorm: ("norm", "groupnorm", "over (C, H, W) in groups (attrs groups, axes); attrs "
                   "eps, affine; weights: per-channel scale and bias"),
    **dict.fromkeys(ti._INSTANCE_NORMS, (
        "norm / batchnorm", "groupnorm / batchnorm",
        "a group norm with one group per channel; with track_running_stats the running "
        "statistics make it a batchnorm; an unbatched input is refused")),
}
_TORCH_FUNCTION_HANDLERS: dict[Callable[..., object], _Result] = {
    ti._Converter._f_adaptive_pool: _TORCH_MODULE_HANDLERS[ti._Converter._adaptive_pool],
    ti._Converter._f_pool: _TORCH_MODULE_HANDLERS[ti._Converter._pool],
    ti._Converter._f_interpolate: ("resize", "resize", "attrs mode, align_corners"),
    ti._Converter._f_pad: _TORCH_MODULE_HANDLERS[ti._Converter._pad],
    ti._Converter._f_softmax: ("softmax", "softmax", "any axis (attr axis); log_softmax: attr "
                               "log"),
    ti._Converter._f_mean: ("global_pool", "avg",
                            "over (H, W) of a 4-D map only; other axes are refused"),
    ti._Converter._f_conv: ("conv / dwconv", "conv", "with constant weights"),
    ti._Converter._f_linear: ("linear", "linear", "with constant weights"),
}
_MATMUL_NOTE = ("activation @ constant 2-D matrix: linear (weight W^T); two activations: "
                "matmul (batch dimensions broadcast); a constant first operand is refused")
_SHUFFLE_NOTES = {"pixel_shuffle": "attr upscale_factor",
                  "pixel_unshuffle": "attr downscale_factor", "channel_shuffle": "attr groups"}
_NORM_FUNCTION_NOTES = {
    "layernorm": "over the trailing normalized_shape axes (attr axes); constant scale and bias",
    "groupnorm": "over (C, H, W) in groups (attr groups; instance_norm: one per channel, "
                 "use_input_stats only); constant scale and bias",
    "rmsnorm": "over the trailing normalized_shape axes (attr axes); constant scale",
}
_PRIMITIVES = "linear, reshape, transpose, matmul, eltwise_unary, softmax"
"""The kind column of a call imported as its primitives."""
_ATTENTION_STEPS = ("K^T (transpose), Q @ K^T (matmul), the scaling (mul by a scalar), the mask "
                    "(add; is_causal's and a boolean mask's as an additive 0 / -inf constant, "
                    "counted as weights), softmax over the keys, P @ V (matmul)")
_SDPA_NOTE = (f"as its primitives: {_ATTENTION_STEPS}; dropout is the identity; enable_gqa "
              "and a boolean mask computed at run time are refused")
_MHA_NOTE = ("as its primitives: the Q, K, V projections (three linear ops holding the slices "
             "of in_proj_weight), each split into heads (reshape to (..., L, h, d), permute to "
             f"(..., h, L, d)), {_ATTENTION_STEPS}, the heads merged (permute, reshape) and "
             "out_proj (linear); batch-first, sequence-first and unbatched inputs; a key padding "
             "mask, a per-head mask, add_bias_kv, add_zero_attn and reading the attention "
             "weights are refused")
_ENCODER_LAYER_NOTE = ("traced into (with the attention fast path off): its LayerNorms "
                       "(norm), linear1 and linear2 (linear), the activation, the residual adds "
                       "(eltwise_binary) and its nn.MultiheadAttention as above; post-norm "
                       "(norm_first=False) and pre-norm; dropout is the identity; src_mask and "
                       "src_key_padding_mask follow nn.MultiheadAttention's rules")
_BINARY_NOTE = ("two tensors: eltwise_binary; a tensor and a constant: eltwise_unary with attr "
                "scalar or a const tensor")


def _index(*namespaces: tuple[str, object]) -> dict[int, str]:
    """id(object) -> its public spelling in the first namespace that has it."""
    found: dict[int, str] = {}
    for prefix, space in namespaces:
        for name in sorted(dir(space)):
            if name.startswith("__") or (name.startswith("_") and prefix != "operator."):
                continue
            value = getattr(space, name, None)
            if value is not None and callable(value):
                found.setdefault(id(value), prefix + name)
    return found


_SPELLINGS = _index(("F.", F), ("torch.", torch), ("operator.", operator))


def _fn_name(fn: object) -> str:
    name = _SPELLINGS.get(id(fn))
    if name is None:
        raise CoverageError(f"no public spelling for {fn!r}")
    return name


def _module_name(cls: type) -> str:
    return f"nn.{cls.__name__}" if getattr(nn, cls.__name__, None) is cls else cls.__name__


def _torch_modules() -> list[Entry]:
    out: list[Entry] = []
    for types, handler in ti._MODULE_HANDLERS:
        if handler not in _TORCH_MODULE_HANDLERS:
            raise CoverageError(f"torch module handler {handler.__name__} is not described")
        kind, op_type, note = _TORCH_MODULE_HANDLERS[handler]
        for cls in types if isinstance(types, tuple) else (types,):
            if handler is ti._Converter._shuffle:
                op_type = next(n for c, n in ti._SHUFFLE_MODULES if c is cls)
                note = _SHUFFLE_NOTES[op_type]
            elif cls in _NORM_MODULES:
                kind, op_type, note = _NORM_MODULES[cls]
            elif handler in (ti._Converter._layer_norm, ti._Converter._group_norm):
                raise CoverageError(f"normalisation module {cls.__name__} is not described")
            out.append(Entry("torch", "module", kind, op_type, _module_name(cls), note))
    handled = {c for types, _ in ti._MODULE_HANDLERS
               for c in (types if isinstance(types, tuple) else (types,))}
    for cls in sorted(_nn_classes(), key=lambda c: c.__name__):
        act = ACTIVATIONS.get(cls.__name__.lower())
        if act is not None and cls not in handled:
            note = "with its slopes (weight_elems)" if act == "prelu" else _act_note(act)
            out.append(Entry("torch", "module", "eltwise_unary", act, _module_name(cls), note))
    out.append(Entry("torch", "module", "eltwise_unary", "leakyrelu", "nn.RReLU",
                     "at inference: the slope is the mean of lower and upper"))
    out.append(Entry("torch", "module", DROPPED, "", "torchvision.ops.StochasticDepth",
                     "the identity at inference"))
    out += [Entry("torch", "module", _PRIMITIVES, "", _module_name(cls), _MHA_NOTE)
            for cls in ti._ATTENTION_MODULES]
    out += [Entry("torch", "module", "norm, " + _PRIMITIVES + ", eltwise_binary", "",
                  _module_name(cls), _ENCODER_LAYER_NOTE) for cls in ti._TRACED_MODULES]
    return out


def _nn_classes() -> list[type]:
    return [c for c in vars(nn).values() if isinstance(c, type) and issubclass(c, nn.Module)]


def _act_note(act: str) -> str:
    return _attrs_note([p[0] for p in ti._ACT_PARAMS.get(act, ())])


def _attrs_note(names: Sequence[str]) -> str:
    if not names:
        return ""
    return ("attr " if len(names) == 1 else "attrs ") + ", ".join(names)


def _torch_functions() -> list[Entry]:
    out: list[Entry] = []

    def add(fns: Iterable[object], kind: str, op_type: str | Callable[[object], str],
            note: str | Callable[[str], str] = "") -> None:
        for fn in fns:
            t = op_type(fn) if callable(op_type) else op_type
            out.append(Entry("torch", "function", kind, t, _fn_name(fn),
                             note(t) if callable(note) else note))

    add(ti._BINARY_FUNCS, "eltwise_binary / eltwise_unary", ti._BINARY_FUNCS.get,
        _BINARY_NOTE)
    add(ti._ACT_FUNCS, "eltwise_unary", ti._ACT_FUNCS.get, _act_note)
    add(ti._RRELU_FUNCS, "eltwise_unary", "leakyrelu",
        "at inference: the slope is the mean of lower and upper")
    add(ti._CLAMP_FUNCS, "eltwise_unary", "clip / relu6",
        "constant bounds (0, 6 is relu6); tensor bounds are refused")
    add(ti._RESHAPE_FUNCS, "reshape", ti._RESHAPE_FUNCS.get, "a same-shape reshape is dropped")
    add(ti._ALIAS_FUNCS, DROPPED, "", "the identity at inference (dropout even with "
        "training=True)")
    out.append(Entry("torch", "function", DROPPED, "", "torchvision.ops.stochastic_depth",
                     "the identity at inference"))
    add(ti._CAT_FUNCS, "concat", "concat", "attr axis; constant operands count as weights "
        "(the executor refuses them)")
    add(ti._PERMUTE_FUNCS, "transpose", ti._PERMUTE_FUNCS.get,
        "attr perm; the identity permutation is dropped")
    add(ti._SHUFFLE_FUNCS, "transpose", lambda fn: fn.__name__, _SHUFFLE_NOTES.get)
    add(ti._SPLIT_FUNCS, "slice", "slice", "one slice per item read")
    add(ti._MATMUL_FUNCS, "linear / matmul", "linear / matmul", _MATMUL_NOTE)
    add(ti._NORM_FUNCS, "norm", ti._NORM_FUNCS.get, _NORM_FUNCTION_NOTES.get)
    add(ti._ATTENTION_FUNCS, _PRIMITIVES, "", _SDPA_NOTE)
    add([operator.getitem], "slice / reshape", "slice / unsqueeze",
        "basic indexing (ints, slices, None, ...); an item of a split")
    for fn, handler in ti._FUNCTION_HANDLERS.items():
        if handler not in _TORCH_FUNCTION_HANDLERS:
            raise CoverageError(f"torch function handler {handler.__name__} is not described")
        kind, op_type, note = _TORCH_FUNCTION_HANDLERS[handler]
        add([fn], kind, op_type, note)
    return out


def _torch_methods() -> list[Entry]:
    out: list[Entry] = []

    def add(names: Iterable[str], kind: str, op_type: str | Callable[[str], str],
            note: str | Callable[[str], str] = "") -> None:
        for m in names:
            out.append(Entry("torch", "method", kind, op_type(m) if callable(op_type)
                             else op_type, f"Tensor.{m}", note(m) if callable(note) else note))

    add(ti._BINARY_METHODS, "eltwise_binary / eltwise_unary", ti._BINARY_METHODS.get,
        _BINARY_NOTE)
    acts = sorted(m for m in [*ti._ACT_METHODS, *(m + "_" for m in ti._ACT_METHODS)]
                  if hasattr(torch.Tensor, m))
    add(acts, "eltwise_unary", lambda m: ACTIVATIONS[m.rstrip("_")],
        lambda m: _act_note(ACTIVATIONS[m.rstrip("_")]))
    add(ti._CLAMP_METHODS, "eltwise_unary", "clip / relu6",
        "constant bounds (0, 6 is relu6); tensor bounds are refused")
    add(ti._RESHAPE_METHODS, "reshape", lambda m: m, "a same-shape reshape is dropped")
    add(ti._ALIAS_METHODS, DROPPED, "", "the identity (dtype and device do not change the IR)")
    add(ti._PERMUTE_METHODS, "transpose", ti._PERMUTE_METHODS.get,
        "attr perm; the identity permutation is dropped")
    add(ti._PERMUTE_ATTRS, "transpose", ti._PERMUTE_ATTRS.get,
        "attr perm (an attribute: x.mT)")
    add(ti._SPLIT_METHODS, "slice", "slice", "one slice per item read")
    add(["mean"], *_TORCH_FUNCTION_HANDLERS[ti._Converter._f_mean])
    add(ti._SOFTMAX_METHODS, "softmax", "softmax", "any axis (attr axis); log_softmax: attr log")
    add(ti._MATMUL_METHODS, "linear / matmul", "linear / matmul", _MATMUL_NOTE)
    return out


_TORCH_PATTERNS = [
    Entry("torch", "pattern", "transpose", "channel_shuffle",
          "x.view(N, g, C/g, H, W).transpose(1, 2).contiguous().view(N, C, H, W)",
          "ShuffleNetV2's channel shuffle: one op (attr groups) instead of a rank-5 reshape, "
          "transpose and reshape; each intermediate read only by the next"),
]


def torch_entries() -> list[Entry]:
    """Every torch module type, function, tensor method and pattern `from_torch` converts."""
    return sorted({*_torch_modules(), *_torch_functions(), *_torch_methods(),
                   *_TORCH_PATTERNS}, key=_order)


# --- ONNX ---------------------------------------------------------------------------------------

_ONNX_HANDLERS: dict[Callable[..., object], Callable[[str], _Result]] = {
    oi._conv: lambda op: ("conv / dwconv", "conv", "2-D, constant weights; dwconv when group = "
                          "input channels"),
    oi._batchnorm: lambda op: ("batchnorm", "batchnorm", "folded into the Conv before it when "
                               "that conv has no other reader (then no op)"),
    oi._clip: lambda op: ("eltwise_unary", "clip / relu6", "constant bounds (0, 6 is relu6)"),
    oi._thresholded_relu: lambda op: ("eltwise_unary", "threshold",
                                      "attrs threshold (= alpha), value (= 0)"),
    oi._shrink: lambda op: ("eltwise_unary", "hardshrink / softshrink",
                            "bias 0: hardshrink, bias = lambd: softshrink; other biases are "
                            "refused"),
    oi._activation: lambda op: ("eltwise_unary", ACTIVATIONS[op.lower()],
                                _ONNX_ACTIVATION_NOTES.get(op, "")),
    oi._arith: lambda op: ("eltwise_binary / eltwise_unary", op.lower(), _BINARY_NOTE),
    oi._concat: lambda op: ("concat", "concat", "attr axis"),
    oi._split: lambda op: ("slice", "slice", "one slice per output read; constant sizes"),
    oi._slice: lambda op: ("slice", "slice", "constant bounds, positive steps") if op == "Slice"
    else ("slice / linear", "slice / embedding", "constant consecutive indices: a slice; a "
          "constant table read at token ids: an embedding (the table its weights)"),
    oi._pool: lambda op: ("pool", "max" if op == "MaxPool" else "avg",
                          "2-D; a 1x1 stride-1 window is dropped"),
    oi._global_pool: lambda op: ("global_pool", "max" if "Max" in op else "avg", ""),
    oi._reduce: lambda op: ("global_pool", "max" if "Max" in op else "avg",
                            "over (H, W) of a 4-D map; over other axes a global pool of a "
                            "(1, M, R, 1) view (transpose and reshapes around it)"
                            + ("; times R" if "Sum" in op else "")),
    oi._gemm: lambda op: ("linear", "linear", "constant B; alpha, beta, transB applied"),
    oi._matmul: lambda op: ("linear / matmul", "linear / matmul",
                            "activation x constant matrix: linear; two activations: matmul"),
    oi._layer_norm: lambda op: ("norm", "layernorm" if op == "LayerNormalization" else "rmsnorm",
                                "over the axes from axis on (attr axes); attr eps; constant "
                                "scale" + (" and bias" if op == "LayerNormalization" else "")),
    oi._group_norm: lambda op: ("norm", "groupnorm", (
        "one group per channel; constant scale and bias" if op == "InstanceNormalization"
        else "per-channel scale and bias (opset 21; opset 18's per-group scale only with one "
             "group per channel)")),
    oi._reshape: lambda op: ("reshape", op.lower(), "constant target shape; a same-shape "
                             "reshape is dropped"),
    oi._transpose: lambda op: ("transpose", "transpose", "attr perm; the identity is dropped"),
    oi._expand: lambda op: ("reshape", "expand", "an activation broadcast to a constant shape "
                            "(grouped-query attention's K/V heads repeated); an unsqueeze "
                            "first when the target has more axes; the same shape is an alias"),
    oi._depth_to_space: lambda op: ("transpose", "pixel_shuffle", "CRD mode only"),
    oi._resize: lambda op: ("resize", "resize", "attrs mode, align_corners"),
    oi._pad: lambda op: ("pad", "pad", "H and W only; constant pads"),
    oi._softmax: lambda op: ("softmax", "softmax", "any axis (attr axis; before opset 13 the "
                             "axes from axis on)" + ("; attr log" if op == "LogSoftmax" else "")),
    oi._forward: lambda op: (DROPPED, "", "the identity at inference"),
}
# The attrs `onnx_import._activation_attrs` records (under from_torch's names).
_ONNX_ACTIVATION_NOTES = {
    "LeakyRelu": "attr negative_slope (from alpha)", "Elu": "attr alpha", "Celu": "attr alpha",
    "Gelu": "attr approximate", "PRelu": "with its slopes (weight_elems)",
    "HardSigmoid": "attrs alpha, beta unless they are torch's 1/6, 0.5",
}
_ONNX_PATTERNS = [
    Entry("onnx", "pattern", "eltwise_unary", "silu", "Mul(x, Sigmoid(x))",
          "one op, as from_torch imports SiLU"),
    Entry("onnx", "pattern", "eltwise_unary", "hardswish", "Mul(x, HardSigmoid(x))",
          "HardSigmoid with alpha 1/6, beta 0.5: one op, as from_torch imports Hardswish"),
    Entry("onnx", "pattern", "transpose", "channel_shuffle",
          "Reshape(N, g, C/g, ...) -> Transpose(0, 2, 1, ...) -> Reshape(N, C, ...)",
          "one op (attr groups), as from_torch imports it"),
    Entry("onnx", "pattern", "norm", "groupnorm",
          "Reshape(N, G, -1) -> InstanceNormalization(ones, zeros) -> Reshape(back) "
          "[-> Mul(scale) -> Add(bias)]",
          "torch's GroupNorm as its exporter writes it: one op (attr groups) with the "
          "per-channel scale and bias, as from_torch imports it"),
    Entry("onnx", "pattern", "softmax", "softmax", "Where(IsNaN(Softmax(x)), 0, Softmax(x))",
          "the dynamo exporter's safe softmax: the Softmax alone, exact where a row has a "
          "finite entry; a fully masked row (all -inf) gives NaN where the pattern gives 0"),
    Entry("onnx", "pattern", "(values)", "",
          "Shape, Gather, Cast, Sqrt, Div, Concat, ... of constants and static shapes",
          "computed (onnx's reference evaluator; GatherElements in numpy, as BERT's "
          "token-type ids need) and shape inference run again, so a Reshape "
          "whose target the exporter computes at run time (attention's heads) has its shape "
          "and a scale computed from a shape is a scalar"),
]


def onnx_entries() -> list[Entry]:
    """Every ONNX op type (default domain) and pattern `from_onnx` converts."""
    out = []
    for op, handler in oi._HANDLERS.items():
        if handler not in _ONNX_HANDLERS:
            raise CoverageError(f"ONNX handler {handler.__name__} is not described")
        kind, op_type, note = _ONNX_HANDLERS[handler](op)
        out.append(Entry("onnx", "op", kind, op_type, op, note))
    return sorted([*out, *_ONNX_PATTERNS], key=_order)


_FORMS = ("module", "function", "method", "op", "pattern")


def _order(e: Entry) -> tuple[int, str, str, str]:
    return _FORMS.index(e.form), e.kind, e.op_type, e.name.lower()


# --- refused by name ----------------------------------------------------------------------------

_NOT_WRITTEN = "no composition of IR primitives is written for it"

REFUSED_TORCH: dict[str, str] = {
    "nn.MultiheadAttention (key padding mask, per-head mask, add_bias_kv, add_zero_attn, "
    "attention weights read)": _NOT_WRITTEN,
    "F.scaled_dot_product_attention (enable_gqa, a boolean mask computed at run time)":
        _NOT_WRITTEN,
    "nn.InstanceNorm2d (1d, 3d) on an unbatched input, F.instance_norm without "
    "use_input_stats": _NOT_WRITTEN,
    "torch.matmul / torch.mm / torch.bmm with a constant first operand": _NOT_WRITTEN,
    "torch.einsum": "einsum strings are not parsed (a two-operand product is written "
                    "torch.matmul)",
    "torchvision.models.swin_transformer.shifted_window_attention":
        "a torch.fx leaf function of torchvision (window partition, a cyclic shift, attention "
        "with a relative position bias gathered from a table): not expanded",
    "torchvision.models.swin_transformer._patch_merging_pad":
        "Swin's 2x2 patch merging on a channel-last map (pad, four strided slices, concat); "
        "not pixel_unshuffle (its channel order differs)",
    "torch.roll": "a cyclic shift (Swin's shifted windows): no IR kind",
    "nn.Softmin / F.softmin": "softmax of the negation: one call, two IR ops (not written)",
    "nn.GLU / F.glu": "halves gating halves: one call, four IR ops (not written)",
    "nn.ConvTranspose2d": "a transposed convolution: no IR kind",
    "nn.Conv1d / nn.Conv3d / 1-D and 3-D pools": "the IR's windows are 2-D over (H, W)",
    "Tensor.mean / torch.sum / torch.amax over other axes":
        "a reduction over axes other than (H, W) of a 4-D map: from_torch has no composition "
        "(from_export has)",
    "torch.max / torch.min / torch.sort / torch.topk (tuple results)":
        "values with indices (a tuple that is not a split): no IR kind",
    "nn.LSTM / nn.GRU / nn.RNN": "recurrent: no IR kind",
    "nn.Embedding": "a table lookup: from_torch has none (from_export: an embedding op)",
}
REFUSED_ONNX: dict[str, str] = {
    "GroupNormalization (opset 18, a scale per group of several channels)":
        "no IR parameter format (re-export with opset 21)",
    "MatMul (constant first operand)": _NOT_WRITTEN,
    "Einsum": "einsum strings are not parsed",
    "ConvTranspose": "a transposed convolution: no IR kind",
    "Where / Greater / Less / Equal": "data-dependent selection (exporters' hardshrink, "
                                      "softshrink, threshold): no IR kind",
    "Tile (of an activation)": "a repeated copy: no IR kind",
    "IsNaN (of an activation, outside the safe softmax)":
        "a NaN test: no IR kind (of a constant it is computed)",
    "LSTM / GRU / RNN": "recurrent: no IR kind",
    "other domains (com.microsoft.*)": "only the default ai.onnx domain is read",
}


# --- markdown -----------------------------------------------------------------------------------


def _grouped(entries: Sequence[Entry]) -> list[tuple[str, str, str, list[str]]]:
    """Entries with the same kind, op_type and note merged: (kind, op_type, note, names)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for e in entries:
        groups.setdefault((e.kind, e.op_type, e.note), []).append(e.name)
    return [(k, t, n, names) for (k, t, n), names in groups.items()]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(names: Sequence[str]) -> str:
    return ", ".join(f"`{_cell(n)}`" for n in names)


def _table(title: str, entries: Sequence[Entry]) -> list[str]:
    lines = [f"### {title}", "", "| names | IR kind | op_type | notes |", "|---|---|---|---|"]
    for kind, op_type, note, names in _grouped(entries):
        lines.append(f"| {_code(names)} | {_cell(kind)} | {_cell(op_type)} | {_cell(note)} |")
    return [*lines, ""]


def _refused(table: dict[str, str]) -> list[str]:
    lines = ["| name | why |", "|---|---|"]
    lines += [f"| `{_cell(name)}` | {_cell(why)} |" for name, why in table.items()]
    return [*lines, ""]


def _export_section() -> list[str]:
    """The torch.export importer's ATen table (`export_import.COVERAGE`)."""
    from simulator.workload.export_import import COVERAGE, PRESERVED

    kept = ", ".join(f"`{op._opname}`" for op in PRESERVED)
    lines = [
        "## torch: `from_export` (torch.export; module:callable specs)",
        "",
        "The module is exported (`torch.export.export`, non-strict), decomposed to the core "
        f"ATen op set less {len(PRESERVED)} ops kept whole ({kept}), and each ATen call "
        f"mapped ({sum(len(r[0]) for r in COVERAGE)} ATen op names below); tensors computed "
        "from constants only are constants. An ATen op not listed is refused by name "
        "(`unsupported op aten.cumsum at node ...`). The zoo stays on `from_torch`, but for "
        "its decoder (token ids and a KV cache).",
        "",
        "| ATen ops | IR kind | op_type | notes |",
        "|---|---|---|---|",
    ]
    lines += [f"| {_code(list(names))} | {_cell(kind)} | {_cell(op_type)} | {_cell(note)} |"
              for names, kind, op_type, note in COVERAGE]
    return [*lines, ""]


MEASURED_HEADING = "## Measured: torchvision models through `from_torch`"
"""The heading of the measured part that benchmarks/torchvision_coverage.py appends."""


def markdown() -> str:
    """docs/importers.md's generated part (the measured part follows it)."""
    torch_e, onnx_e = torch_entries(), onnx_entries()
    lines = [
        "# Importer coverage",
        "",
        "What `from_torch` (torch.fx), `from_export` (torch.export) and `from_onnx` convert, "
        "and into which IR op. This part "
        "is generated from the converters' own dispatch tables; do not edit it by hand:",
        "",
        "    python -m simulator.workload.coverage --markdown > docs/importers.md",
        "    python benchmarks/torchvision_coverage.py --json tv.json   # the measured part",
        "    python benchmarks/torchvision_coverage.py --markdown tv.json >> docs/importers.md",
        "    python benchmarks/timm_coverage.py --json timm.json          # timm's models",
        "    python benchmarks/timm_coverage.py --markdown timm.json >> docs/importers.md",
        "",
        "Anything not listed is refused by name (`UnsupportedOpError: unsupported op "
        "ConvTranspose2d at node ...`), or imported as an `opaque` op with `--allow-opaque`. Every "
        "converted op runs in the IR executor (`simulator.workload.execute`) to the framework's "
        "output; activation parameters and axes travel in `Op.attrs`. \"(none: dropped)\" "
        "means the importer removes the call (an identity at inference).",
        "",
        f"Counts: torch {sum(e.form == 'module' for e in torch_e)} module types, "
        f"{sum(e.form == 'function' for e in torch_e)} functions, "
        f"{sum(e.form == 'method' for e in torch_e)} tensor methods and attributes, "
        f"{sum(e.form == 'pattern' for e in torch_e)} pattern(s); ONNX "
        f"{sum(e.form == 'op' for e in onnx_e)} op types, "
        f"{sum(e.form == 'pattern' for e in onnx_e)} patterns.",
        "",
        "## torch: `from_torch`",
        "",
        *_table("Module types", [e for e in torch_e if e.form == "module"]),
        *_table("Functions", [e for e in torch_e if e.form == "function"]),
        *_table("Tensor methods and attributes", [e for e in torch_e if e.form == "method"]),
        *_table("Patterns", [e for e in torch_e if e.form == "pattern"]),
        "### Refused by name",
        "",
        *_refused(REFUSED_TORCH),
        *_export_section(),
        "## ONNX: `from_onnx`",
        "",
        *_table("Op types", [e for e in onnx_e if e.form == "op"]),
        *_table("Patterns", [e for e in onnx_e if e.form == "pattern"]),
        "### Refused by name",
        "",
        *_refused(REFUSED_ONNX),
        "",
    ]
    return "\n".join(lines)


# --- survey -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Survey:
    """The outcome of importing one module with `survey_torch`.

    Attributes:
        graph: The imported graph (refused ops as opaque ops), or None when the module could
            not be imported at all (see `error`).
        refused: The refused ops by name (``LayerNorm``, ``Tensor.matmul``, ``layer_norm``), one
            entry per occurrence, in the order `from_torch` meets them.
        error: Why nothing could be imported (a trace failure), else None.
    """

    graph: ComputeGraph | None
    refused: tuple[str, ...]
    error: str | None = None

    @property
    def imports(self) -> bool:
        """True when `from_torch` imports the module without --allow-opaque."""
        return self.graph is not None and not self.refused and self.error is None


def survey_torch(module: nn.Module, input_shape: Sequence[int] | str,
                 name: str | None = None) -> Survey:
    """Import `module` as `from_torch` does, naming every op it refuses instead of failing.

    Raises:
        InputShapeError: The shape is malformed or the model cannot run on it.
    """
    shape = ti.check_input_shape(input_shape)
    name = name or type(module).__name__
    try:
        gm = ti.trace(module, name)
    except UnsupportedOpError as err:
        return Survey(None, (), str(err))
    gm = ti.prepare(gm, shape, name)
    converter = ti._Converter(gm, name, allow_opaque=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = converter.convert()
    except UnsupportedOpError as err:  # refused even as an opaque op (an undecodable split)
        return Survey(None, tuple(_names(converter.opaque)), str(err))
    return Survey(graph, tuple(_names(converter.opaque)))


def _names(opaque: Sequence[str]) -> list[str]:
    return [entry.rsplit(" at ", 1)[0] for entry in opaque]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simulator.workload.coverage --markdown | --json``."""
    parser = argparse.ArgumentParser(prog="python -m simulator.workload.coverage",
                                     description=inspect.getdoc(sys.modules[__name__])
                                     .splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--markdown", action="store_true", help="docs/importers.md's "
                       "generated part")
    group.add_argument("--json", action="store_true", help="the entries and refusals as JSON")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(), end="")
    else:
        print(json.dumps({"entries": [asdict(e) for e in (*torch_entries(), *onnx_entries())],
                          "refused": {"torch": REFUSED_TORCH, "onnx": REFUSED_ONNX}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
