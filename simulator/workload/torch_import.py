"""PyTorch front end: an `nn.Module` traced with torch.fx into a `ComputeGraph`.

Tracing works at module granularity: each leaf module (conv, batchnorm, norm, activation, pool,
linear, ...) and each tensor function (add, mul, cat, flatten, interpolate, matmul, ...) becomes
one op; dropout, identity and no-op reshapes are removed, ShuffleNet's view-transpose-view
channel shuffle becomes one ``channel_shuffle`` op, and scaled-dot-product and multi-head
attention become their primitives (`decompose_attention`). A call whose tuple result is not a
split (attention whose weights are read, ``torch.max``'s ``(values, indices)``) is refused by
name. docs/importers.md
lists what is converted (`simulator.workload.coverage`). BatchNorm that directly follows a
convolution with no other consumer is folded into it numerically (`fold_batchnorm`), as ONNX
inference exports do. Shapes come from running the traced module once, node by node, on a random
input.
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

from simulator.workload.builder import GraphBuilder
from simulator.workload.errors import InputShapeError, UnsupportedOpError
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.input_shape import check_input_shape
from simulator.workload.ops import (
    ACTIVATIONS,
    adaptive_window,
    conv_kind,
    conv_macs,
    is_identity_window,
    linear_macs,
    matmul_macs,
)

__all__ = ["check_input_shape", "decompose_attention", "fold_batchnorm", "from_torch",
           "from_torch_with_params", "prepare", "trace"]

Params = dict[str, dict[str, torch.Tensor]]  # as `simulator.workload.execute.Params`

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
    torch.relu: "relu", F.relu: "relu", torch.relu_: "relu", F.relu6: "relu6",
    F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid", F.silu: "silu",
    torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh",
    F.gelu: "gelu", F.leaky_relu: "leakyrelu", F.leaky_relu_: "leakyrelu", F.elu: "elu",
    F.elu_: "elu", F.hardtanh: "hardtanh", F.hardtanh_: "hardtanh", F.mish: "mish",
    F.softplus: "softplus", F.selu: "selu", torch.selu: "selu", torch.selu_: "selu",
    F.celu: "celu", torch.celu: "celu", torch.celu_: "celu", F.softsign: "softsign",
    F.tanhshrink: "tanhshrink", F.logsigmoid: "logsigmoid", F.hardshrink: "hardshrink",
    F.softshrink: "softshrink", F.threshold: "threshold", torch.threshold: "threshold",
    torch.threshold_: "threshold", torch.exp: "exp", torch.log: "log", torch.sqrt: "sqrt",
    torch.abs: "abs", torch.neg: "neg", torch.erf: "erf", torch.reciprocal: "reciprocal",
}
# Tensor methods that are activations (an in-place variant, name + "_", too).
_ACT_METHODS = {"relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "neg", "erf",
                "reciprocal", "hardshrink"}
_RRELU_FUNCS = {F.rrelu, torch.rrelu, torch.rrelu_}
_CLAMP_FUNCS = {torch.clamp, torch.clip}
_CLAMP_METHODS = {"clamp", "clamp_", "clip", "clip_"}
_LOG_SOFTMAX = {F.log_softmax, torch.log_softmax}
# Activation parameters recorded as attrs (when they differ from the default), by IR op type:
# (attr name, argument position after the input, default).
_ACT_PARAMS: dict[str, tuple[tuple[str, int, Any], ...]] = {
    "leakyrelu": (("negative_slope", 1, 0.01),),
    "hardtanh": (("min_val", 1, -1.0), ("max_val", 2, 1.0)),
    "elu": (("alpha", 1, 1.0),),
    "gelu": (("approximate", 1, "none"),),
    "softplus": (("beta", 1, 1.0), ("threshold", 2, 20.0)),
    "celu": (("alpha", 1, 1.0),),
    "hardshrink": (("lambd", 1, 0.5),),
    "softshrink": (("lambd", 1, 0.5),),
    "threshold": (("threshold", 1, None), ("value", 2, None)),  # no defaults: always recorded
}
_RESHAPE_FUNCS = {torch.flatten: "flatten", torch.reshape: "reshape", torch.squeeze: "squeeze",
                  torch.unsqueeze: "unsqueeze", torch.unflatten: "unflatten"}
_RESHAPE_METHODS = {"view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze",
                    "view_as", "reshape_as", "expand_as"}
# Identities at inference: copies, dtype and device moves, and every dropout (the IR models
# inference, so a dropout is the identity even when called with training=True).
_ALIAS_METHODS = {"contiguous", "clone", "detach", "detach_", "requires_grad_", "to", "float",
                  "double", "half", "bfloat16", "type", "type_as", "cpu"}
_ALIAS_FUNCS = {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout,
                F.feature_alpha_dropout, torch.dropout, torch.dropout_, torch.alpha_dropout,
                torch.alpha_dropout_, torch.feature_dropout, torch.feature_dropout_,
                torch.feature_alpha_dropout, torch.feature_alpha_dropout_, torch.clone,
                torch.detach}
_ALIAS_MODULES = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
                  nn.FeatureAlphaDropout, nn.Identity)
_CAT_FUNCS = {torch.cat, torch.concat, torch.concatenate}
# Axis permutations, by the op_type they become ("transpose" swaps two axes).
_PERMUTE_FUNCS: dict[Any, str] = {
    torch.transpose: "transpose", torch.swapaxes: "transpose", torch.swapdims: "transpose",
    torch.t: "transpose", torch.permute: "permute", torch.movedim: "permute",
    torch.moveaxis: "permute",
}
_PERMUTE_METHODS = {"transpose": "transpose", "transpose_": "transpose",
                    "swapaxes": "transpose", "swapdims": "transpose", "t": "transpose",
                    "permute": "permute", "movedim": "permute", "moveaxis": "permute"}
_PERMUTE_ATTRS = {"T": "permute", "mT": "transpose", "H": "permute", "mH": "transpose"}
_SHUFFLE_FUNCS = {F.pixel_shuffle, F.pixel_unshuffle, torch.channel_shuffle}
_SHUFFLE_MODULES = ((nn.PixelShuffle, "pixel_shuffle"), (nn.PixelUnshuffle, "pixel_unshuffle"),
                    (nn.ChannelShuffle, "channel_shuffle"))
_SPLIT_FUNCS = {torch.chunk, torch.split, torch.tensor_split, torch.unbind}
_SPLIT_METHODS = {"chunk", "split", "tensor_split", "unbind"}
_SOFTMAX_METHODS = {"softmax": False, "log_softmax": True}  # name -> log
_MATMUL_FUNCS = {torch.matmul, operator.matmul, torch.mm, torch.bmm}
_MATMUL_METHODS = {"matmul", "mm", "bmm", "__matmul__"}
# Normalisations (OpKind.NORM), by the op_type they become.
_NORM_FUNCS: dict[Any, str] = {F.layer_norm: "layernorm", torch.layer_norm: "layernorm",
                               F.group_norm: "groupnorm", torch.group_norm: "groupnorm",
                               F.instance_norm: "groupnorm", F.rms_norm: "rmsnorm",
                               torch.rms_norm: "rmsnorm"}
_INSTANCE_NORMS = (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
# Calls replaced by their primitives before conversion (`decompose_attention`).
_ATTENTION_FUNCS = {F.scaled_dot_product_attention}
_ATTENTION_MODULES = (nn.MultiheadAttention,)


# torch.nn modules traced into; their forward takes the inference path only with the
# multi-head attention fast path off (its checks branch on tensor properties).
_TRACED_MODULES = (nn.TransformerEncoderLayer,)


class _Tracer(fx.Tracer):
    """torch.fx's tracer, tracing into ``nn.TransformerEncoderLayer`` (a torch.nn module,
    hence a leaf by default) so that it becomes its norms, linears and attention."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        if isinstance(m, _TRACED_MODULES):
            return False
        return super().is_leaf_module(m, module_qualified_name)


