"""DNNFusion's mathematical-property-based graph rewriting (Niu et al. 2021, §4.2, Fig. 2 and
Table 4), the rewrites of it that occur in CNN graphs:

=========================  =============================================================
rule                       rewrite
=========================  =============================================================
algebraic-affine-chain     two consecutive constant scales / shifts / BatchNorms -> one
                           (associative: ``(x*a)*b = x*(a*b)``, distributive:
                           ``(x*a1 + b1)*a2 + b2 = x*(a1*a2) + (b1*a2 + b2)``)
algebraic-identity-arith   ``x*1``, ``x/1``, ``x+0``, ``x-0``, ``x**1`` removed
algebraic-idempotent       an activation absorbed by its neighbour removed
                           (``relu(relu(x))``, ``relu(relu6(x))``, ``relu6(relu(x))``, ...)
algebraic-reshape-chain    a reshape of a reshape -> one reshape
algebraic-transpose-chain  two permutations -> their composition, or nothing when it is the
                           identity (also pixel shuffle / unshuffle and channel shuffle
                           pairs that invert each other)
=========================  =============================================================

Every rewrite removes at least one op and changes no value. The module also owns the
elementwise-affine arithmetic that `fuse` uses to fold constants into weights (`affine_form`,
`affine_coeffs`) and the activation absorption table (`absorbs`), so each fact has one home.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from search.substitution.base import Match, RewriteError, RuleContext
from search.substitution.rules._build import (
    PairRule,
    can_bypass,
    copy_spec,
    epilogue,
    op_named,
    rebuild,
    tensor_name,
    updated_params,
    with_attrs,
)
from simulator.workload.graph import ComputeGraph, Op, OpKind, Shape
from simulator.workload.ops import const_operand_shape

if TYPE_CHECKING:
    import torch

    from simulator.workload.execute import Params

__all__ = ["AffineChain", "IdempotentActivation", "IdentityArithmetic", "ReshapeChain",
           "TransposeChain", "absorbs", "activation_texts", "affine_coeffs", "affine_form",
           "const_shape"]

CITATION = ("DNNFusion (Niu et al., PLDI 2021) §4.2 mathematical-property-based graph "
            "rewriting, Fig. 2 and Table 4 (dnnfusion.txt)")

_AFFINE_KINDS = (OpKind.ELTWISE_UNARY, OpKind.BATCHNORM)
_SCALE_LIKE = {("mul", "left"), ("mul", "right"), ("div", "right")}
_SHIFT_LIKE = {("add", "left"), ("add", "right"), ("sub", "right")}


# --- constants and affine forms -----------------------------------------------------------------


def const_shape(op: Op) -> Shape | None:
    """Shape of an elementwise op's constant operand: () for a scalar attribute, the recorded
    ``const_shape``, else what `execute` infers from ``weight_elems``; None if unknown."""
    if op.attr("scalar") is not None:
        return ()
    return const_operand_shape(op)


def _varies_only_along(shape: Shape, out: Shape, axis: int) -> bool:
    if len(shape) > len(out):
        return False
    offset = len(out) - len(shape)
    return all(d == 1 or offset + i == axis for i, d in enumerate(shape))


def _arith_side(op: Op) -> tuple[str, str] | None:
    """(op_type, const side) of a unary arithmetic op with a constant operand whose output has
    its input's shape; None for any other op."""
    if (op.kind is not OpKind.ELTWISE_UNARY or op.op_type not in ("add", "sub", "mul", "div")
            or len(op.inputs) != 1 or op.input_shapes[0] != op.output_shape):
        return None
    return op.op_type, str(op.attr("const_side", "right"))


def affine_form(op: Op, axis: int) -> str | None:
    """How `op` is ``y = a*x + b`` with `a`, `b` constant along every axis but `axis`:
    ``"scale"`` (b = 0), ``"shift"`` (a = 1), ``"affine"`` (both), or None if it is not."""
    if op.kind is OpKind.BATCHNORM:
        ok = len(op.output_shape) >= 2 and axis == 1 and op.input_shapes[0] == op.output_shape
        return "affine" if ok else None
    side = _arith_side(op)
    shape = const_shape(op)
    if side is None or shape is None or not _varies_only_along(shape, op.output_shape, axis):
        return None
    if side in _SCALE_LIKE:
        return "scale"
    if side in _SHIFT_LIKE:
        return "shift"
    return "affine" if side == ("sub", "left") else None


