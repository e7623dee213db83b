"""What every rule needs to rewrite a graph without mutating it: look ops up by name (refusing a
match that no longer holds), copy ops as named specs with some fields changed, and rebuild the
graph with some ops replaced and some tensors renamed.

`rebuild` is the one way rules produce a graph: every op not replaced is copied with its name and
fields, inputs are renamed through `alias` (a removed op's consumers read what replaces it), and
`GraphBuilder` renumbers the result topologically.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from search.substitution.base import Match, RewriteError, RuleContext
from simulator.workload.builder import GraphBuilder, OpSpec
from simulator.workload.graph import (
    ComputeGraph,
    GraphError,
    Op,
    OpKind,
    default_mapping,
    freeze_attrs,
    input_ref,
    is_network_input,
    network_input_index,
)

if TYPE_CHECKING:
    from simulator.workload.execute import Params

__all__ = ["EPILOGUE", "PairRule", "can_bypass", "copy_spec", "epilogue", "input_names",
           "new_spec", "op_named", "ops_of", "rebuild", "sole_consumer", "tensor_name",
           "unique_name", "updated_params", "with_attrs"]

EPILOGUE = "epilogue"
"""The attribute holding the activation texts fused into an op's output (`execute`)."""


def tensor_name(graph: ComputeGraph, ref: int) -> str:
    """Name of the tensor an input reference denotes: a network input's name or an op's name."""
    if is_network_input(ref):
        return graph.input_names[network_input_index(ref)]
    return graph.ops[ref].name


def input_names(graph: ComputeGraph, op: Op) -> tuple[str, ...]:
    """Names of the tensors `op` reads, in argument order."""
    return tuple(tensor_name(graph, r) for r in op.inputs)


def op_named(graph: ComputeGraph, name: str, match: Match) -> Op:
    """The op called `name`; `RewriteError` if `graph` has none (the match does not hold)."""
    try:
        return graph.ops[graph.id_of(name)]
    except KeyError:
        raise RewriteError(f"rewrite {match} does not apply to graph {graph.name!r}: it has no "
                           f"op {name!r}") from None


def ops_of(graph: ComputeGraph, match: Match, count: int | None = None) -> list[Op]:
    """The ops a match names, in its order; `RewriteError` if one is missing or if `count` is
    given and the match names another number of ops."""
    if count is not None and len(match.ops) != count:
        raise RewriteError(f"rewrite {match} names {len(match.ops)} ops, rule "
                           f"{match.rule!r} takes {count}")
    return [op_named(graph, n, match) for n in match.ops]


def sole_consumer(graph: ComputeGraph, op: Op) -> Op | None:
    """The one op reading `op`'s output (once), if `op` is not a network output; else None."""
    succ = graph.successors(op.id)
    if len(succ) != 1 or op.id in graph.output_set:
        return None
    consumer = graph.ops[succ[0]]
    return consumer if consumer.inputs.count(op.id) == 1 else None


def epilogue(op: Op) -> tuple[str, ...]:
    """The activation texts fused into `op`'s output, in order (empty if none)."""
    return tuple(op.attr(EPILOGUE) or ())


def with_attrs(attrs: Iterable[tuple[str, Any]] | Mapping[str, Any],
               **changes: Any) -> tuple[tuple[str, Any], ...]:
    """`attrs` with keys set to new values (a value None, or an empty epilogue, removes it)."""
    merged = dict(attrs)
    for key, value in changes.items():
        if value is None or (key == EPILOGUE and not value):
            merged.pop(key, None)
        else:
            merged[key] = value
    return freeze_attrs(merged)


def copy_spec(graph: ComputeGraph, op: Op, **changes: Any) -> OpSpec:
    """`op` as a spec that `rebuild` adds (inputs named), with some fields changed (`inputs`
    as names, `attrs` as a mapping or sorted pairs, `mapping` None for the kind's default)."""
    spec = OpSpec(name=op.name, kind=op.kind, op_type=op.op_type,
                  inputs=input_names(graph, op), output_shape=op.output_shape,
                  kernel=op.kernel, stride=op.stride, padding=op.padding,
                  dilation=op.dilation, groups=op.groups, weight_elems=op.weight_elems,
                  macs=op.macs, attrs=op.attrs, mapping=op.mapping)
    return _changed(spec, changes)