def trace(module: nn.Module, name: str = "model") -> fx.GraphModule:
    """Symbolically trace `module` (a deep copy, in eval mode) with torch.fx."""
    model = copy.deepcopy(module).eval()
    fast_path = torch.backends.mha.get_fastpath_enabled()
    try:
        torch.backends.mha.set_fastpath_enabled(False)
        return fx.GraphModule(model, _Tracer().trace(model), type(model).__name__)
    except Exception as err:  # torch.fx raises many types for untraceable code
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UnsupportedOpError(
            f"cannot trace model {name!r} with torch.fx ({type(err).__name__}: {first}); "
            "data-dependent control flow is not supported, export it to ONNX instead"
        ) from err
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)


def fold_batchnorm(gm: fx.GraphModule) -> fx.GraphModule:
    """Fold each BatchNorm2d that directly follows a Conv2d with no other consumer into it.

    Returns a new GraphModule whose outputs equal the original's in eval mode (up to rounding);
    the input is not modified.
    """
    return _fold_batchnorm_in_place(copy.deepcopy(gm).eval())


def _fold_batchnorm_in_place(gm: fx.GraphModule) -> fx.GraphModule:
    """`fold_batchnorm` on `gm` itself (a private copy: saves a copy of a large model)."""
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
    return _import(module, input_shape, name, fold_bn, allow_opaque, with_params=False)[0]


def from_torch_with_params(module: nn.Module, input_shape: Sequence[int] | str, *,
                           name: str | None = None, fold_bn: bool = True,
                           allow_opaque: bool = False) -> tuple[ComputeGraph, Params]:
    """Import a PyTorch module as a `ComputeGraph` together with its own parameters.

    Takes the arguments of `from_torch`. The parameters are keyed by op name in the format of
    `simulator.workload.execute` (a BatchNorm folded into its convolution as `fold_batchnorm`
    folds it), so that ``execute(graph, params, x)`` reproduces ``module.eval()(x)``. The
    tensors are float32 copies; the module is not modified.
    """
    return _import(module, input_shape, name, fold_bn, allow_opaque, with_params=True)


def _import(module: nn.Module, input_shape: Sequence[int] | str, name: str | None,
            fold_bn: bool, allow_opaque: bool, *,
            with_params: bool) -> tuple[ComputeGraph, Params]:
    shape = check_input_shape(input_shape)
    name = name or type(module).__name__
    gm = prepare(trace(module, name), shape, name, fold_bn)
    converter = _Converter(gm, name, allow_opaque, with_params)
    return converter.convert(), converter.params


def prepare(gm: fx.GraphModule, shape: tuple[int, ...], name: str,
            fold_bn: bool = True) -> fx.GraphModule:
    """A traced module made ready for conversion, in place: BatchNorm folded (when `fold_bn`),
    shapes recorded, and attention calls (``F.scaled_dot_product_attention``,
    ``nn.MultiheadAttention``) replaced by their primitives (`decompose_attention`)."""
    if fold_bn:
        gm = _fold_batchnorm_in_place(gm)
    _propagate_shapes(gm, shape, name)
    if decompose_attention(gm):
        _propagate_shapes(gm, shape, name)
    return gm


class _ShapeRecorder(fx.Interpreter):
    """Runs the traced module node by node and records each tensor result's shape (and dtype),
    and the value of each small tensor computed from constants only (the network input's
    shape may enter it, its data may not: ViT's ``class_token.expand(n, -1, -1)``)."""

    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__(gm)
        self.data_dependent: set[fx.Node] = set()

    def run_node(self, n: fx.Node) -> Any:
        try:
            result = super().run_node(n)
        except Exception as err:  # a wrong shape surfaces as whatever the failing layer raises
            text = str(err).strip()
            first = text.splitlines()[0] if text else type(err).__name__
            raise _ShapeFailure(n.name, first) from err
        n.meta.pop(_CONST, None)
        if isinstance(result, torch.Tensor) or isinstance(result, (tuple, list)) and any(
                isinstance(r, torch.Tensor) for r in result):
            if n.op == "placeholder" or any(a in self.data_dependent for a in n.all_input_nodes):
                self.data_dependent.add(n)
            elif n.op != "get_attr" and isinstance(result, torch.Tensor) \
                    and result.numel() <= _CONST_LIMIT:
                n.meta[_CONST] = result.detach().clone()
        if isinstance(result, torch.Tensor):
            n.meta[_SHAPE] = tuple(int(d) for d in result.shape)
            n.meta[_DTYPE] = result.dtype
        elif isinstance(result, (tuple, list)) and result and all(
                isinstance(r, torch.Tensor) for r in result):
            n.meta[_SHAPE] = [tuple(int(d) for d in r.shape) for r in result]
        else:
            n.meta.pop(_SHAPE, None)
            if isinstance(result, int) and not isinstance(result, bool):
                n.meta[_INT] = result  # a size: indexing with it is still basic indexing
            if isinstance(result, (tuple, list)) and any(
                    isinstance(r, torch.Tensor) for r in result):
                # tensors mixed with other values (nn.MultiheadAttention's (out, None))
                n.meta[_MIXED] = [tuple(int(d) for d in r.shape)
                                  if isinstance(r, torch.Tensor) else None for r in result]
        return result


class _ShapeFailure(Exception):
    def __init__(self, node: str, message: str) -> None:
        super().__init__(node, message)
        self.node, self.message = node, message


_SHAPE = "fusion_dse_shape"
_DTYPE = "fusion_dse_dtype"
_INT = "fusion_dse_int"
_MIXED = "fusion_dse_mixed"  # per item of a tuple result: its shape, or None for a non-tensor
_CONST = "fusion_dse_const"  # the value of a tensor computed from constants only
_NAME = "fusion_dse_name"  # the IR name of an op a decomposition inserted
_CONST_LIMIT = 1 << 22  # larger computed constants are not kept (their ops cannot execute)


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


# --- attention as its primitives ----------------------------------------------------------------


def decompose_attention(gm: fx.GraphModule) -> bool:
    """Replace every ``F.scaled_dot_product_attention`` call and ``nn.MultiheadAttention``
    module call of a shape-propagated module by its primitives, in place; True if any was.

    Scaled dot-product attention becomes ``K^T`` (a transpose), ``Q @ K^T`` (a matmul), the
    scaling (a multiplication by a scalar), the mask (an addition: ``is_causal``'s and a
    boolean mask's as an additive constant of 0 and -inf), the softmax over the keys and
    ``P @ V``. Multi-head attention adds the Q, K and V projections (three linear layers
    holding the slices of ``in_proj_weight``), the split into heads (a reshape to
    ``(..., L, h, d)`` and a permutation to ``(..., h, L, d)``), the merge of the heads and the
    output projection. Dropout is the identity at inference. A call these primitives cannot
    express (grouped-query attention, a key padding mask, ``add_bias_kv``, ``add_zero_attn``,
    the averaged attention weights read, a boolean mask computed at run time) is left alone,
    so it is refused by name.
    """
    modules = dict(gm.named_modules())
    changed = False
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _ATTENTION_FUNCS:
            changed |= _expand_sdpa(gm, node)
        elif node.op == "call_module" and isinstance(modules.get(node.target),
                                                     _ATTENTION_MODULES):
            changed |= _expand_mha(gm, node, modules[node.target])
    if changed:
        gm.graph.lint()
        gm.recompile()
    return changed


class _Inserter:
    """Adds nodes before a call, each named ``prefix/part`` in the IR."""

    def __init__(self, gm: fx.GraphModule, at: fx.Node, prefix: str) -> None:
        self.gm, self.at, self.prefix = gm, at, prefix

    def call(self, part: str, op: str, target: Any, *args: Any) -> fx.Node:
        with self.gm.graph.inserting_before(self.at):
            node = self.gm.graph.create_node(op, target, args, {})
        node.meta[_NAME] = f"{self.prefix}/{part}"
        return node

    def constant(self, part: str, value: torch.Tensor) -> fx.Node:
        """A get_attr of a new buffer holding `value`."""
        base = "fusion_dse_" + "".join(c if c.isalnum() else "_" for c in f"{self.prefix}_{part}")
        target, k = base, 1
        while hasattr(self.gm, target):
            target, k = f"{base}_{k}", k + 1
        self.gm.register_buffer(target, value.detach().clone())
        with self.gm.graph.inserting_before(self.at):
            return self.gm.graph.get_attr(target)

    def parameter(self, part: str, value: torch.Tensor | None) -> fx.Node | None:
        """A get_attr of a new buffer holding `value` (None for None)."""
        return None if value is None else self.constant(part, value)


