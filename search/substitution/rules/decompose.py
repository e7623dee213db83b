"""Decomposition of composite ops into primitives (operator fission, `operator-fission.txt` §2:
elementwise, reduce/broadcast and linear-transformation primitives, Table 1; §2.1 the Softmax
case, its ReduceSum written as a MatMul):

=====================  ==================================================================
rule                   rewrite
=====================  ==================================================================
decompose-silu         ``silu(x)`` -> ``x * sigmoid(x)``
decompose-hardswish    ``hardswish(x)`` -> ``x * hardsigmoid(x)``
decompose-softmax      ``softmax(x)`` -> ``exp(x) / sum(exp(x))``, the sum a linear layer
                       (last axis) or a 1x1 convolution (channel axis of an NCHW tensor)
                       with all-ones weights
=====================  ==================================================================

The composite op's name goes to the last primitive (so its readers are unchanged), the others
are ``name/sigmoid``, ``name/exp``, ``name/sum``; an epilogue moves to the last primitive.
These rewrites add ops: they belong to the ``substitute`` stage, whose search decides whether
the fusion they enable pays.

The paper's Softmax fission also subtracts a ReduceMax first, for numerical range only; the IR
has no op reducing by maximum along one axis (only `OpKind.GLOBAL_POOL` over both spatial
axes), so the decomposition here omits it: equal values wherever ``exp`` does not overflow
(inputs below about 88 in float32).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from search.substitution.base import Match, RewriteError, RuleContext
from search.substitution.rules._build import (
    copy_spec,
    epilogue,
    new_spec,
    op_named,
    rebuild,
    tensor_name,
    unique_name,
    updated_params,
    with_attrs,
)
from simulator.workload.graph import ComputeGraph, Op, OpKind
from simulator.workload.ops import ACTIVATIONS, conv_macs, linear_macs

if TYPE_CHECKING:
    from simulator.workload.execute import Params

__all__ = ["DecomposeGate", "DecomposeSoftmax", "softmax_sum_kind"]

CITATION = "Operator fission (operator-fission.txt) §2 Table 1 and §2.1 (Softmax fission)"


class _DecomposeRule:
    """Shared `find`/`apply`/`transform` of a rule rewriting one op by its name."""

    name: str
    stage = "substitute"
    citation = CITATION

    def holds(self, graph: ComputeGraph, op: Op) -> bool:
        raise NotImplementedError

    def rewrite(self, graph: ComputeGraph, op: Op) -> ComputeGraph:
        raise NotImplementedError

    def params(self, graph: ComputeGraph, op: Op, params: Params) -> Params:
        return updated_params(params, drop=(op.name,))

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        return [Match(self.name, (op.name,)) for op in graph.ops if self.holds(graph, op)]

    def _op(self, graph: ComputeGraph, match: Match) -> Op:
        op = op_named(graph, match.ops[0], match)
        if len(match.ops) != 1 or not self.holds(graph, op):
            raise RewriteError(f"rewrite {match} does not apply to graph {graph.name!r}")
        return op

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        return self.rewrite(graph, self._op(graph, match))

    def transform(self, graph: ComputeGraph, match: Match, params: Params) -> Params:
        return self.params(graph, self._op(graph, match), params)


class DecomposeGate(_DecomposeRule):
    """``f(x) = x * g(x)`` for a gated activation `f`: SiLU (g = sigmoid) and hardswish
    (g = hardsigmoid, ``relu6(x + 3) / 6``). The gate is a One-to-One op and the product a
    One-to-One binary op: each can then fuse with its neighbours (DNNFusion Table 3)."""

    def __init__(self, activation: str, gate: str) -> None:
        self.activation, self.gate = activation, gate
        self.name = f"decompose-{activation}"

    def holds(self, graph: ComputeGraph, op: Op) -> bool:
        return (op.kind is OpKind.ELTWISE_UNARY and ACTIVATIONS.get(op.op_type) == self.activation
                and len(op.inputs) == 1 and not op.weight_elems
                and not [k for k, _ in op.attrs if k != "epilogue"])

    def rewrite(self, graph: ComputeGraph, op: Op) -> ComputeGraph:
        x = tensor_name(graph, op.inputs[0])
        gate = unique_name(graph, f"{op.name}/{self.gate}")
        specs = (
            new_spec(gate, OpKind.ELTWISE_UNARY, self.gate, [x], op.output_shape),
            new_spec(op.name, OpKind.ELTWISE_BINARY, "mul", [x, gate], op.output_shape,
                     attrs=with_attrs((), epilogue=epilogue(op))),
        )
        return rebuild(graph, {op.name: specs}, rule=self.name)


def softmax_sum_kind(op: Op) -> OpKind | None:
    """The op that sums a softmax's exponentials: LINEAR along the last axis, CONV (1x1) along
    the channel axis of an NCHW tensor; None when the softmax cannot be decomposed (another
    axis, several axes, log-softmax, an attribute the primitives do not carry)."""
    axis, rank = op.attr("axis", -1), len(op.output_shape)
    if op.kind is not OpKind.SOFTMAX or op.op_type != "softmax" or op.attr("log") \
            or not isinstance(axis, int) or isinstance(axis, bool) or len(op.inputs) != 1 \
            or [k for k, _ in op.attrs if k not in ("axis", "epilogue")]:
        return None
    if axis % rank == rank - 1:
        return OpKind.LINEAR
    return OpKind.CONV if rank == 4 and axis % rank == 1 else None


class DecomposeSoftmax(_DecomposeRule):
    """``softmax(x) = exp(x) / sum(exp(x))`` with the sum a linear transformation of all-ones
    weights (operator fission §2.1.1: "the Reduce-Sum operator in Softmax can be represented as
    a linear transformation, MatMul"). Exp is One-to-One, the sum Many-to-Many, the division by
    the broadcast sum One-to-Many."""

    name = "decompose-softmax"

    def holds(self, graph: ComputeGraph, op: Op) -> bool:
        return softmax_sum_kind(op) is not None

    def rewrite(self, graph: ComputeGraph, op: Op) -> ComputeGraph:
        kind, shape = softmax_sum_kind(op), op.output_shape
        x = tensor_name(graph, op.inputs[0])
        exp, total = _softmax_names(graph, op)
        if kind is OpKind.LINEAR:
            sum_shape = (*shape[:-1], 1)
            summed = new_spec(total, OpKind.LINEAR, "linear", [exp], sum_shape,
                              weight_elems=shape[-1], macs=linear_macs(sum_shape, shape[-1]))
        else:
            sum_shape = (shape[0], 1, *shape[2:])
            summed = new_spec(total, OpKind.CONV, "conv", [exp], sum_shape,
                              weight_elems=shape[1],
                              macs=conv_macs(sum_shape, shape[1], 1, (1, 1)))
        specs = (
            new_spec(exp, OpKind.ELTWISE_UNARY, "exp", [x], shape),
            summed,
            copy_spec(graph, op, kind=OpKind.ELTWISE_BINARY, op_type="div", inputs=[exp, total],
                      attrs=with_attrs((), epilogue=epilogue(op)), mapping=None),
        )
        return rebuild(graph, {op.name: specs}, rule=self.name)

    def params(self, graph: ComputeGraph, op: Op, params: Params) -> Params:
        import torch

        shape = op.output_shape
        ones = torch.ones(1, shape[-1]) if softmax_sum_kind(op) is OpKind.LINEAR \
            else torch.ones(1, shape[1], 1, 1)
        return updated_params(params, drop=(op.name,),
                              put={_softmax_names(graph, op)[1]: {"weight": ones}})


def _softmax_names(graph: ComputeGraph, op: Op) -> tuple[str, str]:
    exp = unique_name(graph, f"{op.name}/exp")
    return exp, unique_name(graph, f"{op.name}/sum", (exp,))


SILU = DecomposeGate("silu", "sigmoid")
HARDSWISH = DecomposeGate("hardswish", "hardsigmoid")