def new_spec(name: str, kind: OpKind, op_type: str, inputs: Sequence[str],
             output_shape: Sequence[int], **fields: Any) -> OpSpec:
    """A new op as a spec; `fields` are the optional `OpFields` (and `mapping`)."""
    spec = OpSpec(name=name, kind=kind, op_type=op_type, inputs=tuple(inputs),
                  output_shape=tuple(int(d) for d in output_shape))
    return _changed(spec, fields)


def _changed(spec: OpSpec, changes: Mapping[str, Any]) -> OpSpec:
    changes = dict(changes)
    if "attrs" in changes:
        changes["attrs"] = freeze_attrs(dict(changes["attrs"]))
    for key in ("inputs", "output_shape"):
        if key in changes:
            changes[key] = tuple(changes[key])
    return replace(spec, **changes)


def unique_name(graph: ComputeGraph, base: str, taken: Iterable[str] = ()) -> str:
    """`base`, or `base#k` with the smallest k making it unused in `graph` and `taken`."""
    used = set(taken)
    name, k = base, 1
    while name in used or name in graph.input_names or _has_op(graph, name):
        name, k = f"{base}#{k}", k + 1
    return name


def _has_op(graph: ComputeGraph, name: str) -> bool:
    try:
        graph.id_of(name)
    except KeyError:
        return False
    return True


def rebuild(graph: ComputeGraph, replaced: Mapping[str, Sequence[OpSpec]],
            alias: Mapping[str, str] | None = None, *, prune: Iterable[str] = (),
            rule: str = "rewrite") -> ComputeGraph:
    """`graph` with each op named in `replaced` swapped for its specs (none: removed).

    Args:
        graph: The graph rewritten (unchanged).
        replaced: Op name -> the specs standing in its place (they may reuse the name).
        alias: Tensor name -> the tensor its readers and the network outputs read instead
            (followed transitively); for ops removed without a same-named replacement.
        prune: Ops to drop too if nothing reads them any more and they are no network output
            (what a rewrite left dead, e.g. slices of a concat no longer read).
        rule: The rule's name, for errors.

    Raises:
        RewriteError: The result breaks an IR invariant (an unknown tensor, a cycle, a network
            output that became a network input or another output).
    """
    alias = dict(alias or {})
    names = [*(op.name for op in graph.ops), *reversed(graph.input_names)]  # names[ref]
    try:
        items = []
        for op in graph.ops:
            for item in replaced.get(op.name, (op,)):
                read = tuple(names[r] for r in item.inputs) if isinstance(item, Op) \
                    else item.inputs
                items.append((item, tuple(_resolve(alias, n) for n in read) if alias else read))
        outputs = [_resolve(alias, tensor_name(graph, o)) for o in graph.outputs]
        if len(set(outputs)) != len(outputs):
            raise GraphError(f"two network outputs became one tensor ({', '.join(outputs)})")
        items = _pruned(items, set(prune), set(outputs))
        return _numbered(graph, items, outputs) or _sorted(graph, items, outputs)
    except GraphError as err:
        raise RewriteError(f"rule {rule!r} on graph {graph.name!r} made an invalid graph: "
                           f"{err}") from None


_Item = tuple[Op | OpSpec, tuple[str, ...]]  # an op kept or a spec added, its inputs' names


def _pruned(items: list[_Item], prune: set[str], outputs: set[str]) -> list[_Item]:
    while True:
        read = {n for _, names in items for n in names}
        dead = {it.name for it, _ in items if it.name in prune and it.name not in read | outputs}
        if not dead:
            return items
        items = [(it, names) for it, names in items if it.name not in dead]


def _numbered(graph: ComputeGraph, items: list[_Item], outputs: list[str]) -> ComputeGraph | None:
    """The graph with the items numbered in their order, or None if an item reads a tensor
    defined after it (then `_sorted` orders them)."""
    ref = {n: input_ref(k) for k, n in enumerate(graph.input_names)}
    shapes = dict(zip(ref.values(), graph.input_shapes, strict=True))
    ops: list[Op] = []
    for i, (item, names) in enumerate(items):
        if any(n not in ref for n in names) or item.name in ref:
            return None
        inputs = tuple(ref[n] for n in names)
        in_shapes = tuple(shapes[r] for r in inputs)
        if isinstance(item, Op) and (item.id, item.inputs, item.input_shapes) == (
                i, inputs, in_shapes):
            op = item
        else:
            op = Op(id=i, name=item.name, kind=item.kind, op_type=item.op_type, inputs=inputs,
                    input_shapes=in_shapes, output_shape=item.output_shape,
                    mapping=item.mapping or default_mapping(item.kind, in_shapes,
                                                            item.output_shape),
                    kernel=item.kernel, stride=item.stride, padding=item.padding,
                    dilation=item.dilation, groups=item.groups, weight_elems=item.weight_elems,
                    macs=item.macs, attrs=item.attrs)
        ref[op.name], shapes[i] = i, op.output_shape
        ops.append(op)
    if any(o not in ref for o in outputs):
        return None
    outs = tuple(ref[o] for o in outputs)
    if any(o < 0 for o in outs):
        raise GraphError("a network input became a network output")
    return ComputeGraph(name=graph.name, ops=tuple(ops), input_shapes=graph.input_shapes,
                        outputs=outs, input_names=graph.input_names)