def _tensor_meta(arg: Any) -> tuple[tuple[int, ...], torch.dtype] | None:
    if isinstance(arg, fx.Node) and isinstance(arg.meta.get(_SHAPE), tuple):
        return arg.meta[_SHAPE], arg.meta.get(_DTYPE, torch.float32)
    return None


def _additive_mask(ins: _Inserter, mask: Any, true_takes_part: bool) -> fx.Node | object:
    """The mask as a float tensor to add to the scores: itself when it is a float tensor; a
    boolean constant as 0 / -inf (True takes part in scaled_dot_product_attention, is masked
    out in nn.MultiheadAttention); `_NOT_CONST` for a boolean computed at run time."""
    meta = _tensor_meta(mask)
    if meta is None:
        return _NOT_CONST
    if meta[1] != torch.bool:
        return mask
    value = _const(ins.gm, mask)
    if value is None:
        return _NOT_CONST
    excluded = ~value if true_takes_part else value
    return ins.constant("mask", torch.zeros(value.shape).masked_fill(excluded, float("-inf")))


def _attention_core(ins: _Inserter, q: fx.Node, k: fx.Node, v: fx.Node, scale: float,
                    mask: fx.Node | None) -> fx.Node:
    """softmax(Q K^T * scale + mask) V over the last two axes."""
    k_t = ins.call("key_t", "call_function", torch.transpose, k, -2, -1)
    scores = ins.call("scores", "call_function", torch.matmul, q, k_t)
    scores = ins.call("scale", "call_function", operator.mul, scores, float(scale))
    if mask is not None:
        scores = ins.call("mask_add", "call_function", operator.add, scores, mask)
    probs = ins.call("softmax", "call_function", torch.softmax, scores, -1)
    return ins.call("context", "call_function", torch.matmul, probs, v)


def _expand_sdpa(gm: fx.GraphModule, node: fx.Node) -> bool:
    q, k, v = (_arg(node, i, key, None) for i, key in enumerate(("query", "key", "value")))
    metas = [_tensor_meta(t) for t in (q, k, v)]
    mask, causal = _arg(node, 3, "attn_mask", None), _arg(node, 5, "is_causal", False)
    scale = node.kwargs.get("scale")
    if any(m is None for m in metas) or node.kwargs.get("enable_gqa", False) \
            or not isinstance(causal, bool) or (mask is not None and causal) \
            or not (scale is None or isinstance(scale, (int, float))):
        return False
    ins = _Inserter(gm, node, node.name)
    (q_shape, _), (k_shape, _) = metas[0], metas[1]
    if causal:
        length, keys = q_shape[-2], k_shape[-2]
        allowed = torch.ones(length, keys, dtype=torch.bool).tril()
        mask = ins.constant("causal_mask",
                            torch.zeros(length, keys).masked_fill(~allowed, float("-inf")))
    elif mask is not None:
        mask = _additive_mask(ins, mask, true_takes_part=True)
        if mask is _NOT_CONST:
            return False
    out = _attention_core(ins, q, k, v, 1 / math.sqrt(q_shape[-1]) if scale is None
                          else float(scale), mask)
    node.replace_all_uses_with(out)
    gm.graph.erase_node(node)
    return True


def _mha_args(node: fx.Node) -> dict[str, Any]:
    names = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask",
             "average_attn_weights", "is_causal")
    defaults = (None, None, None, None, True, None, True, False)
    return {key: _arg(node, i, key, d) for i, (key, d) in enumerate(zip(names, defaults,
                                                                        strict=True))}


def _expand_mha(gm: fx.GraphModule, node: fx.Node, mod: nn.MultiheadAttention) -> bool:
    a = _mha_args(node)
    metas = [_tensor_meta(a[key]) for key in ("query", "key", "value")]
    users = list(node.users)
    weights_read = any(u.op != "call_function" or u.target is not operator.getitem
                       or u.args[1] not in (0, 1) or (u.args[1] == 1 and u.users)
                       for u in users)
    if any(m is None for m in metas) or a["key_padding_mask"] is not None or weights_read \
            or mod.bias_k is not None or mod.bias_v is not None or mod.add_zero_attn \
            or len({len(m[0]) for m in metas}) != 1 or len(metas[0][0]) not in (2, 3):
        return False
    q_shape = metas[0][0]
    if a["attn_mask"] is not None and len(_tensor_meta(a["attn_mask"])[0]
                                          if _tensor_meta(a["attn_mask"]) else ()) != 2:
        return False  # a per-head (N * h, L, S) mask: not written
    ins = _Inserter(gm, node, str(node.target))
    mask = None
    if a["attn_mask"] is not None:
        mask = _additive_mask(ins, a["attn_mask"], true_takes_part=False)
        if mask is _NOT_CONST:
            return False
    e, h = mod.embed_dim, mod.num_heads
    d = e // h
    if mod._qkv_same_embed_dim:
        w = mod.in_proj_weight.detach()
        weights = (w[:e], w[e:2 * e], w[2 * e:])
    else:
        weights = tuple(t.detach() for t in (mod.q_proj_weight, mod.k_proj_weight,
                                             mod.v_proj_weight))
    b = None if mod.in_proj_bias is None else mod.in_proj_bias.detach()
    biases = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
    rank = len(q_shape)
    # (N, L, E) batch first, (L, N, E) sequence first, (L, E) unbatched -> (..., h, L, d)
    if rank == 2:
        to_heads, from_heads = (1, 0, 2), (1, 0, 2)
    elif mod.batch_first:
        to_heads, from_heads = (0, 2, 1, 3), (0, 2, 1, 3)
    else:
        to_heads, from_heads = (1, 2, 0, 3), (2, 0, 1, 3)
    heads = []
    for part, key, weight, bias in zip("qkv", ("query", "key", "value"), weights, biases,
                                       strict=True):
        x = a[key]
        shape = _tensor_meta(x)[0]
        proj = ins.call(f"{part}_proj", "call_function", F.linear, x,
                        ins.parameter(f"{part}_weight", weight),
                        ins.parameter(f"{part}_bias", bias))
        split = ins.call(f"{part}_split", "call_method", "reshape", proj,
                         (*shape[:-1], h, d))
        heads.append(ins.call(f"{part}_heads", "call_method", "permute", split, to_heads))
    context = _attention_core(ins, *heads, 1 / math.sqrt(d), mask)
    merged = ins.call("merge", "call_method", "permute", context, from_heads)
    merged = ins.call("concat_heads", "call_method", "reshape", merged, (*q_shape[:-1], e))
    with gm.graph.inserting_before(node):
        out = gm.graph.call_module(f"{node.target}.out_proj", (merged,))
    for user in users:
        if user.args[1] == 0:
            user.replace_all_uses_with(out)
        gm.graph.erase_node(user)
    gm.graph.erase_node(node)
    return True


def _meta(node: Any) -> tuple[int, ...] | None:
    if isinstance(node, fx.Node):
        meta = node.meta.get(_SHAPE)
        if isinstance(meta, tuple):
            return meta
    return None


def _shape(node: fx.Node) -> tuple[int, ...]:
    return _meta(node)


def _is_split(node: fx.Node) -> bool:
    return (node.op == "call_function" and node.target in _SPLIT_FUNCS
            or node.op == "call_method" and node.target in _SPLIT_METHODS)


def _is_tuple_of_tensors(node: fx.Node) -> bool:
    return isinstance(node.meta.get(_SHAPE), list)


