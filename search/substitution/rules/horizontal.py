"""Horizontal fusion of sibling convolutions with kernel enlarging (OCGGS, Fig. 1 and Example
3 of `graph-substitution-ocggs.txt`: enlarge the smaller kernel to the larger one, then merge the
two convolutions reading one tensor into one).

Siblings are convolutions (groups 1) reading the same tensor with the same stride, dilation,
output size, attributes and epilogue. Their kernels are zero-padded to the largest kernel and
their paddings grown to match, so that each kept weight reads the input element it read before;
the merged convolution's weights and biases are theirs concatenated on C_out.

* case ``concat``: the siblings (each optionally followed by the same chain of activations, as
  in an unfused graph) are adjacent inputs of one channel concat, their only reader: the merged
  convolution (and one merged activation chain) replaces them, and the concat too when they are
  all it reads. SqueezeNet's fire modules (expand 1x1 + expand 3x3) and Inception-style
  branches are this case.
* case ``slice``: any other siblings: the merged convolution is followed by one channel slice
  per sibling, named like it, so that its readers are unchanged (`eliminate-concat-slices`
  removes slices that a concat joins again).
* linear layers (operator fission §2.1.2, horizontal MatMul fusion): sibling linear layers
  reading one tensor with the same epilogue (attention's Q, K and V projections) become one
  linear layer whose weights are theirs concatenated on the output features, followed by one
  slice per sibling along the last axis (case ``slice``); the MACs are unchanged and the shared
  input is read once.

The merged convolution does more MACs when kernels were enlarged; the ``substitute`` stage's
search decides whether the fusion pays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from search.substitution.base import Match, RewriteError, RuleContext
from search.substitution.rules._build import (
    EPILOGUE,
    copy_spec,
    epilogue,
    new_spec,
    ops_of,
    rebuild,
    sole_consumer,
    tensor_name,
    unique_name,
    updated_params,
    with_attrs,
)
from search.substitution.rules.algebraic import activation_texts
from search.substitution.rules.eliminate import concat_axis
from simulator.workload.builder import OpSpec
from simulator.workload.graph import ComputeGraph, Op, OpKind
from simulator.workload.ops import conv_macs

if TYPE_CHECKING:
    from simulator.workload.execute import Params

__all__ = ["HorizontalFusion", "Window", "merged_window"]


@dataclass(frozen=True)
class Window:
    """The merged convolution's window and where each sibling's kernel sits in it.

    Attributes:
        kernel: (kh, kw) of the merged convolution.
        padding: (top, left, bottom, right) of the merged convolution.
        offsets: Per sibling, (rows, columns) of zeros before its kernel.
    """

    kernel: tuple[int, int]
    padding: tuple[int, int, int, int]
    offsets: tuple[tuple[int, int], ...]


def _axis_window(convs: Sequence[Op], a: int) -> tuple[int, int, int, list[int]] | None:
    """(kernel, pad before, pad after, offsets) along spatial axis `a` (0 rows, 1 columns)."""
    first = convs[0]
    k_max = max(c.kernel[a] for c in convs)
    d, s = first.dilation[a], first.stride[a]
    size, out = first.input_shapes[0][2 + a], first.output_shape[2 + a]
    before = max(c.padding[a] for c in convs)
    offsets = []
    for c in convs:
        o, rest = divmod(before - c.padding[a], d)
        if rest or o + c.kernel[a] > k_max:
            return None
        offsets.append(o)
    after = max(0, (out - 1) * s + d * (k_max - 1) + 1 - size - before)
    if (size + before + after - d * (k_max - 1) - 1) // s + 1 != out:
        return None
    return k_max, before, after, offsets


def merged_window(convs: Sequence[Op]) -> Window | None:
    """The window merging `convs` by kernel enlarging, or None if no common padding keeps
    every kernel's reads (OCGGS Fig. 1: a 1x1 kernel becomes a 3x3 with a zero border)."""
    rows, cols = _axis_window(convs, 0), _axis_window(convs, 1)
    if rows is None or cols is None:
        return None
    return Window((rows[0], cols[0]), (rows[1], cols[1], rows[2], cols[2]),
                  tuple(zip(rows[3], cols[3], strict=True)))


def _linear_key(op: Op) -> tuple | None:
    """What sibling linear layers must share to merge (None: not a mergeable linear layer)."""
    if op.kind is not OpKind.LINEAR or len(op.inputs) != 1 or not op.weight_elems \
            or op.input_shapes[0][:-1] != op.output_shape[:-1]:
        return None
    return ("linear", op.inputs[0], op.output_shape[:-1], op.attrs)


