"""Comparing two graphs of one network imported through different front ends.

Front ends differ in elementwise detail (ONNX exporters split SiLU into Sigmoid and Mul, keep or
drop flattening reshapes, put a bias into a separate Add). `skeleton` removes those differences:
it contracts elementwise and reshaping ops, charges the constant weights of a contracted op to
the compute op that feeds it, and keeps the dataflow between the remaining ops. Two imports agree
op for op when their skeletons are isomorphic with equal (kind, weights, MACs, output shape) on
matched ops.
"""

from __future__ import annotations

from collections import Counter

import networkx as nx
from networkx.algorithms.isomorphism import DiGraphMatcher

from simulator.workload.graph import ComputeGraph, OpKind

__all__ = ["ELEMENTWISE_KINDS", "graph_differences", "skeleton"]

ELEMENTWISE_KINDS = frozenset({
    OpKind.ELTWISE_UNARY, OpKind.ELTWISE_BINARY, OpKind.RESHAPE, OpKind.TRANSPOSE,
})

Label = tuple[str, int, int, tuple[int, ...]]


def skeleton(graph: ComputeGraph) -> nx.DiGraph:
    """The graph of non-elementwise ops, with edges through contracted elementwise paths.

    Node attribute ``label`` is (kind, weight elements incl. charged constants, MACs, output
    shape).
    """
    g = nx.DiGraph()
    sources: dict[int, frozenset[int]] = {}
    extra: Counter[int] = Counter()
    for op in graph:
        feeding = frozenset().union(*(sources.get(r, frozenset({r})) for r in op.inputs))
        if op.kind in ELEMENTWISE_KINDS:
            sources[op.id] = feeding
            producers = [s for s in feeding if s >= 0]
            if op.weight_elems and len(producers) == 1:
                extra[producers[0]] += op.weight_elems
            continue
        sources[op.id] = frozenset({op.id})
        g.add_node(op.id)
        g.add_edges_from((s, op.id) for s in feeding if s >= 0)
    for n in g.nodes:
        op = graph[n]
        g.nodes[n]["label"] = (op.kind.value, op.weight_elems + extra[n], op.macs,
                               op.output_shape)
    return g


def graph_differences(a: ComputeGraph, b: ComputeGraph, limit: int = 5) -> list[str]:
    """Why two imports of one network do not agree op for op; empty if they do."""
    sa, sb = skeleton(a), skeleton(b)
    la = Counter(d["label"] for _, d in sa.nodes(data=True))
    lb = Counter(d["label"] for _, d in sb.nodes(data=True))
    if la != lb:
        only_a = list((la - lb).elements())[:limit]
        only_b = list((lb - la).elements())[:limit]
        return [f"ops only in {a.name!r}: {only_a}", f"ops only in {b.name!r}: {only_b}"]
    if sa.number_of_edges() != sb.number_of_edges():
        return [f"dataflow differs: {sa.number_of_edges()} vs {sb.number_of_edges()} edges "
                "between compute ops"]
    matcher = DiGraphMatcher(sa, sb, node_match=lambda x, y: x["label"] == y["label"])
    if not matcher.is_isomorphic():
        return ["same ops but different dataflow between them"]
    return []