def _flat_nodes(args: Any) -> list[fx.Node]:
    found: list[fx.Node] = []
    fx.node.map_arg(args, found.append)
    return found


class _Converter:
    """Walks a shape-propagated GraphModule and emits ops into a GraphBuilder."""

    def __init__(self, gm: fx.GraphModule, name: str, allow_opaque: bool,
                 with_params: bool = False) -> None:
        self.gm = gm
        self.with_params = with_params
        self.params: Params = {}
        self.modules = dict(gm.named_modules())
        self.allow_opaque = allow_opaque
        self.builder = GraphBuilder(name)
        self.tensor: dict[fx.Node, str] = {}  # fx node -> name of the IR tensor it denotes
        self.tuple_source: dict[fx.Node, fx.Node] = {}  # split/chunk node -> its input node
        self.used_names: set[str] = set()
        self.opaque: list[str] = []
        self.shuffles, self.folded = _channel_shuffles(gm)

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
        if node in self.folded:
            return  # part of a channel shuffle, emitted at its last node
        if node in self.shuffles:
            src, groups = self.shuffles[node]
            self._emit(node, {"kind": OpKind.TRANSPOSE, "op_type": "channel_shuffle",
                              "attrs": {"groups": groups}}, [self.tensor[src]])
            return
        if _is_tuple_of_tensors(node):
            if _is_split(node):
                self._remember_split(node)
                return
            node.meta[_MIXED] = node.meta.pop(_SHAPE)  # a tuple no IR op computes
        if _MIXED in node.meta and self._tensor_inputs(node):
            self._convert_mixed(node)
            return
        if _meta(node) is None:
            return  # a shape, a size or another non-tensor value: not an op
        if node.op == "call_function" and node.target is operator.getitem \
                and _MIXED in getattr(node.args[0], "meta", {}):
            self._mixed_item(node)
            return
        if node.op == "call_function" and node.target is operator.getitem:
            src = self.tuple_source.get(node.args[0], node.args[0])
            if src not in self.tensor and not self._tensor_inputs(node):
                return  # an item of a constant (a parameter table indexed by a buffer)
            inputs = [src] if src in self.tensor else []
            spec = _slice_spec(node, src, node.args[0] in self.tuple_source) if inputs \
                else None
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

    def _convert_mixed(self, node: fx.Node) -> None:
        """A call returning tensors and other values (attention's (out, None)): no IR op
        computes it, so it is refused by name, or one opaque op (its first tensor)."""
        spec = self._opaque(node)
        first = next(s for s in node.meta[_MIXED] if s is not None)
        self._emit(node, spec, [self.tensor[n] for n in self._tensor_inputs(node)], first)

    def _mixed_item(self, node: fx.Node) -> None:
        """Item k of a refused call's tuple: its opaque op for the first tensor, another
        opaque op reading it for any other."""
        src, k = node.args[0], node.args[1]
        if src not in self.tensor:
            return  # the call read no tensor: not an op
        items = src.meta[_MIXED]
        if isinstance(k, int) and -len(items) <= k < len(items) \
                and k % len(items) == next(i for i, s in enumerate(items) if s is not None):
            self.tensor[node] = self.tensor[src]
            return
        what = _describe(src, self.modules)
        self.opaque.append(f"{what} at {node.name}")
        self._emit(node, {"kind": OpKind.OPAQUE, "op_type": what.lower()}, [self.tensor[src]])

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

    def _emit(self, node: fx.Node, spec: dict[str, Any], inputs: list[str],
              shape: tuple[int, ...] | None = None) -> None:
        name = self._op_name(node)
        fields = dict(spec)
        tensors = fields.pop("params", None)
        if tensors and self.with_params:
            self.params[name] = {k: _param(v) for k, v in tensors.items() if v is not None}
        self.builder.add_op(name, fields.pop("kind"), fields.pop("op_type"), inputs,
                            shape or _shape(node), attrs=fields.pop("attrs", None), **fields)
        self.tensor[node] = name

    def _op_name(self, node: fx.Node) -> str:
        base = node.meta.get(_NAME) or (node.target if node.op == "call_module" else node.name)
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
        if isinstance(mod, nn.RReLU):
            return _rrelu_spec(mod.lower, mod.upper)
        act = ACTIVATIONS.get(type(mod).__name__.lower())
        if act is not None:
            weights = sum(p.numel() for p in mod.parameters())
            attrs = _act_attrs(act, lambda key, _pos, default: getattr(mod, key, default))
            if attrs is None:
                return None
            spec = {"kind": OpKind.ELTWISE_UNARY, "op_type": act, "weight_elems": weights,
                    "attrs": attrs}
            if act == "prelu":
                spec["params"] = {"weight": mod.weight}
            return spec
        if _is_stochastic_depth(mod):
            return _ALIAS
        return None

    def _conv(self, node: fx.Node, mod: nn.Conv2d) -> dict[str, Any]:
        in_shape, out_shape = _shape(node.args[0]), _shape(node)
        kernel = tuple(mod.kernel_size)
        attrs = {} if mod.padding_mode == "zeros" else {"padding_mode": mod.padding_mode}
        return {
            "kind": conv_kind(mod.groups, mod.in_channels), "op_type": "conv", "attrs": attrs,
            "params": {"weight": mod.weight, "bias": mod.bias},
            "kernel": kernel, "stride": tuple(mod.stride), "dilation": tuple(mod.dilation),
            "padding": _conv_padding(mod.padding, in_shape, out_shape, kernel, mod.stride,
                                     mod.dilation),
            "groups": mod.groups, "weight_elems": sum(p.numel() for p in mod.parameters()),
            "macs": conv_macs(out_shape, mod.in_channels, mod.groups, kernel),
        }

    def _batchnorm(self, node: fx.Node, mod: nn.BatchNorm2d) -> dict[str, Any]:
        out = _shape(node)
        return {"kind": OpKind.BATCHNORM, "op_type": "batchnorm",
                "weight_elems": 2 * mod.num_features, "macs": math.prod(out),
                "params": _bn_params(mod)}

    def _linear(self, node: fx.Node, mod: nn.Linear) -> dict[str, Any]:
        return {"kind": OpKind.LINEAR, "op_type": "linear",
                "weight_elems": sum(p.numel() for p in mod.parameters()),
                "macs": linear_macs(_shape(node), mod.in_features),
                "params": {"weight": mod.weight, "bias": mod.bias}}

    def _pool(self, node: fx.Node, mod: nn.MaxPool2d | nn.AvgPool2d) -> dict[str, Any] | object:
        op_type = "max" if isinstance(mod, nn.MaxPool2d) else "avg"
        dilation = mod.dilation if isinstance(mod, nn.MaxPool2d) else 1
        include_pad = getattr(mod, "count_include_pad", True)
        if getattr(mod, "divisor_override", None):
            return None
        return _window_pool(op_type, mod.kernel_size, mod.stride, mod.padding, dilation,
                            mod.ceil_mode, include_pad)

    def _adaptive_pool(self, node: fx.Node, mod: nn.Module) -> dict[str, Any] | object:
        op_type = "max" if isinstance(mod, nn.AdaptiveMaxPool2d) else "avg"
        return _adaptive(op_type, _shape(node.args[0]), _shape(node))

    def _reshape(self, node: fx.Node, mod: nn.Module) -> dict[str, Any] | object:
        return _reshape_spec(node, "flatten")

    def _alias(self, node: fx.Node, mod: nn.Module) -> object:
        return _ALIAS

    def _upsample(self, node: fx.Node, mod: nn.Upsample) -> dict[str, Any]:
        return _resize_spec(mod.mode, mod.align_corners, mod.size, mod.scale_factor)

    def _softmax(self, node: fx.Node, mod: nn.Module) -> dict[str, Any]:
        dim = -3 if isinstance(mod, nn.Softmax2d) else mod.dim
        return _softmax_spec(node, dim, isinstance(mod, nn.LogSoftmax))

    def _pad(self, node: fx.Node, mod: nn.Module) -> dict[str, Any]:
        mode = {nn.ReflectionPad2d: "reflect", nn.ReplicationPad2d: "replicate",
                nn.CircularPad2d: "circular"}.get(type(mod), "constant")
        return _pad_spec(node, tuple(mod.padding), mode, getattr(mod, "value", 0.0))

    def _layer_norm(self, node: fx.Node, mod: nn.LayerNorm | nn.RMSNorm) -> dict[str, Any] | None:
        rank = len(_shape(node))
        n = len(mod.normalized_shape)
        op_type = "layernorm" if isinstance(mod, nn.LayerNorm) else "rmsnorm"
        return _norm_spec(op_type, tuple(range(rank - n, rank)), mod.eps, mod.weight,
                          getattr(mod, "bias", None))

    def _group_norm(self, node: fx.Node, mod: nn.Module) -> dict[str, Any] | None:
        shape = _shape(node)
        if isinstance(mod, nn.GroupNorm):
            return _norm_spec("groupnorm", tuple(range(1, len(shape))), mod.eps, mod.weight,
                              mod.bias, mod.num_groups)
        if len(shape) != mod._get_no_batch_dim() + 1:
            return None  # an unbatched input: its channels are the first axis
        if mod.running_mean is not None:  # running statistics at inference: a BatchNorm
            return {"kind": OpKind.BATCHNORM, "op_type": "batchnorm",
                    "weight_elems": 2 * shape[1], "macs": math.prod(shape),
                    "params": _bn_params(mod)}
        return _norm_spec("groupnorm", tuple(range(1, len(shape))), mod.eps, mod.weight,
                          mod.bias, shape[1])

    def _shuffle(self, node: fx.Node, mod: nn.Module) -> dict[str, Any]:
        attrs = {key: int(getattr(mod, key)) for key in _SHUFFLE_ATTRS if hasattr(mod, key)}
        op_type = next(name for cls, name in _SHUFFLE_MODULES if isinstance(mod, cls))
        return {"kind": OpKind.TRANSPOSE, "op_type": op_type, "attrs": attrs}

    # --- call_function / call_method -----------------------------------------------------

    def _function(self, node: fx.Node) -> dict[str, Any] | object | None:
        t = node.target
        if t in _BINARY_FUNCS:
            return self._arith(node, _BINARY_FUNCS[t])
        if t in _ACT_FUNCS:
            return _act_spec(node, _ACT_FUNCS[t])
        if t in _RRELU_FUNCS:
            return _rrelu_spec(_arg(node, 1, "lower", 1 / 8), _arg(node, 2, "upper", 1 / 3))
        if t in _CLAMP_FUNCS:
            return _clamp_spec(node)
        if t in _RESHAPE_FUNCS:
            return _reshape_spec(node, _RESHAPE_FUNCS[t])
        if t in _ALIAS_FUNCS or _is_stochastic_depth(t):
            return _ALIAS
        if t in _CAT_FUNCS:
            return self._cat(node)
        if t in _NORM_FUNCS:
            return self._f_norm(node, _NORM_FUNCS[t])
        if t in _PERMUTE_FUNCS:
            return _permute_spec(node, _PERMUTE_FUNCS[t], t.__name__)
        if t is getattr and node.args[1] in _PERMUTE_ATTRS:
            return _permute_spec(node, _PERMUTE_ATTRS[node.args[1]], node.args[1])
        if t in _SHUFFLE_FUNCS:
            return _shuffle_spec(node, t.__name__)
        if t in _MATMUL_FUNCS:
            return self._f_matmul(node)
        handler = _FUNCTION_HANDLERS.get(t)
        return handler(self, node) if handler else None

    def _method(self, node: fx.Node) -> dict[str, Any] | object | None:
        m = node.target
        if m in _BINARY_METHODS:
            return self._arith(node, _BINARY_METHODS[m])
        if m in _ACT_METHODS or m.endswith("_") and m[:-1] in _ACT_METHODS:
            return _act_spec(node, ACTIVATIONS[m.rstrip("_")])
        if m in _CLAMP_METHODS:
            return _clamp_spec(node)
        if m in _RESHAPE_METHODS:
            return _reshape_spec(node, m)
        if m in _ALIAS_METHODS:
            return _ALIAS
        if m in _PERMUTE_METHODS:
            return _permute_spec(node, _PERMUTE_METHODS[m], m)
        if m == "mean":
            return self._mean(node)
        if m in _SOFTMAX_METHODS:
            return _softmax_spec(node, _arg(node, 1, "dim", None), _SOFTMAX_METHODS[m])
        if m in _MATMUL_METHODS:
            return self._f_matmul(node)
        return None

    def _cat(self, node: fx.Node) -> dict[str, Any]:
        """A concatenation; operands computed from parameters (ViT's class token) count as
        weights, and their positions and values travel as ``const_at`` and ``const{k}``."""
        dim = _arg(node, 1, "dim", 0)
        operands = list(_arg(node, 0, "tensors", ()))
        consts = [(k, n) for k, n in enumerate(operands) if n not in self.tensor]
        spec: dict[str, Any] = {
            "kind": OpKind.CONCAT, "op_type": "concat",
            "weight_elems": sum(math.prod(_meta(n) or ()) for _, n in consts
                                if _meta(n) is not None),
            "attrs": {"axis": int(dim) % len(_shape(node))}}
        values = [_const(self.gm, n) for _, n in consts]
        if consts and all(v is not None for v in values):
            spec["attrs"].update(const_at=tuple(k for k, _ in consts),
                                 const_shapes=tuple(tuple(v.shape) for v in values))
            spec["params"] = {f"const{k}": v for k, v in enumerate(values)}
        return spec

    def _arith(self, node: fx.Node, op_type: str) -> dict[str, Any] | None:
        tensors = self._tensor_inputs(node)
        const = sum(_const_numel(self.gm, a) for a in _flat_nodes(node.args))
        if _arg(node, 2, "alpha", 1) != 1:
            return None  # torch.add(x, y, alpha=a): no IR op computes it
        if len(tensors) >= 2:
            return {"kind": OpKind.ELTWISE_BINARY, "op_type": op_type,
                    "weight_elems": const if const > 1 else 0}
        spec: dict[str, Any] = {"kind": OpKind.ELTWISE_UNARY, "op_type": op_type,
                                "weight_elems": const if const > 1 else 0}
        operands = list(node.args[:2])
        if len(operands) == 2:
            side = "right" if operands[0] in self.tensor else "left"
            other = operands[1] if side == "right" else operands[0]
            value = _const(self.gm, other)
            attrs: dict[str, Any] = {"const_side": side}
            if isinstance(other, (int, float)) and not isinstance(other, bool):
                attrs["scalar"] = float(other)
            elif value is not None and value.numel() == 1:
                attrs["scalar"] = float(value.reshape(()).item())
            elif value is not None:
                attrs["const_shape"] = tuple(int(d) for d in value.shape)
                spec["params"] = {"const": value}
            spec["attrs"] = attrs
        return spec

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
        if a.get("divisor_override"):
            return None
        return _window_pool(op_type, a["kernel_size"], a.get("stride") or a["kernel_size"],
                            a.get("padding", 0), a.get("dilation", 1), a.get("ceil_mode", False),
                            a.get("count_include_pad", True))

    def _f_interpolate(self, node: fx.Node) -> dict[str, Any]:
        mode = _arg(node, 3, "mode", "nearest")
        size = _arg(node, 1, "size", None)
        return _resize_spec(mode, _arg(node, 4, "align_corners", None), size,
                            _arg(node, 2, "scale_factor", None), self._size_source(size))

    def _size_source(self, size: Any) -> str | None:
        """The IR tensor whose spatial size an interpolation's `size` argument is
        (``t.shape[-2:]``, ``t.size()[2:]``), for symbolic shapes (`simulator.workload.rdp`)."""
        if not (isinstance(size, fx.Node) and size.op == "call_function"
                and size.target is operator.getitem and isinstance(size.args[1], slice)):
            return None
        shape_of = size.args[0]
        if not isinstance(shape_of, fx.Node) or not (
                shape_of.op == "call_function" and shape_of.target is getattr
                and shape_of.args[1] == "shape"
                or shape_of.op == "call_method" and shape_of.target == "size"
                and len(shape_of.args) == 1):
            return None
        tensor, rank = shape_of.args[0], len(_meta(shape_of.args[0]) or ())
        if tensor not in self.tensor or tuple(range(rank)[size.args[1]]) != (rank - 2, rank - 1):
            return None
        return self.tensor[tensor]

    def _f_pad(self, node: fx.Node) -> dict[str, Any]:
        pad = node.args[1] if len(node.args) > 1 else node.kwargs["pad"]
        value = _arg(node, 3, "value", None)
        return _pad_spec(node, tuple(pad), _arg(node, 2, "mode", "constant"),
                         0.0 if value is None else value)

    def _f_softmax(self, node: fx.Node) -> dict[str, Any]:
        return _softmax_spec(node, _arg(node, 1, "dim", None), node.target in _LOG_SOFTMAX)

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
            "params": {"weight": _const(self.gm, a["weight"]),
                       "bias": _const(self.gm, a.get("bias"))},
            "kind": conv_kind(groups, in_shape[1]), "op_type": "conv", "kernel": kernel,
            "stride": stride, "dilation": dilation, "groups": groups,
            "padding": _conv_padding(a.get("padding", 0), in_shape, out_shape, kernel, stride,
                                     dilation),
            "weight_elems": math.prod(w) + bias,
            "macs": conv_macs(out_shape, in_shape[1], groups, kernel),
        }

    def _f_matmul(self, node: fx.Node) -> dict[str, Any] | None:
        """``x @ W`` with a constant matrix W is a linear layer (weight W^T); a product of two
        activations (attention's scores) is a matmul; a constant first operand is refused."""
        x = _arg(node, 0, "input", None)
        other = _arg(node, 1, "other", node.kwargs.get("mat2"))
        if x in self.tensor and other in self.tensor:
            return {"kind": OpKind.MATMUL, "op_type": "matmul",
                    "macs": matmul_macs(_shape(node), _shape(x))}
        w = _const(self.gm, other)
        if x not in self.tensor or w is None or w.dim() != 2:
            return None
        return {"kind": OpKind.LINEAR, "op_type": "linear", "weight_elems": int(w.numel()),
                "macs": linear_macs(_shape(node), int(w.shape[0])), "params": {"weight": w.T}}

    def _f_norm(self, node: fx.Node, op_type: str) -> dict[str, Any] | None:
        """F.layer_norm / group_norm / instance_norm / rms_norm with constant scale and bias."""
        rank = len(_shape(node))
        a = _normalized(node, self.gm)
        args = [self._gm_value(a.get(key)) for key in ("weight", "bias")]
        if any(v is _NOT_CONST for v in args):
            return None
        weight, bias = args
        if op_type == "groupnorm" and node.target is F.instance_norm:
            if not a.get("use_input_stats", True):
                return None  # running statistics: a BatchNorm, not written
            groups = _shape(node)[1]
        elif op_type == "groupnorm":
            groups = a.get("num_groups")
        if op_type == "groupnorm":
            return _norm_spec(op_type, tuple(range(1, rank)), a.get("eps", 1e-5), weight,
                              bias, groups)
        normalized = a.get("normalized_shape")
        normalized = (normalized,) if isinstance(normalized, int) else normalized
        if not isinstance(normalized, (tuple, list)) or not 0 < len(normalized) <= rank:
            return None
        eps = a.get("eps", 1e-5 if op_type == "layernorm" else None)
        return _norm_spec(op_type, tuple(range(rank - len(normalized), rank)), eps, weight,
                          bias if op_type == "layernorm" else None)

    def _gm_value(self, arg: Any) -> torch.Tensor | None | object:
        """The constant tensor `arg` names, None for None, `_NOT_CONST` for an activation or
        any other value."""
        if arg is None:
            return None
        value = _const(self.gm, arg)
        return _NOT_CONST if value is None else value

    def _f_linear(self, node: fx.Node) -> dict[str, Any] | None:
        a = _normalized(node, self.gm)
        w = _const_shape(self.gm, a["weight"])
        if w is None:
            return None
        return {"kind": OpKind.LINEAR, "op_type": "linear",
                "weight_elems": math.prod(w) + _const_numel(self.gm, a.get("bias")),
                "macs": linear_macs(_shape(node), w[-1]),
                "params": {"weight": _const(self.gm, a["weight"]),
                           "bias": _const(self.gm, a.get("bias"))}}


