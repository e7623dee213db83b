"""Elimination of data-movement ops that move nothing (DNNFusion §4.4.2, intra-block
optimizations: Reorganize and Shuffle ops whose copies can be removed; OCGGS Fig. 1c, the
split that a merged convolution needs and a concatenation undoes):

==========================  ===============================================================
rule                        rewrite
==========================  ===============================================================
eliminate-concat-slices     a concat of adjacent slices of one tensor along its axis -> the
                            tensor (or one slice of it when they cover part of it)
eliminate-slice-concat      a slice of a concat selecting exactly one input -> that input
eliminate-identity          an op that copies its input: a one-input concat, a reshape to
                            the same shape, a slice of everything, the identity permutation,
                            zero padding
==========================  ===============================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from search.substitution.base import Match, RewriteError, RuleContext
from search.substitution.rules._build import (
    can_bypass,
    copy_spec,
    epilogue,
    new_spec,
    op_named,
    rebuild,
    tensor_name,
    unique_name,
    updated_params,
)
from simulator.workload.graph import ComputeGraph, Op, OpKind, is_network_input

if TYPE_CHECKING:
    from simulator.workload.execute import Params

__all__ = ["ConcatOfSlices", "Identity", "SliceOfConcat", "concat_axis", "slice_range"]

CITATION = ("DNNFusion (Niu et al., PLDI 2021) §4.4.2 intra-block optimizations "
            "(dnnfusion.txt); OCGGS Fig. 1c split/concat (graph-substitution-ocggs.txt)")


def concat_axis(op: Op) -> int:
    """The non-negative axis a concat joins along (attr ``axis``, default 1)."""
    rank = len(op.output_shape)
    return int(op.attr("axis", 1)) % rank


@dataclass(frozen=True)
class SliceRange:
    """A slice of one axis with step 1: ``source[start:end]`` along `axis`."""

    source: int
    axis: int
    start: int
    end: int


def slice_range(op: Op) -> SliceRange | None:
    """The range a single-axis, step-1 slice selects (bounds normalised as Python does), or
    None for any other op or slice."""
    if op.kind is not OpKind.SLICE or len(op.inputs) != 1 or epilogue(op):
        return None
    axis, start, end, step = (op.attr(k) for k in ("axis", "start", "end", "step"))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (axis, start, end)) \
            or step not in (None, 1):
        return None
    shape = op.input_shapes[0]
    axis %= len(shape)
    lo, hi, _ = slice(start, end).indices(shape[axis])
    if hi <= lo or op.output_shape[axis] != hi - lo:
        return None
    return SliceRange(op.inputs[0], axis, lo, hi)


class _SingleOpRule:
    """A rule whose matches name one op and a case; subclasses give `case` and `rewrite`."""

    name: str
    stage = "fuse"
    citation = CITATION

    def case(self, graph: ComputeGraph, op: Op) -> str | None:
        raise NotImplementedError

    def rewrite(self, graph: ComputeGraph, op: Op, case: str) -> ComputeGraph:
        raise NotImplementedError

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        found = []
        for op in graph.ops:
            case = self.case(graph, op)
            if case is not None:
                found.append(Match(self.name, (op.name,), (("case", case),)))
        return found

    def _op(self, graph: ComputeGraph, match: Match) -> tuple[Op, str]:
        op = op_named(graph, match.ops[0], match)
        case = self.case(graph, op) if len(match.ops) == 1 else None
        if case is None or case != match.arg("case"):
            raise RewriteError(f"rewrite {match} does not apply to graph {graph.name!r}")
        return op, case

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        return self.rewrite(graph, *self._op(graph, match))

    def transform(self, graph: ComputeGraph, match: Match, params: Params) -> Params:
        op, _ = self._op(graph, match)
        return updated_params(params, drop=(op.name,))


_COPIES = (OpKind.CONCAT, OpKind.RESHAPE, OpKind.SLICE, OpKind.TRANSPOSE, OpKind.PAD)


class Identity(_SingleOpRule):
    """An op that copies its only input is removed; its readers read the input. Cases:
    ``concat`` (one input), ``reshape`` (same shape), ``slice`` (everything, step 1),
    ``transpose`` (identity permutation), ``pad`` (no padding)."""

    name = "eliminate-identity"

    def case(self, graph: ComputeGraph, op: Op) -> str | None:
        if op.kind not in _COPIES or len(op.inputs) != 1 \
                or op.input_shapes[0] != op.output_shape or epilogue(op) \
                or op.weight_elems or not can_bypass(graph, op, op.inputs[0]):
            return None
        perm = op.attr("perm")
        r = slice_range(op)
        cases = {
            "concat": op.kind is OpKind.CONCAT,
            "reshape": op.kind is OpKind.RESHAPE,
            "slice": r is not None and (r.start, r.end) == (0, op.input_shapes[0][r.axis]),
            "transpose": op.kind is OpKind.TRANSPOSE and op.op_type in ("permute", "transpose")
            and isinstance(perm, tuple)
            and tuple(int(p) % len(perm) for p in perm) == tuple(range(len(perm))),
            "pad": op.kind is OpKind.PAD and not any(op.padding),
        }
        return next((c for c, holds in cases.items() if holds), None)

    def rewrite(self, graph: ComputeGraph, op: Op, case: str) -> ComputeGraph:
        return rebuild(graph, {op.name: ()}, {op.name: tensor_name(graph, op.inputs[0])},
                       rule=self.name)


class SliceOfConcat(_SingleOpRule):
    """A slice along a concat's axis that selects exactly one of its inputs reads that input
    instead (case ``input``); the concat goes too if nothing else reads it."""

    name = "eliminate-slice-concat"

    def selected(self, graph: ComputeGraph, op: Op) -> int | None:
        """The concat input (a reference) the slice `op` selects, or None."""
        r = slice_range(op) if op.kind is OpKind.SLICE else None
        if r is None or is_network_input(r.source):
            return None
        concat = graph.ops[r.source]
        if concat.kind is not OpKind.CONCAT or epilogue(concat) or concat.weight_elems \
                or concat_axis(concat) != r.axis:
            return None
        start = 0
        for ref, shape in zip(concat.inputs, concat.input_shapes, strict=True):
            if (start, start + shape[r.axis]) == (r.start, r.end):
                return ref
            start += shape[r.axis]
        return None

    def case(self, graph: ComputeGraph, op: Op) -> str | None:
        ref = self.selected(graph, op)
        return "input" if ref is not None and can_bypass(graph, op, ref) else None

    def rewrite(self, graph: ComputeGraph, op: Op, case: str) -> ComputeGraph:
        ref = self.selected(graph, op)
        return rebuild(graph, {op.name: ()}, {op.name: tensor_name(graph, ref)},
                       prune=(graph.ops[op.inputs[0]].name,), rule=self.name)


class ConcatOfSlices(_SingleOpRule):
    """Adjacent inputs of a concat that are adjacent slices of one tensor along the concat's
    axis are read as one: the whole tensor when they cover it (case ``whole``; the concat goes
    if that is all it reads), else one slice spanning them (case ``span``, only when the concat
    is the slices' sole reader). Slices left unread are removed."""

    name = "eliminate-concat-slices"

    def run(self, graph: ComputeGraph, op: Op) -> tuple[int, int, SliceRange] | None:
        """(first, last + 1) positions in the concat's inputs of its first run of slices to
        join, and the range they cover; None if there is none."""
        if op.kind is not OpKind.CONCAT or epilogue(op) or op.weight_elems:
            return None
        axis = concat_axis(op)
        ranges = [None if is_network_input(r) else slice_range(graph.ops[r]) for r in op.inputs]
        k = 0
        while k < len(ranges):
            j = k + 1
            while j < len(ranges) and _adjacent(ranges[j - 1], ranges[j], axis):
                j += 1
            span = _span(ranges[k:j], axis)
            if span is not None and self._joinable(graph, op, k, j, span):
                return k, j, span
            k = j
        return None

    @staticmethod
    def _joinable(graph: ComputeGraph, op: Op, k: int, j: int, span: SliceRange) -> bool:
        if _whole(graph, span):
            return j - k < len(op.inputs) or can_bypass(graph, op, span.source)
        return j - k > 1 and all(graph.successors(r) == (op.id,) and r not in graph.output_set
                                 and op.inputs.count(r) == 1 for r in op.inputs[k:j])

    def case(self, graph: ComputeGraph, op: Op) -> str | None:
        found = self.run(graph, op)
        if found is None:
            return None
        return "whole" if _whole(graph, found[2]) else "span"

    def rewrite(self, graph: ComputeGraph, op: Op, case: str) -> ComputeGraph:
        k, j, span = self.run(graph, op)
        run = [graph.ops[r] for r in op.inputs[k:j]]
        pruned = [s.name for s in run]
        source = tensor_name(graph, span.source)
        if case == "whole" and j - k == len(op.inputs):
            return rebuild(graph, {op.name: ()}, {op.name: source}, prune=pruned,
                           rule=self.name)
        replaced = {}
        joined = source
        if case == "span":
            joined = unique_name(graph, "+".join(pruned))
            shape = list(run[0].output_shape)
            shape[span.axis] = span.end - span.start
            replaced[run[0].name] = (new_spec(
                joined, OpKind.SLICE, "slice", [source], shape,
                attrs={"axis": span.axis, "start": span.start, "end": span.end, "step": 1}),)
        names = [tensor_name(graph, r) for r in op.inputs]
        replaced[op.name] = (copy_spec(graph, op, inputs=[*names[:k], joined, *names[j:]]),)
        return rebuild(graph, replaced, prune=pruned, rule=self.name)


def _whole(graph: ComputeGraph, span: SliceRange) -> bool:
    return (span.start, span.end) == (0, graph.tensor_shape(span.source)[span.axis])


def _adjacent(a: SliceRange | None, b: SliceRange | None, axis: int) -> bool:
    return (a is not None and b is not None and a.source == b.source and a.axis == b.axis == axis
            and a.end == b.start)


def _span(ranges: list[SliceRange | None], axis: int) -> SliceRange | None:
    if not ranges or ranges[0] is None or ranges[0].axis != axis:
        return None
    return SliceRange(ranges[0].source, axis, ranges[0].start, ranges[-1].end)
