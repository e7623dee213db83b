"""Partition-plan encoding for variation operators, and the convexity repair.

A plan is encoded as a binary vector over the graph's *variable edges*: the op-to-op edges whose
two ends are both fuseable (unfusable ops, which do not fit the buffer even alone, always run
alone and are excluded before search, as in the paper). Bit k = 1 cuts edge k. Decoding takes
the connected components of the uncut edges as groups and then applies `make_acyclic`, so every
decoded plan is a partition into weakly connected groups whose graph of groups is acyclic
(DESIGN.md, "Fusion group, partition plan"). Whether each group also fits the buffer is the
business of `search.repair`.

`encode` is the inverse on structurally valid plans: an edge is cut exactly when its ends lie in
different groups, so ``decode(encode(plan)) == plan`` (groups are connected, and an acyclic plan
is left untouched by `make_acyclic`). Repaired offspring can therefore be written back into the
genome (Lamarckian repair).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from simulator.plan import FusionGroup, PartitionPlan
from simulator.workload.graph import ComputeGraph

__all__ = [
    "EdgeEncoding",
    "Group",
    "components",
    "is_acyclic",
    "is_dag",
    "make_acyclic",
    "plan_of",
    "structure_problem",
]

Group = tuple[int, ...]
"""A fusion group as a sorted tuple of op ids (the key of every cache)."""


def components(graph: ComputeGraph, ops: Iterable[int]) -> list[Group]:
    """Weakly connected components of the subgraph induced by `ops`, ordered by first op."""
    left = set(ops)
    found: list[Group] = []
    for start in sorted(left):
        if start not in left:
            continue
        left.discard(start)
        stack, comp = [start], [start]
        while stack:
            n = stack.pop()
            for m in (*graph.predecessors(n), *graph.successors(n)):
                if m in left:
                    left.discard(m)
                    stack.append(m)
                    comp.append(m)
        found.append(tuple(sorted(comp)))
    return found


def plan_of(groups: Iterable[Sequence[int]]) -> PartitionPlan:
    """A `PartitionPlan` of sorted, disjoint groups (cheaper than `PartitionPlan.of`)."""
    ordered = sorted(tuple(g) for g in groups)
    return PartitionPlan(tuple(FusionGroup(g) for g in ordered))


def _group_index(n: int, groups: Sequence[Group]) -> list[int]:
    group_of = [-1] * n
    for k, g in enumerate(groups):
        for o in g:
            group_of[o] = k
    return group_of


def _quotient(graph: ComputeGraph, group_of: Sequence[int]) -> set[tuple[int, int]]:
    """Edges of the graph of groups."""
    return {(group_of[i], group_of[j]) for i, j in graph.edges() if group_of[i] != group_of[j]}


def is_dag(n_nodes: int, edges: Iterable[tuple[int, int]]) -> bool:
    """Kahn's algorithm: True if the directed graph on nodes 0..n_nodes-1 has no cycle."""
    succ: list[list[int]] = [[] for _ in range(n_nodes)]
    indegree = [0] * n_nodes
    for a, b in edges:
        succ[a].append(b)
        indegree[b] += 1
    ready = [k for k in range(n_nodes) if indegree[k] == 0]
    seen = 0
    while ready:
        k = ready.pop()
        seen += 1
        for m in succ[k]:
            indegree[m] -= 1
            if indegree[m] == 0:
                ready.append(m)
    return seen == n_nodes


def is_acyclic(graph: ComputeGraph, groups: Sequence[Group]) -> bool:
    """True if no path leaves a group and re-enters it (the graph of groups is a DAG).

    `groups` must partition the graph's ops.
    """
    group_of = _group_index(len(graph), groups)
    return is_dag(len(groups), _quotient(graph, group_of))


def make_acyclic(graph: ComputeGraph, groups: Sequence[Sequence[int]]) -> list[Group]:
    """Split groups until the graph of groups is acyclic; groups already on no cycle are kept.

    Groups on a cycle of the graph of groups (a strongly connected component of it with more
    than one group) are split by *level*: in topological order, an op's level is the largest
    level of its predecessors in the same component, plus one when the predecessor lies in
    another group. Each group is cut into its ops of equal level, then into connected pieces.
    Levels strictly increase along every edge between two pieces of a component, and the
    components themselves are ordered by the condensation, so the result is acyclic.

    Args:
        graph: The graph the groups partition.
        groups: Weakly connected, disjoint groups covering every op.

    Returns:
        The groups, sorted, with the cyclic ones split.
    """
    groups = [tuple(sorted(g)) for g in groups]
    group_of = _group_index(len(graph), groups)
    quotient = _quotient(graph, group_of)
    if is_dag(len(groups), quotient):
        return sorted(groups)
    cyclic = _cyclic_components(len(groups), quotient)
    level = _levels(graph, groups, group_of, cyclic)
    out = [g for k, g in enumerate(groups) if k not in cyclic]
    for k in cyclic:
        by_level: dict[int, list[int]] = {}
        for o in groups[k]:
            by_level.setdefault(level[o], []).append(o)
        for ops in by_level.values():
            out.extend(components(graph, ops))
    return sorted(out)