_MODULE_HANDLERS: list[tuple[Any, Callable[..., Any]]] = [
    (nn.Conv2d, _Converter._conv),
    (nn.BatchNorm2d, _Converter._batchnorm),
    (nn.Linear, _Converter._linear),
    ((nn.MaxPool2d, nn.AvgPool2d), _Converter._pool),
    ((nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d), _Converter._adaptive_pool),
    ((nn.Flatten, nn.Unflatten), _Converter._reshape),
    (_ALIAS_MODULES, _Converter._alias),
    (nn.Upsample, _Converter._upsample),
    ((nn.Softmax, nn.Softmax2d, nn.LogSoftmax), _Converter._softmax),
    ((nn.ZeroPad2d, nn.ConstantPad2d, nn.ReflectionPad2d, nn.ReplicationPad2d,
      nn.CircularPad2d), _Converter._pad),
    ((nn.PixelShuffle, nn.PixelUnshuffle, nn.ChannelShuffle), _Converter._shuffle),
    ((nn.LayerNorm, nn.RMSNorm), _Converter._layer_norm),
    ((nn.GroupNorm, *_INSTANCE_NORMS), _Converter._group_norm),
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
    F.log_softmax: _Converter._f_softmax,
    torch.log_softmax: _Converter._f_softmax,
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
                 ceil_mode: bool, count_include_pad: bool = True) -> dict[str, Any] | object:
    k, s, p = _pair(kernel), _pair(stride if stride is not None else kernel), _pair(padding)
    pad = (p[0], p[1], p[0], p[1])
    if is_identity_window(k, s, pad):
        return _ALIAS
    attrs: dict[str, Any] = {"ceil_mode": bool(ceil_mode)}
    if op_type == "avg" and not count_include_pad and any(pad):
        attrs["count_include_pad"] = False
    return {"kind": OpKind.POOL, "op_type": op_type, "kernel": k, "stride": s, "padding": pad,
            "dilation": _pair(dilation), "attrs": attrs}


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