def _conv_key(op: Op) -> tuple | None:
    """What siblings must share to merge (None: not a mergeable convolution)."""
    if op.kind is not OpKind.CONV or op.groups != 1 or len(op.inputs) != 1 \
            or len(op.output_shape) != 4:
        return None
    return (op.inputs[0], op.stride, op.dilation, op.output_shape[0], op.output_shape[2:],
            op.attrs)


@dataclass(frozen=True)
class _Branch:
    conv: Op
    tail: tuple[Op, ...]  # activations after the conv, each the only reader of the one before

    @property
    def end(self) -> Op:
        return self.tail[-1] if self.tail else self.conv

    def key(self) -> tuple:
        return (_conv_key(self.conv), tuple(activation_texts(t) for t in self.tail))


def _branch_ending(graph: ComputeGraph, end: Op) -> _Branch | None:
    """The branch (a mergeable conv, then activations) whose last op is `end`."""
    tail: list[Op] = []
    op = end
    while _conv_key(op) is None:
        if activation_texts(op) is None or op.inputs[0] < 0:
            return None
        tail.append(op)
        op = graph.ops[op.inputs[0]]
        if sole_consumer(graph, op) is not tail[-1]:
            return None
    return _Branch(op, tuple(reversed(tail)))


class HorizontalFusion:
    """Merge sibling convolutions into one (cases ``concat`` and ``slice``, module docstring).

    Matches name ``(concat, conv, conv, ...)`` (case ``concat``) or ``(conv, conv, ...)``
    (case ``slice``), the convolutions in concat order, resp. graph order.
    """

    name = "horizontal"
    stage = "substitute"
    citation = ("OCGGS (graph-substitution-ocggs.txt) Fig. 1 and Example 3: kernel enlarging "
                "then convolution merging; operator fission §2.1.2 (horizontal MatMul fusion)")

    # --- matching -----------------------------------------------------------------------------

    def _concat_runs(self, graph: ComputeGraph, concat: Op) -> list[tuple[int, list[_Branch]]]:
        """(position, branches) of each run of two or more mergeable branches in `concat`."""
        if concat.kind is not OpKind.CONCAT or epilogue(concat) or concat.weight_elems \
                or len(concat.output_shape) != 4 or concat_axis(concat) != 1:
            return []
        branches = []
        for ref in concat.inputs:
            end = graph.ops[ref] if ref >= 0 else None
            ok = end is not None and sole_consumer(graph, end) is concat
            branches.append(_branch_ending(graph, end) if ok else None)
        runs, k = [], 0
        while k < len(branches):
            j = k + 1
            while j < len(branches) and self._same(branches[k], branches[j]):
                j += 1
            run = branches[k:j]
            if j - k >= 2 and merged_window([b.conv for b in run]) is not None:
                runs.append((k, run))
            k = j
        return runs

    @staticmethod
    def _same(a: _Branch | None, b: _Branch | None) -> bool:
        return a is not None and b is not None and a.conv.id != b.conv.id \
            and a.key() == b.key()

    def _sibling_groups(self, graph: ComputeGraph) -> list[list[Op]]:
        groups: dict[tuple, list[Op]] = {}
        for op in graph.ops:
            key = _conv_key(op) or _linear_key(op)
            if key is not None:
                groups.setdefault(key, []).append(op)
        return [g for g in groups.values() if len(g) >= 2 and (
            g[0].kind is OpKind.LINEAR or merged_window(g) is not None)]

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        found = []
        for op in graph.ops:
            for _, run in self._concat_runs(graph, op):
                found.append(Match(self.name, (op.name, *(b.conv.name for b in run)),
                                   (("case", "concat"),)))
        for group in self._sibling_groups(graph):
            found.append(Match(self.name, tuple(c.name for c in group), (("case", "slice"),)))
        return found

    def _resolve(self, graph: ComputeGraph, match: Match) -> tuple[Op | None, int, list[_Branch]]:
        """(concat or None, position in it, branches) of a match that holds; RewriteError."""
        case = match.arg("case")
        named = ops_of(graph, match)
        if case == "concat" and len(named) >= 3:
            for k, run in self._concat_runs(graph, named[0]):
                if [b.conv.name for b in run] == list(match.ops[1:]):
                    return named[0], k, run
        elif case == "slice" and len(named) >= 2:
            for group in self._sibling_groups(graph):
                if [c.name for c in group] == list(match.ops):
                    return None, 0, [_Branch(c, ()) for c in group]
        raise RewriteError(f"rewrite {match} does not apply to graph {graph.name!r}")

    # --- rewriting ------------------------------------------------------------------------------

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        concat, k, run = self._resolve(graph, match)
        convs = [b.conv for b in run]
        merged = self._merged_spec(graph, convs)
        replaced: dict[str, tuple[OpSpec, ...]] = {c.name: () for c in convs}
        if concat is None:
            replaced[convs[0].name] = (merged, *self._slices(merged.name, convs))
            return rebuild(graph, replaced, rule=self.name)
        chain = [merged]
        for level in range(len(run[0].tail)):
            ops = [b.tail[level] for b in run]
            chain.append(copy_spec(graph, ops[0], name=unique_name(
                graph, "+".join(o.name for o in ops)), inputs=[chain[-1].name],
                output_shape=merged.output_shape, mapping=None))
            replaced.update({o.name: () for o in ops})
        replaced[convs[0].name] = tuple(chain)
        if len(run) == len(concat.inputs):
            replaced[concat.name] = ()
            return rebuild(graph, replaced, {concat.name: chain[-1].name}, rule=self.name)
        names = [tensor_name(graph, r) for r in concat.inputs]
        inputs = [*names[:k], chain[-1].name, *names[k + len(run):]]
        replaced[concat.name] = (copy_spec(graph, concat, inputs=inputs),)
        return rebuild(graph, replaced, rule=self.name)

    def _merged_spec(self, graph: ComputeGraph, convs: Sequence[Op]) -> OpSpec:
        first = convs[0]
        if first.kind is OpKind.LINEAR:
            out = (*first.output_shape[:-1], sum(c.output_shape[-1] for c in convs))
            return new_spec(
                unique_name(graph, "+".join(c.name for c in convs)), OpKind.LINEAR, "linear",
                [tensor_name(graph, first.inputs[0])], out,
                weight_elems=sum(c.weight_elems for c in convs),
                macs=sum(c.macs for c in convs),
                attrs=with_attrs(first.attrs, **{EPILOGUE: epilogue(first)}))
        window = merged_window(convs)
        first = convs[0]
        c_in = first.input_shapes[0][1]
        c_out = sum(c.output_shape[1] for c in convs)
        out = (first.output_shape[0], c_out, *first.output_shape[2:])
        bias = c_out if any(_has_bias(c) for c in convs) else 0
        return new_spec(
            unique_name(graph, "+".join(c.name for c in convs)), OpKind.CONV, "conv",
            [tensor_name(graph, first.inputs[0])], out, kernel=window.kernel,
            stride=first.stride, padding=window.padding, dilation=first.dilation,
            weight_elems=c_out * c_in * math.prod(window.kernel) + bias,
            macs=conv_macs(out, c_in, 1, window.kernel),
            attrs=with_attrs(first.attrs, **{EPILOGUE: epilogue(first)}))

    @staticmethod
    def _slices(merged: str, convs: Sequence[Op]) -> list[OpSpec]:
        slices, start = [], 0
        axis = len(convs[0].output_shape) - 1 if convs[0].kind is OpKind.LINEAR else 1
        for c in convs:
            end = start + c.output_shape[axis]
            slices.append(new_spec(c.name, OpKind.SLICE, "slice", [merged], c.output_shape,
                                   attrs={"axis": axis, "start": start, "end": end, "step": 1}))
            start = end
        return slices

    def transform(self, graph: ComputeGraph, match: Match, params: Params) -> Params:
        import torch

        _, _, run = self._resolve(graph, match)
        convs = [b.conv for b in run]
        merged = self._merged_spec(graph, convs).name
        if convs[0].kind is OpKind.LINEAR:
            ps = [params[c.name] for c in convs]
            put = {"weight": torch.cat([p["weight"].float() for p in ps])}
            if any("bias" in p for p in ps):
                put["bias"] = torch.cat([p["bias"].float() if "bias" in p else
                                         torch.zeros(c.output_shape[-1])
                                         for p, c in zip(ps, convs, strict=True)])
            return updated_params(params, drop=[c.name for c in convs], put={merged: put})
        window = merged_window(convs)
        c_in = convs[0].input_shapes[0][1]
        weights, biases = [], []
        for conv, (oy, ox) in zip(convs, window.offsets, strict=True):
            p = params[conv.name]
            w = torch.zeros(conv.output_shape[1], c_in, *window.kernel)
            kh, kw = conv.kernel
            w[:, :, oy:oy + kh, ox:ox + kw] = p["weight"].float()
            weights.append(w)
            biases.append(p["bias"].float() if "bias" in p else torch.zeros(conv.output_shape[1]))
        put = {"weight": torch.cat(weights)}
        if any(_has_bias(c) for c in convs):
            put["bias"] = torch.cat(biases)
        return updated_params(params, drop=[c.name for c in convs], put={merged: put})


def _has_bias(conv: Op) -> bool:
    return conv.weight_elems > conv.output_shape[1] * conv.input_shapes[0][1] * \
        math.prod(conv.kernel) // conv.groups