def _sorted(graph: ComputeGraph, items: list[_Item], outputs: list[str]) -> ComputeGraph:
    b = GraphBuilder(graph.name)
    for name, shape in zip(graph.input_names, graph.input_shapes, strict=True):
        b.add_input(name, shape)
    for item, names in items:
        s = copy_spec(graph, item) if isinstance(item, Op) else item
        b.add_op(s.name, s.kind, s.op_type, names, s.output_shape, attrs=dict(s.attrs),
                 kernel=s.kernel, stride=s.stride, padding=s.padding, dilation=s.dilation,
                 groups=s.groups, weight_elems=s.weight_elems, macs=s.macs, mapping=s.mapping)
    return b.build(outputs)


def can_bypass(graph: ComputeGraph, op: Op, ref: int) -> bool:
    """True if `op`'s readers and network output can read tensor `ref` instead (it would not
    make a network input or another output a network output)."""
    if op.id not in graph.output_set:
        return True
    return not is_network_input(ref) and ref not in graph.output_set


def _resolve(alias: Mapping[str, str], name: str) -> str:
    seen = {name}
    while name in alias:
        name = alias[name]
        if name in seen:
            raise GraphError(f"tensor aliases form a cycle through {name!r}")
        seen.add(name)
    return name


def updated_params(params: Params, drop: Iterable[str] = (),
                   put: Mapping[str, Mapping[str, Any]] | None = None) -> Params:
    """A new params dict: `params` without the ops in `drop`, with the entries of `put` set
    (an op whose new entry is empty is left out); the others passed through unchanged."""
    dropped = set(drop)
    out = {k: v for k, v in params.items() if k not in dropped}
    for name, tensors in (put or {}).items():
        if tensors:
            out[name] = dict(tensors)
        else:
            out.pop(name, None)
    return out


class PairRule:
    """A rule rewriting an op `first` and an op `second` that reads `first` and nothing else.

    Subclasses give `case` (which rewrite applies to the pair, None if none), `rewrite` and
    `params`; matches name ``(first, second)`` and carry the case, so that `apply` and
    `transform` refuse a match whose pair no longer has that case.
    """

    name: str
    stage: str
    citation: str
    kinds: tuple[OpKind, ...]
    """The kinds `second` may have (the others are not looked at)."""

    def case(self, graph: ComputeGraph, first: Op, second: Op) -> str | None:
        raise NotImplementedError

    def rewrite(self, graph: ComputeGraph, first: Op, second: Op, case: str) -> ComputeGraph:
        raise NotImplementedError

    def params(self, graph: ComputeGraph, first: Op, second: Op, case: str,
               params: Params) -> Params:
        raise NotImplementedError

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        found = []
        for second in graph.ops:
            if second.kind not in self.kinds or len(second.inputs) != 1 \
                    or is_network_input(second.inputs[0]):
                continue
            first = graph.ops[second.inputs[0]]
            case = self.case(graph, first, second)
            if case is not None:
                found.append(Match(self.name, (first.name, second.name), (("case", case),)))
        return found

    def _pair(self, graph: ComputeGraph, match: Match) -> tuple[Op, Op, str]:
        first, second = ops_of(graph, match, 2)
        case = self.case(graph, first, second) if second.inputs == (first.id,) else None
        if case is None or case != match.arg("case"):
            raise RewriteError(f"rewrite {match} does not apply to graph {graph.name!r}")
        return first, second, case

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        return self.rewrite(graph, *self._pair(graph, match))

    def transform(self, graph: ComputeGraph, match: Match, params: Params) -> Params:
        return self.params(graph, *self._pair(graph, match), params)
