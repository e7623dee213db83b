"""Assembling a `ComputeGraph` from ops named by string, in any order.

Importers describe ops by name with the names of the tensors they read; `GraphBuilder.build`
checks references, rejects cycles (naming ops on the cycle), sorts topologically (stable: ties
keep insertion order) and numbers the ops so that every edge goes from a lower to a higher id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import networkx as nx

from simulator.workload.graph import (
    ComputeGraph,
    GraphError,
    MappingType,
    Op,
    OpFields,
    OpKind,
    Shape,
    default_mapping,
    freeze_attrs,
    input_ref,
)

__all__ = ["GraphBuilder", "OpSpec"]


@dataclass(frozen=True, slots=True)
class OpSpec(OpFields):
    """An op before numbering: like `Op`, with inputs named instead of numbered and no input
    shapes yet; `mapping` None (keyword-only) means the default of its kind and shapes."""

    name: str
    kind: OpKind
    op_type: str
    inputs: tuple[str, ...]
    output_shape: Shape
    mapping: MappingType | None = field(default=None, kw_only=True)


_SHARED = fields(OpFields)
"""The fields an `OpSpec` hands to its `Op` as they are."""


class GraphBuilder:
    """Collects network inputs and op specs, then builds a numbered `ComputeGraph`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._inputs: dict[str, Shape] = {}
        self._specs: dict[str, OpSpec] = {}

    def add_input(self, name: str, shape: Sequence[int]) -> None:
        """Declare a network input tensor."""
        self._check_new(name)
        self._inputs[name] = tuple(int(x) for x in shape)

    def add_op(self, name: str, kind: OpKind, op_type: str, inputs: Sequence[str],
               output_shape: Sequence[int], attrs: Mapping[str, Any] | None = None,
               **fields: Any) -> None:
        """Declare an op; `fields` are the optional `OpSpec` fields (kernel, macs, ...)."""
        self._check_new(name)
        self._specs[name] = OpSpec(
            name=name, kind=kind, op_type=op_type, inputs=tuple(inputs),
            output_shape=tuple(int(x) for x in output_shape),
            attrs=freeze_attrs(attrs or {}), **fields,
        )

    def has(self, name: str) -> bool:
        """True if a network input or op of that name was declared."""
        return name in self._inputs or name in self._specs

    def shape_of(self, name: str) -> Shape:
        """Shape of a declared tensor (input or op output)."""
        if name in self._inputs:
            return self._inputs[name]
        return self._specs[name].output_shape

    def _check_new(self, name: str) -> None:
        if self.has(name):
            raise GraphError(f"duplicate tensor name {name!r} in graph {self.name!r}")

    def build(self, outputs: Sequence[str]) -> ComputeGraph:
        """Sort, number and validate; `outputs` names the network output tensors."""
        self._check_references(outputs)
        order = self._topological_order()
        input_names = list(self._inputs)
        ref = {n: input_ref(k) for k, n in enumerate(input_names)}
        ref.update({n: i for i, n in enumerate(order)})
        ops = tuple(self._numbered(i, self._specs[n], ref) for i, n in enumerate(order))
        outs = tuple(dict.fromkeys(ref[o] for o in outputs))
        if any(o < 0 for o in outs):
            raise GraphError(f"graph {self.name!r}: a network input is also a network output "
                             "(the network computes nothing on it)")
        return ComputeGraph(
            name=self.name, ops=ops,
            input_shapes=tuple(self._inputs[n] for n in input_names),
            outputs=outs, input_names=tuple(input_names),
        )

    def _check_references(self, outputs: Sequence[str]) -> None:
        for spec in self._specs.values():
            for i in spec.inputs:
                if not self.has(i):
                    raise GraphError(f"op {spec.name!r} reads {i!r}, which no op produces "
                                     f"and is not a network input")
        for o in outputs:
            if not self.has(o):
                raise GraphError(f"network output {o!r} is not produced by any op")

    def _topological_order(self) -> list[str]:
        g = nx.DiGraph()
        position = {n: k for k, n in enumerate(self._specs)}
        g.add_nodes_from(self._specs)
        g.add_edges_from((i, s.name) for s in self._specs.values() for i in s.inputs
                         if i in self._specs)
        try:
            return list(nx.lexicographical_topological_sort(g, key=position.__getitem__))
        except nx.NetworkXUnfeasible:
            cycle = nx.find_cycle(g)
            names = " -> ".join([a for a, _ in cycle] + [cycle[0][0]])
            raise GraphError(f"graph {self.name!r} has a cycle: {names}") from None

    def _numbered(self, i: int, s: OpSpec, ref: Mapping[str, int]) -> Op:
        input_shapes = tuple(self.shape_of(n) for n in s.inputs)
        return Op(
            id=i, name=s.name, kind=s.kind, op_type=s.op_type,
            inputs=tuple(ref[n] for n in s.inputs), input_shapes=input_shapes,
            output_shape=s.output_shape,
            mapping=s.mapping or default_mapping(s.kind, input_shapes, s.output_shape),
            **{f.name: getattr(s, f.name) for f in _SHARED},
        )