def _slice_spec(node: fx.Node, src: fx.Node, of_split: bool) -> dict[str, Any] | object | None:
    if of_split and _shape(node) == _shape(src):
        return _ALIAS
    if of_split:
        attrs = _split_slice(node.args[0], node.args[1], _shape(src))
    else:
        index = fx.node.map_arg(node.args[1], lambda n: n.meta.get(_INT, n))
        if _flat_nodes(index):
            return None  # indexing by a tensor (a gather): no IR op
        attrs = _index_slice(index, _shape(src))
        if _shape(node) == _shape(src) and attrs is not None:
            return _ALIAS
        if attrs == {}:  # only None / full slices: the index just adds axes
            return {"kind": OpKind.RESHAPE, "op_type": "unsqueeze"}
    if attrs is None:
        return None  # indexing by a tensor, or bounds not constant: refused by name
    return {"kind": OpKind.SLICE, "op_type": "slice", "attrs": attrs}


def _split_slice(split: fx.Node, k: Any, in_shape: tuple[int, ...]) -> dict[str, Any] | None:
    """Slice attrs of output `k` of a split/chunk/unbind node (None if not determinable)."""
    outs = split.meta.get(_SHAPE)
    if not isinstance(k, int) or not isinstance(outs, list) or not -len(outs) <= k < len(outs):
        return None
    k %= len(outs)
    if len(outs[k]) == len(in_shape) - 1:  # unbind
        axis = int(_arg(split, 1, "dim", 0)) % len(in_shape)
        return {"axis": axis, "start": k, "end": k + 1, "step": 1}
    axes = [i for i in range(len(in_shape)) if any(o[i] != in_shape[i] for o in outs)]
    if len(axes) != 1 or any(len(o) != len(in_shape) for o in outs):
        return None
    axis = axes[0]
    start = sum(o[axis] for o in outs[:k])
    return {"axis": axis, "start": start, "end": start + outs[k][axis], "step": 1}