def _cyclic_components(n_groups: int, quotient: set[tuple[int, int]]) -> dict[int, int]:
    """Map from group index to its strongly connected component, for groups on a cycle."""
    q = nx.DiGraph()
    q.add_nodes_from(range(n_groups))
    q.add_edges_from(quotient)
    cyclic: dict[int, int] = {}
    for sid, scc in enumerate(nx.strongly_connected_components(q)):
        if len(scc) > 1:
            cyclic.update((k, sid) for k in scc)
    return cyclic


def _levels(graph: ComputeGraph, groups: Sequence[Group], group_of: Sequence[int],
            cyclic: dict[int, int]) -> dict[int, int]:
    level: dict[int, int] = {}
    ops = sorted(o for k in cyclic for o in groups[k])
    for v in ops:  # ascending ids are a topological order
        gv = group_of[v]
        lv = 0
        for u in graph.predecessors(v):
            gu = group_of[u]
            if cyclic.get(gu, -1) == cyclic[gv]:
                lv = max(lv, level[u] + (gu != gv))
        level[v] = lv
    return level


def structure_problem(graph: ComputeGraph, groups: Sequence[Group]) -> str:
    """Why `groups` is not a partition into connected groups with an acyclic graph of groups.

    The fast check the search runs on every plan it records ("" when the structure is valid);
    `simulator.plan.structural_violations` is the reference it agrees with.
    """
    seen = [False] * len(graph)
    for g in groups:
        for o in g:
            if not 0 <= o < len(graph) or seen[o]:
                return f"op {o} is not in the graph or is in two groups"
            seen[o] = True
    if not all(seen):
        return f"op {seen.index(False)} is in no group"
    for g in groups:
        if len(g) > 1 and len(components(graph, g)) != 1:
            return f"group starting at op {g[0]} is not connected"
    if not is_acyclic(graph, groups):
        return "the graph of groups has a cycle"
    return ""


@dataclass(frozen=True)
class EdgeEncoding:
    """Binary edge-cut encoding of the plans of one graph.

    Attributes:
        graph: The network.
        unfusable: Ops that run alone, layer by layer (no variable touches them).
        edges: The variable edges (i, j), i < j, in `ComputeGraph.edges` order (by consumer):
            neighbouring bits are neighbouring edges of the network, which keeps two-point
            crossover meaningful.
    """

    graph: ComputeGraph
    unfusable: frozenset[int]
    edges: tuple[tuple[int, int], ...] = field(init=False)

    def __post_init__(self) -> None:
        edges = tuple((i, j) for i, j in self.graph.edges()
                      if i not in self.unfusable and j not in self.unfusable)
        object.__setattr__(self, "edges", edges)

    @classmethod
    def of(cls, graph: ComputeGraph, unfusable: Iterable[int] = ()) -> EdgeEncoding:
        """The encoding of `graph` with `unfusable` ops excluded."""
        return cls(graph, frozenset(unfusable))

    @property
    def n_vars(self) -> int:
        """Number of variables (fuseable edges)."""
        return len(self.edges)

    def groups(self, cuts: np.ndarray) -> list[Group]:
        """Connected components of the uncut edges (before the convexity repair)."""
        if len(cuts) != self.n_vars:
            raise ValueError(f"expected {self.n_vars} cut bits, got {len(cuts)}")
        parent = list(range(len(self.graph)))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for (i, j), cut in zip(self.edges, cuts.tolist(), strict=True):
            if not cut:
                ri, rj = find(i), find(j)
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)
        members: dict[int, list[int]] = {}
        for o in range(len(self.graph)):
            members.setdefault(find(o), []).append(o)
        return [tuple(m) for m in members.values()]

    def decode(self, cuts: np.ndarray) -> PartitionPlan:
        """The structurally valid plan a cut vector denotes (groups may exceed the buffer)."""
        return plan_of(make_acyclic(self.graph, self.groups(cuts)))

    def encode(self, plan: PartitionPlan) -> np.ndarray:
        """The cut vector of a plan: an edge is cut when its ends are in different groups."""
        group_of = plan.group_of
        return np.fromiter((group_of[i] != group_of[j] for i, j in self.edges),
                           dtype=bool, count=self.n_vars)
