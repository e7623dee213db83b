"""DNNFusion's mapping-type fusion of One-to-One ops into their producer (Niu et al. 2021,
§4.2 Table 3 and §4.3: One-to-One ops are the fusion seeds, fused with their predecessor).

A One-to-One op (an activation, a standalone BatchNorm, an elementwise op with a constant
operand) whose only input is an op that feeds nothing else and is no network output disappears
into that producer, which keeps its name, kind and shapes:

* **fold**: a per-channel affine op (BatchNorm, a constant scale or shift, per channel or
  scalar) after a conv, depthwise conv or linear layer without an epilogue is folded into the
  layer's weights and bias (``W' = a*W``, ``b' = a*b + c``); a bias-less layer gains one, and its
  ``weight_elems`` grow by C_out. One-to-One into Many-to-Many gives Many-to-Many.
* **epilogue**: an activation, or a scalar arithmetic op, becomes an entry of the producer's
  ``epilogue`` (`simulator.workload.execute.activation_text`); producers are convs, depthwise
  convs, linear layers, pools, global pools, elementwise binary ops (ResNet's add + ReLU) and
  standalone BatchNorms. One-to-One into Many-to-Many, One-to-One or One-to-Many gives the
  producer's type.

Only fusions DNNFusion's Table 3 marks green are made (`search.baselines.combine_mappings`); the
fused op's mapping type is the one the table gives.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from search.baselines import combine_mappings
from search.substitution.base import Match, RewriteError, RuleContext
from search.substitution.rules._build import (
    copy_spec,
    epilogue,
    ops_of,
    rebuild,
    sole_consumer,
    updated_params,
    with_attrs,
)
from search.substitution.rules.algebraic import (
    absorbs,
    activation_texts,
    affine_coeffs,
    affine_form,
)
from simulator.workload.graph import ComputeGraph, MappingType, Op, OpKind, is_network_input

if TYPE_CHECKING:
    from simulator.workload.execute import Params

__all__ = ["FuseOneToOne", "append_epilogue", "fold_axis", "weight_numel"]

_WEIGHTED = (OpKind.CONV, OpKind.DWCONV, OpKind.LINEAR)
_EPILOGUE_HOSTS = (*_WEIGHTED, OpKind.POOL, OpKind.GLOBAL_POOL, OpKind.ELTWISE_BINARY,
                   OpKind.BATCHNORM)


def weight_numel(op: Op) -> int:
    """Elements of a conv's or linear layer's weight tensor (its bias excluded)."""
    if op.kind is OpKind.LINEAR:
        return op.output_shape[-1] * op.input_shapes[0][-1]
    return op.output_shape[1] * (op.input_shapes[0][1] // op.groups) * math.prod(op.kernel)


def fold_axis(op: Op) -> int:
    """The output axis a conv's (1) or linear layer's (the last) output channels lie on."""
    return len(op.output_shape) - 1 if op.kind is OpKind.LINEAR else 1


def append_epilogue(texts: tuple[str, ...], more: tuple[str, ...]) -> tuple[str, ...]:
    """`texts` followed by `more`, dropping an activation its neighbour absorbs
    (`algebraic.absorbs`), so that fusing ``relu`` after ``relu`` adds nothing."""
    out = list(texts)
    for t in more:
        which = absorbs(out[-1], t) if out else None
        if which == "second":
            continue
        if which == "first":
            out.pop()
        out.append(t)
    return tuple(out)


class FuseOneToOne:
    """Fuse a One-to-One op into its producer (modes ``fold`` and ``epilogue``, see the module
    docstring). Matches name ``(producer, op)``."""

    name = "fuse-one-to-one"
    stage = "fuse"
    citation = ("DNNFusion (Niu et al., PLDI 2021) §4.2 Table 3 (mapping-type fusion) and §4.3 "
                "(One-to-One fusion seeds) (dnnfusion.txt)")

    def mode(self, graph: ComputeGraph, producer: Op, op: Op) -> str | None:
        """``fold``, ``epilogue`` or None for `op` reading `producer`."""
        if op.kind not in (OpKind.ELTWISE_UNARY, OpKind.BATCHNORM) \
                or op.inputs != (producer.id,) or op.mapping is not MappingType.ONE_TO_ONE \
                or sole_consumer(graph, producer) is not op:
            return None
        verdict, _ = combine_mappings(producer.mapping, op.mapping)
        if verdict != "green":
            return None
        if producer.kind in _WEIGHTED and not epilogue(producer) \
                and affine_form(op, fold_axis(producer)):
            return "fold"
        if producer.kind in _EPILOGUE_HOSTS and activation_texts(op) is not None:
            return "epilogue"
        return None

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        found = []
        for op in graph.ops:
            if len(op.inputs) != 1 or is_network_input(op.inputs[0]):
                continue
            producer = graph.ops[op.inputs[0]]
            mode = self.mode(graph, producer, op)
            if mode is not None:
                found.append(Match(self.name, (producer.name, op.name), (("mode", mode),)))
        return found

    def _pair(self, graph: ComputeGraph, match: Match) -> tuple[Op, Op, str]:
        producer, op = ops_of(graph, match, 2)
        mode = self.mode(graph, producer, op)
        if mode is None or mode != match.arg("mode"):
            raise RewriteError(f"rewrite {match} does not apply to graph {graph.name!r}")
        return producer, op, mode

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        producer, op, mode = self._pair(graph, match)
        mapping = combine_mappings(producer.mapping, op.mapping)[1]
        if mode == "fold":
            fused = copy_spec(graph, producer, weight_elems=weight_numel(producer)
                              + producer.output_shape[fold_axis(producer)], mapping=mapping,
                              attrs=with_attrs(producer.attrs, epilogue=epilogue(op)))
        else:
            texts = append_epilogue(epilogue(producer), activation_texts(op))
            fused = copy_spec(graph, producer, mapping=mapping,
                              attrs=with_attrs(producer.attrs, epilogue=texts))
        return rebuild(graph, {producer.name: (fused,), op.name: ()}, {op.name: producer.name},
                       rule=self.name)

    def transform(self, graph: ComputeGraph, match: Match, params: Params) -> Params:
        producer, op, mode = self._pair(graph, match)
        if mode == "epilogue":
            return updated_params(params, drop=(op.name,))
        import torch

        p = params[producer.name]
        w = p["weight"].float()
        channels = w.shape[0]
        bias = p["bias"].float() if "bias" in p else torch.zeros(channels)
        a, b = affine_coeffs(op, params, channels)
        weight = w * a.reshape(-1, *([1] * (w.dim() - 1)))
        return updated_params(params, drop=(op.name,),
                              put={producer.name: {"weight": weight, "bias": a * bias + b}})