def _index_slice(index: Any, in_shape: tuple[int, ...]) -> dict[str, Any] | None:
    """Slice attrs of ``x[index]`` for basic indexing (ints, slices, None, ...), else None."""
    items = list(index) if isinstance(index, tuple) else [index]
    if not all(i is None or i is Ellipsis or isinstance(i, (int, slice)) for i in items):
        return None
    if any(isinstance(i, slice) and not all(isinstance(v, (int, type(None)))
                                            for v in (i.start, i.stop, i.step)) for i in items):
        return None
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (len(in_shape) - consumed)
    axes, starts, ends, steps = [], [], [], []
    dim = 0
    for item in items:
        if item is None:
            continue
        if dim >= len(in_shape):
            return None
        size = in_shape[dim]
        if isinstance(item, int):
            if not -size <= item < size:
                return None
            start, end, step = item % size, item % size + 1, 1
        else:
            start, end, step = item.indices(size)
            if step < 1:
                return None
        if (start, end, step) != (0, size, 1):
            axes.append(dim)
            starts.append(start)
            ends.append(max(start, end))
            steps.append(step)
        dim += 1
    if not axes:
        return {}
    if len(axes) == 1:
        return {"axis": axes[0], "start": starts[0], "end": ends[0], "step": steps[0]}
    return {"axis": tuple(axes), "start": tuple(starts), "end": tuple(ends),
            "step": tuple(steps)}


def _reshape_spec(node: fx.Node, op_type: str) -> dict[str, Any] | object:
    ins = [n for n in _flat_nodes(node.args) if _meta(n) is not None]
    if ins and _shape(ins[0]) == _shape(node):
        return _ALIAS
    return {"kind": OpKind.RESHAPE, "op_type": op_type}


def _pad_spec(node: fx.Node, pad: tuple[int, ...], mode: str = "constant",
              value: Any = 0.0) -> dict[str, Any] | None:
    if len(pad) > 4 and any(pad[4:]):
        return None  # padding of the channel or batch axis: the IR pads H and W only
    left, right, top, bottom = (tuple(pad) + (0, 0, 0, 0))[:4]
    attrs: dict[str, Any] = {}
    if mode != "constant":
        attrs["mode"] = str(mode)
    elif value:
        attrs["value"] = float(value)
    return {"kind": OpKind.PAD, "op_type": "pad", "attrs": attrs,
            "padding": (int(top), int(left), int(bottom), int(right))}


_SHUFFLE_ATTRS = ("upscale_factor", "downscale_factor", "groups")


def _permute_spec(node: fx.Node, op_type: str, how: str) -> dict[str, Any] | object | None:
    """A transpose op with its ``perm``; the identity permutation is an alias.

    Args:
        node: The call (function, method or attribute access such as ``x.mT``).
        op_type: "transpose" (two axes swapped) or "permute".
        how: The torch name, which says how the permutation is given.
    """
    rank = len(_shape(node))
    perm = _permutation(node, how.rstrip("_"), rank)
    if perm is None:
        return None
    if perm == tuple(range(rank)):
        return _ALIAS
    return {"kind": OpKind.TRANSPOSE, "op_type": op_type, "attrs": {"perm": perm}}


def _permutation(node: fx.Node, how: str, rank: int) -> tuple[int, ...] | None:
    """The permutation `node` applies (output axis i is input axis perm[i]), or None when its
    arguments are not constants."""
    rest = list(node.args[1:])
    if how in ("T", "H"):
        return tuple(range(rank))[::-1]
    if how in ("mT", "mH", "t"):
        pair: tuple[Any, Any] = (-2, -1) if rank >= 2 else (0, 0)
    elif how == "permute":
        dims = rest[0] if len(rest) == 1 else rest or node.kwargs.get("dims")
        if not isinstance(dims, (tuple, list)) or not all(isinstance(d, int) for d in dims):
            return None
        return tuple(int(d) % rank for d in dims)
    elif how in ("movedim", "moveaxis"):
        return _moved(_arg(node, 1, "source", None), _arg(node, 2, "destination", None), rank)
    else:  # transpose, swapaxes, swapdims
        names = {"transpose": ("dim0", "dim1"), "swapaxes": ("axis0", "axis1"),
                 "swapdims": ("dim0", "dim1")}[how]
        pair = (_arg(node, 1, names[0], None), _arg(node, 2, names[1], None))
    if not all(isinstance(d, int) for d in pair):
        return None
    perm = list(range(rank))
    a, b = pair[0] % rank, pair[1] % rank
    perm[a], perm[b] = perm[b], perm[a]
    return tuple(perm)


def _moved(source: Any, destination: Any, rank: int) -> tuple[int, ...] | None:
    """The permutation of ``torch.movedim(x, source, destination)``."""
    src = [source] if isinstance(source, int) else source
    dst = [destination] if isinstance(destination, int) else destination
    if not isinstance(src, (tuple, list)) or not isinstance(dst, (tuple, list)) \
            or len(src) != len(dst) or not all(isinstance(d, int) for d in [*src, *dst]):
        return None
    src, dst = [d % rank for d in src], [d % rank for d in dst]
    perm: list[int | None] = [None] * rank
    for a, b in zip(src, dst, strict=True):
        perm[b] = a
    rest = iter(d for d in range(rank) if d not in src)
    return tuple(next(rest) if p is None else p for p in perm)


def _is_reshape(node: fx.Node) -> bool:
    return (node.op == "call_method" and node.target in _RESHAPE_METHODS
            or node.op == "call_function" and node.target in _RESHAPE_FUNCS)


def _is_copy(node: fx.Node) -> bool:
    return (node.op == "call_method" and node.target in ("contiguous", "clone")
            or node.op == "call_function" and node.target is torch.clone)


def _channel_shuffles(gm: fx.GraphModule) -> tuple[dict[fx.Node, tuple[fx.Node, int]],
                                                     set[fx.Node]]:
    """ShuffleNet's channel shuffle written as view, transpose, view.

    ``x.view(N, g, C/g, *rest).transpose(1, 2)[.contiguous()].view(N, C, *rest)`` is
    ``torch.channel_shuffle(x, g)``: one transpose op, as the module form imports, instead of a
    rank-5 reshape, transpose and reshape. Returns the last node of each such chain mapped to
    (x, g), and the other nodes of the chains (each read only by the next).
    """
    shuffles: dict[fx.Node, tuple[fx.Node, int]] = {}
    folded: set[fx.Node] = set()
    for last in gm.graph.nodes:
        if not _is_reshape(last) or not isinstance(last.args[0], fx.Node):
            continue
        chain, node = [], last.args[0]
        while _is_copy(node) and isinstance(node.args[0], fx.Node):
            chain.append(node)
            node = node.args[0]
        swap = node
        if swap.op == "call_function" and swap.target in _PERMUTE_FUNCS:
            name = swap.target.__name__
        elif swap.op == "call_method" and swap.target in _PERMUTE_METHODS:
            name = str(swap.target).rstrip("_")
        else:
            continue
        first = swap.args[0]
        if not isinstance(first, fx.Node) or not _is_reshape(first) \
                or not isinstance(first.args[0], fx.Node):
            continue
        x, split, out = first.args[0], _meta(first), _meta(last)
        rank = len(split or ())
        if _meta(x) is None or out != _meta(x) or rank < 3 or len(out) != rank - 1:
            continue
        perm = _permutation(swap, name, rank)
        if perm != (0, 2, 1, *range(3, rank)) or split[0] != out[0] \
                or split[1] * split[2] != out[1] or split[3:] != out[2:]:
            continue
        if any(len(n.users) != 1 for n in (first, swap, *chain)):
            continue
        shuffles[last] = (x, int(split[1]))
        folded.update((first, swap, *chain))
    return shuffles, folded