def _const(op: Op, params: Params) -> torch.Tensor:
    import torch

    if op.attr("scalar") is not None:
        return torch.tensor(float(op.attr("scalar")))
    return params[op.name]["const"].float()


def affine_coeffs(op: Op, params: Params, channels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, b), each of `channels` elements, with ``op(x) = a*x + b`` along the axis that
    `affine_form` accepted."""
    import torch

    if op.kind is OpKind.BATCHNORM:
        p = params[op.name]
        return p["scale"].float().reshape(-1), p["shift"].float().reshape(-1)
    c = _const(op, params)
    v = c.reshape(-1).expand(channels) if c.numel() == 1 else c.reshape(-1)
    one, zero = torch.ones(channels), torch.zeros(channels)
    a, b = {
        ("add", "left"): (one, v), ("add", "right"): (one, v), ("sub", "right"): (one, -v),
        ("sub", "left"): (-one, v), ("mul", "left"): (v, zero), ("mul", "right"): (v, zero),
        ("div", "right"): (1.0 / v, zero),
    }[_arith_side(op)]
    return a.clone(), b.clone()


# --- activations ---------------------------------------------------------------------------------


def activation_texts(op: Op) -> tuple[str, ...] | None:
    """The epilogue texts computing `op` (its own text, then its epilogue) if `op` is an
    elementwise unary op that text can carry (no parameter tensor); None otherwise."""
    if (op.kind is not OpKind.ELTWISE_UNARY or len(op.inputs) != 1
            or op.input_shapes[0] != op.output_shape):
        return None
    text = _text(op.op_type, op.attrs)
    return None if text is None else (text, *epilogue(op))


@lru_cache(maxsize=4096)
def _text(op_type: str, attrs: tuple[tuple[str, Any], ...]) -> str | None:
    """`activation_text` of an elementwise unary op (it reads only these two fields)."""
    from simulator.workload.execute import ExecutionError, activation_text

    probe = Op(id=0, name="probe", kind=OpKind.ELTWISE_UNARY, op_type=op_type, inputs=(),
               input_shapes=(), output_shape=(1,), attrs=attrs)
    try:
        return activation_text(probe)
    except ExecutionError:
        return None


def _clamp_bounds(text: str) -> tuple[float, float] | None:
    """(low, high) if the activation text is a clamp (relu, relu6, hardtanh, clip)."""
    from simulator.workload.execute import parse_activation

    name, p = parse_activation(text)
    if name == "relu":
        return 0.0, math.inf
    if name == "relu6":
        return 0.0, 6.0
    if name == "hardtanh":
        return float(p.get("min_val", -1.0)), float(p.get("max_val", 1.0))
    if name == "clip":
        low, high = p.get("min_val"), p.get("max_val")
        return (-math.inf if low is None else float(low), math.inf if high is None else float(high))
    return None


_RANGE = {"sigmoid": (0.0, 1.0), "hardsigmoid": (0.0, 1.0), "tanh": (-1.0, 1.0),
          "softplus": (0.0, math.inf), "exp": (0.0, math.inf), "abs": (0.0, math.inf)}
"""Output ranges of bounded activations that are no clamp."""


@lru_cache(maxsize=4096)
def absorbs(first: str, second: str) -> str | None:
    """Which of two activations applied in turn is redundant: ``"second"`` when
    ``second(first(x)) == first(x)`` (second is a clamp whose range holds first's outputs, or
    both are ``abs``), ``"first"`` when ``second(first(x)) == second(x)`` (both clamps,
    second's range inside first's); None when neither. The texts are `activation_text`s."""
    from simulator.workload.execute import parse_activation

    name_a = parse_activation(first)[0]
    a, b = _clamp_bounds(first), _clamp_bounds(second)
    outputs = a or _RANGE.get(name_a)
    if b is not None and outputs is not None and b[0] <= outputs[0] and outputs[1] <= b[1]:
        return "second"
    if a is not None and b is not None and a[0] <= b[0] and b[1] <= a[1]:
        return "first"
    return "second" if first == second == "abs" else None


class IdempotentActivation(PairRule):
    """An activation absorbed by the one before or after it is removed: ``relu(relu(x))``,
    ``relu(relu6(x))``, ``relu(sigmoid(x))`` lose the second; ``relu6(relu(x))``,
    ``hardtanh(relu(x))`` with a non-negative floor lose the first. Both are One-to-One ops, so
    the pair is a One-to-One op either way (DNNFusion Table 3)."""

    name = "algebraic-idempotent"
    stage = "fuse"
    citation = CITATION
    kinds = (OpKind.ELTWISE_UNARY,)

    def case(self, graph: ComputeGraph, first: Op, second: Op) -> str | None:
        if first.kind is not OpKind.ELTWISE_UNARY or second.kind is not OpKind.ELTWISE_UNARY:
            return None
        t1, t2 = activation_texts(first), activation_texts(second)
        if t1 is None or t2 is None or len(t1) != 1 or len(t2) != 1:
            return None
        which = absorbs(t1[0], t2[0])
        if which == "second" and can_bypass(graph, second, first.id):
            return "drop-second"
        sole = graph.successors(first.id) == (second.id,) and first.id not in graph.output_set
        if which == "first" and sole:
            return "drop-first"
        return None

    def rewrite(self, graph: ComputeGraph, first: Op, second: Op, case: str) -> ComputeGraph:
        if case == "drop-second":
            return rebuild(graph, {second.name: ()}, {second.name: first.name}, rule=self.name)
        return rebuild(graph, {first.name: ()}, {first.name: tensor_name(graph, first.inputs[0])},
                       rule=self.name)

    def params(self, graph: ComputeGraph, first: Op, second: Op, case: str,
               params: Params) -> Params:
        return updated_params(params, drop=(second.name if case == "drop-second" else first.name,))


# --- affine chains -----------------------------------------------------------------------------


class AffineChain(PairRule):
    """Two consecutive constant scales, shifts or standalone BatchNorms become one op.

    Cases: ``scale`` (both multiply: one ``mul`` by the product of the constants), ``shift``
    (both add: one ``add`` of the sum), ``affine`` (otherwise, both per-channel: one
    standalone BatchNorm with ``scale = a1*a2`` and ``shift = b1*a2 + b2``). The first op must
    feed only the second and carry no epilogue; the merged op keeps the first's name and the
    second's epilogue. One-to-One followed by One-to-One is One-to-One (DNNFusion Table 3).
    """

    name = "algebraic-affine-chain"
    stage = "fuse"
    citation = CITATION
    kinds = _AFFINE_KINDS

    def case(self, graph: ComputeGraph, first: Op, second: Op) -> str | None:
        if first.kind not in _AFFINE_KINDS or second.kind not in _AFFINE_KINDS \
                or graph.successors(first.id) != (second.id,) or first.id in graph.output_set \
                or epilogue(first):
            return None
        s1, s2 = _arith_side(first), _arith_side(second)
        if s1 is not None and s2 is not None and const_shape(first) is not None \
                and const_shape(second) is not None and _broadcastable(first, second):
            if s1 in _SCALE_LIKE and s2 in _SCALE_LIKE:
                return "scale"
            if s1 in _SHIFT_LIKE and s2 in _SHIFT_LIKE:
                return "shift"
        if affine_form(first, 1) and affine_form(second, 1):
            return "affine"
        return None

    def rewrite(self, graph: ComputeGraph, first: Op, second: Op, case: str) -> ComputeGraph:
        out = first.output_shape
        if case == "affine":
            merged = copy_spec(graph, first, kind=OpKind.BATCHNORM, op_type="batchnorm",
                               weight_elems=2 * out[1], macs=math.prod(out), mapping=None,
                               attrs=with_attrs((), epilogue=epilogue(second)))
        else:
            merged = copy_spec(graph, first, op_type="mul" if case == "scale" else "add",
                               attrs=self._const_attrs(first, second, case), mapping=None,
                               weight_elems=self._const_elems(first, second))
        return rebuild(graph, {first.name: (merged,), second.name: ()},
                       {second.name: first.name}, rule=self.name)

    @staticmethod
    def _const_elems(first: Op, second: Op) -> int:
        shape = _merged_shape(first, second)
        return math.prod(shape) if shape and math.prod(shape) > 1 else 0

    @staticmethod
    def _const_attrs(first: Op, second: Op, case: str) -> tuple[tuple[str, Any], ...]:
        ep = epilogue(second)
        s1, s2 = first.attr("scalar"), second.attr("scalar")
        if s1 is not None and s2 is not None:
            v1, v2 = _signed(first, float(s1)), _signed(second, float(s2))
            value = v1 * v2 if case == "scale" else v1 + v2
            return with_attrs((), scalar=value, const_side="right", epilogue=ep)
        return with_attrs((), const_shape=_merged_shape(first, second), const_side="right",
                          epilogue=ep)

    def params(self, graph: ComputeGraph, first: Op, second: Op, case: str,
               params: Params) -> Params:
        import torch

        if case == "affine":
            channels = first.output_shape[1]
            a1, b1 = affine_coeffs(first, params, channels)
            a2, b2 = affine_coeffs(second, params, channels)
            put = {"scale": a1 * a2, "shift": b1 * a2 + b2}
        elif first.attr("scalar") is not None and second.attr("scalar") is not None:
            put = {}
        else:
            c1 = _signed(first, _const(first, params))
            c2 = _signed(second, _const(second, params))
            c = c1 * c2 if case == "scale" else c1 + c2
            shape = _merged_shape(first, second)
            c = c.reshape(shape) if c.numel() == math.prod(shape) else \
                torch.broadcast_to(c, shape)
            put = {"const": c.contiguous()}
        return updated_params(params, drop=(second.name,), put={first.name: put})


def _signed(op: Op, value: Any) -> Any:
    """The constant as a factor (div: its reciprocal) or a term (sub: its negation)."""
    if op.op_type == "div":
        return 1.0 / value
    if op.op_type == "sub":
        return -value
    return value


def _merged_shape(first: Op, second: Op) -> Shape:
    a, b = const_shape(first) or (), const_shape(second) or ()
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


def _broadcastable(first: Op, second: Op) -> bool:
    a, b = const_shape(first) or (), const_shape(second) or ()
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    return all(x == y or 1 in (x, y) for x, y in zip(a, b, strict=True))


# --- identities ----------------------------------------------------------------------------------

_NEUTRAL = {("mul", "left"): 1.0, ("mul", "right"): 1.0, ("div", "right"): 1.0,
            ("add", "left"): 0.0, ("add", "right"): 0.0, ("sub", "right"): 0.0}


class IdentityArithmetic:
    """``x*1``, ``1*x``, ``x/1``, ``x+0``, ``0+x``, ``x-0`` and ``x**1`` with a scalar constant
    are removed (the op's readers read x)."""

    name = "algebraic-identity-arith"
    stage = "fuse"
    citation = CITATION

    def _holds(self, graph: ComputeGraph, op: Op) -> bool:
        if op.kind is not OpKind.ELTWISE_UNARY or op.attr("scalar") is None or epilogue(op) \
                or len(op.inputs) != 1 or op.input_shapes[0] != op.output_shape:
            return False
        side = (op.op_type, str(op.attr("const_side", "right")))
        neutral = 1.0 if side == ("pow", "right") else _NEUTRAL.get(side)
        return neutral is not None and float(op.attr("scalar")) == neutral \
            and can_bypass(graph, op, op.inputs[0])

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        return [Match(self.name, (op.name,)) for op in graph.ops if self._holds(graph, op)]

    def _op(self, graph: ComputeGraph, match: Match) -> Op:
        op = op_named(graph, match.ops[0], match)
        if len(match.ops) != 1 or not self._holds(graph, op):
            raise RewriteError(f"rewrite {match} does not apply to graph {graph.name!r}")
        return op

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        op = self._op(graph, match)
        return rebuild(graph, {op.name: ()}, {op.name: tensor_name(graph, op.inputs[0])},
                       rule=self.name)

    def transform(self, graph: ComputeGraph, match: Match, params: Params) -> Params:
        return updated_params(params, drop=(self._op(graph, match).name,))


# --- layout chains -----------------------------------------------------------------------------

_RESHAPES = frozenset({"reshape", "view", "flatten", "squeeze", "unsqueeze", "view_as",
                       "reshape_as", "unflatten"})


class ReshapeChain(PairRule):
    """A reshape whose only reader is another reshape: one reshape from the first's input to
    the second's output (keeping the first's name). Reorganize followed by Reorganize is
    Reorganize (DNNFusion Table 3)."""

    name = "algebraic-reshape-chain"
    stage = "fuse"
    citation = CITATION
    kinds = (OpKind.RESHAPE,)

    def case(self, graph: ComputeGraph, first: Op, second: Op) -> str | None:
        ok = (first.kind is OpKind.RESHAPE and second.kind is OpKind.RESHAPE
              and first.op_type in _RESHAPES and second.op_type in _RESHAPES
              and not epilogue(first) and graph.successors(first.id) == (second.id,)
              and first.id not in graph.output_set)
        return "reshape" if ok else None

    def rewrite(self, graph: ComputeGraph, first: Op, second: Op, case: str) -> ComputeGraph:
        merged = copy_spec(graph, first, op_type="reshape", output_shape=second.output_shape,
                           attrs=with_attrs((), epilogue=epilogue(second)), mapping=None)
        return rebuild(graph, {first.name: (merged,), second.name: ()},
                       {second.name: first.name}, rule=self.name)

    def params(self, graph: ComputeGraph, first: Op, second: Op, case: str,
               params: Params) -> Params:
        return updated_params(params, drop=(first.name, second.name))


def _perm(op: Op) -> tuple[int, ...] | None:
    perm = op.attr("perm")
    if op.kind is not OpKind.TRANSPOSE or op.op_type not in ("permute", "transpose") \
            or not isinstance(perm, tuple):
        return None
    return tuple(int(p) % len(perm) for p in perm)


def _inverse_shuffles(first: Op, second: Op) -> bool:
    """Pixel shuffle and unshuffle by the same factor, or two channel shuffles whose group
    counts multiply to the channel count, undo each other."""
    kinds = (first.op_type.replace("_", ""), second.op_type.replace("_", ""))
    if kinds in (("pixelshuffle", "pixelunshuffle"), ("pixelunshuffle", "pixelshuffle")):
        return second.output_shape == first.input_shapes[0]
    if kinds == ("channelshuffle", "channelshuffle"):
        g1, g2 = first.attr("groups"), second.attr("groups")
        return g1 is not None and g2 is not None and int(g1) * int(g2) == first.output_shape[1]
    return False


class TransposeChain(PairRule):
    """Two permutations in a row: one permutation by their composition (case ``compose``), or
    none when they undo each other (case ``inverse``: also pixel shuffle / unshuffle and
    channel-shuffle pairs). Shuffle followed by Shuffle is Shuffle (DNNFusion Table 3)."""

    name = "algebraic-transpose-chain"
    stage = "fuse"
    citation = CITATION
    kinds = (OpKind.TRANSPOSE,)

    def case(self, graph: ComputeGraph, first: Op, second: Op) -> str | None:
        if first.kind is not OpKind.TRANSPOSE or second.kind is not OpKind.TRANSPOSE \
                or epilogue(first) or graph.successors(first.id) != (second.id,) \
                or first.id in graph.output_set:
            return None
        p1, p2 = _perm(first), _perm(second)
        if p1 is not None and p2 is not None and len(p1) == len(p2):
            composed = tuple(p1[i] for i in p2)
            if composed != tuple(range(len(composed))):
                return "compose"
        elif not _inverse_shuffles(first, second):
            return None
        bypass = can_bypass(graph, second, first.inputs[0]) and not epilogue(second)
        return "inverse" if bypass else None

    def rewrite(self, graph: ComputeGraph, first: Op, second: Op, case: str) -> ComputeGraph:
        if case == "inverse":
            source = tensor_name(graph, first.inputs[0])
            return rebuild(graph, {first.name: (), second.name: ()},
                           {first.name: source, second.name: source}, rule=self.name)
        p1, p2 = _perm(first), _perm(second)
        merged = copy_spec(graph, first, op_type="permute", output_shape=second.output_shape,
                           attrs=with_attrs((), perm=tuple(p1[i] for i in p2),
                                            epilogue=epilogue(second)), mapping=None)
        return rebuild(graph, {first.name: (merged,), second.name: ()},
                       {second.name: first.name}, rule=self.name)

    def params(self, graph: ComputeGraph, first: Op, second: Op, case: str,
               params: Params) -> Params:
        return updated_params(params, drop=(first.name, second.name))