def _shuffle_spec(node: fx.Node, op_type: str) -> dict[str, Any] | None:
    key = {"pixel_shuffle": "upscale_factor", "pixel_unshuffle": "downscale_factor",
           "channel_shuffle": "groups"}[op_type]
    value = _arg(node, 1, key, None)
    if not isinstance(value, int):
        return None
    return {"kind": OpKind.TRANSPOSE, "op_type": op_type, "attrs": {key: int(value)}}


def _softmax_spec(node: fx.Node, dim: Any, log: bool) -> dict[str, Any] | None:
    rank = len(_shape(node))
    if dim is None:  # torch's implicit dimension (deprecated)
        dim = 0 if rank in (0, 1, 3) else 1
    if not isinstance(dim, int):
        return None
    attrs: dict[str, Any] = {"axis": int(dim) % rank}
    if log:
        attrs["log"] = True
    return {"kind": OpKind.SOFTMAX, "op_type": "softmax", "attrs": attrs}


_NOT_CONST = object()  # an argument that is neither None nor a constant tensor


def _norm_spec(op_type: str, axes: tuple[int, ...], eps: Any, weight: torch.Tensor | None,
               bias: torch.Tensor | None, groups: Any = None) -> dict[str, Any] | None:
    """A NORM op over `axes` (None when an argument is not a constant of the expected kind).

    An RMS norm without eps uses the float32 machine epsilon, as torch does for float32 input.
    """
    if eps is None and op_type == "rmsnorm":
        eps = torch.finfo(torch.float32).eps
    if not isinstance(eps, (int, float)) or (weight is None and bias is not None):
        return None  # a computed eps, or a shift without a scale (no IR parameter format)
    attrs: dict[str, Any] = {"eps": float(eps), "axes": axes, "affine": weight is not None}
    if op_type == "groupnorm":
        if not isinstance(groups, int) or groups < 1:
            return None
        attrs["groups"] = int(groups)
    return {"kind": OpKind.NORM, "op_type": op_type, "attrs": attrs,
            "weight_elems": sum(int(t.numel()) for t in (weight, bias) if t is not None),
            "params": {"weight": weight, "bias": bias}}


def _resize_spec(mode: Any, align_corners: Any, size: Any = None, scale: Any = None,
                 size_of: str | None = None) -> dict[str, Any]:
    """A resize op; what its output size follows is recorded for symbolic shapes: ``size_of``
    (the tensor whose spatial size it takes), a constant ``size``, or a ``scale``."""
    attrs: dict[str, Any] = {"mode": str(mode)}
    if align_corners:
        attrs["align_corners"] = True
    if size_of is not None:
        attrs["size_of"] = size_of
    elif isinstance(size, int) or isinstance(size, (tuple, list)) and size and all(
            isinstance(v, int) for v in size):
        attrs["size"] = (size, size) if isinstance(size, int) else tuple(int(v) for v in size)
    elif isinstance(scale, (int, float)) or isinstance(scale, (tuple, list)) and scale and all(
            isinstance(v, (int, float)) for v in scale):
        pair = (scale, scale) if isinstance(scale, (int, float)) else tuple(scale)
        attrs["scale"] = tuple(float(v) for v in pair)
    return {"kind": OpKind.RESIZE, "op_type": "resize", "attrs": attrs}


def _act_attrs(act: str, get: Callable[[str, int, Any], Any]) -> dict[str, Any] | None:
    """Activation parameters that differ from their defaults, by attr name (None when one is
    not a constant)."""
    attrs: dict[str, Any] = {}
    for key, pos, default in _ACT_PARAMS.get(act, ()):
        value = get(key, pos, default)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = float(value)
        elif not isinstance(value, str):
            return None  # a tensor or a computed value
        if value != default:
            attrs[key] = value
    return attrs


def _act_spec(node: fx.Node, act: str) -> dict[str, Any] | None:
    attrs = _act_attrs(act, lambda key, pos, default: _arg(node, pos, key, default))
    if attrs is None:
        return None
    return {"kind": OpKind.ELTWISE_UNARY, "op_type": act, "attrs": attrs}


def _rrelu_spec(lower: Any, upper: Any) -> dict[str, Any] | None:
    """RReLU at inference: a leaky ReLU whose slope is the mean of its bounds."""
    if not all(isinstance(v, (int, float)) for v in (lower, upper)):
        return None
    attrs = _act_attrs("leakyrelu", lambda *_: (float(lower) + float(upper)) / 2)
    return {"kind": OpKind.ELTWISE_UNARY, "op_type": "leakyrelu", "attrs": attrs}


def _clamp_spec(node: fx.Node) -> dict[str, Any] | None:
    low, high = _arg(node, 1, "min", None), _arg(node, 2, "max", None)
    if not all(v is None or isinstance(v, (int, float)) for v in (low, high)):
        return None  # tensor bounds
    attrs = {k: float(v) for k, v in (("min_val", low), ("max_val", high)) if v is not None}
    if attrs == {"min_val": 0.0, "max_val": 6.0}:
        return {"kind": OpKind.ELTWISE_UNARY, "op_type": "relu6"}
    return {"kind": OpKind.ELTWISE_UNARY, "op_type": "clip", "attrs": attrs}


def _arg(node: fx.Node, pos: int, key: str, default: Any) -> Any:
    """Argument `key` of a call, given at position `pos` (the input being 0) or by keyword."""
    if len(node.args) > pos:
        return node.args[pos]
    return node.kwargs.get(key, default)


def _is_stochastic_depth(target: Any) -> bool:
    """torchvision's StochasticDepth module or function: the identity at inference."""
    kind = target if isinstance(target, type) or callable(target) and not isinstance(
        target, nn.Module) else type(target)
    return (getattr(kind, "__name__", "") in ("StochasticDepth", "stochastic_depth")
            and str(getattr(kind, "__module__", "")).startswith("torchvision."))


def _bn_params(mod: nn.BatchNorm2d) -> dict[str, torch.Tensor] | None:
    """scale and shift of an inference BatchNorm (None without running statistics)."""
    if mod.running_mean is None or mod.running_var is None:
        return None
    scale = torch.rsqrt(mod.running_var.detach().double() + mod.eps)
    if mod.weight is not None:
        scale = scale * mod.weight.detach().double()
    shift = -mod.running_mean.detach().double() * scale
    if mod.bias is not None:
        shift = shift + mod.bias.detach().double()
    return {"scale": scale.float(), "shift": shift.float()}


def _param(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float32).clone()


def _normalized(node: fx.Node, gm: fx.GraphModule) -> dict[str, Any]:
    pair = node.normalized_arguments(gm, normalize_to_only_use_kwargs=True)
    return dict(pair.kwargs) if pair is not None else dict(node.kwargs)


def _const(gm: fx.GraphModule, arg: Any) -> torch.Tensor | None:
    """The value of a constant tensor argument: a parameter or buffer, or a tensor computed
    from constants only (recorded by `_ShapeRecorder`); None for anything else."""
    if isinstance(arg, fx.Node) and arg.op == "get_attr":
        value = gm
        for part in str(arg.target).split("."):
            value = getattr(value, part)
        return value if isinstance(value, torch.Tensor) else None
    if isinstance(arg, fx.Node):
        return arg.meta.get(_CONST)
    return None


def _const_numel(gm: fx.GraphModule, arg: Any) -> int:
    t = _const(gm, arg)
    return int(t.numel()) if t is not None else 0


def _const_shape(gm: fx.GraphModule, arg: Any) -> tuple[int, ...] | None:
    t = _const(gm, arg)
    return tuple(t.shape) if t is not None else None
