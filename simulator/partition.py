"""Partition structure: graph-of-groups algorithms over fusion groups, written once.

Functions take the graph first (networkx style) and a grouping as a sequence of groups (op-id
sequences, `FusionGroup`s or a `PartitionPlan` work too) or, where said, as a *group index*
(group number of every op). DESIGN.md's structural rule lives here: a grouping is a partition
when every op is in exactly one group, each group is weakly connected, and the graph of groups
(the *quotient*) is acyclic, i.e. every group is convex: no path leaves it and re-enters it.
`violations` says why a grouping is not one; with ``first_only`` it is the fast check the
search runs on every plan. `make_acyclic` splits the groups of a grouping that lie on a cycle.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice

import networkx as nx

from simulator.workload.graph import ComputeGraph

__all__ = [
    "Group",
    "components",
    "group_index",
    "is_acyclic",
    "is_convex",
    "make_acyclic",
    "quotient",
    "topological_order",
    "violations",
]

Group = tuple[int, ...]
"""A fusion group as a sorted tuple of op ids (the key of every cache)."""

Grouping = Iterable[Iterable[int]]
"""Groups of op ids: tuples, `FusionGroup`s, or a `PartitionPlan`."""


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


def group_index(n_or_graph: int | ComputeGraph, groups: Grouping) -> list[int]:
    """The group number of every op (-1 for an op in no group; the last group if in several).

    Args:
        n_or_graph: The number of ops, or the graph.
        groups: The grouping.
    """
    n = n_or_graph if isinstance(n_or_graph, int) else len(n_or_graph)
    group_of = [-1] * n
    for k, g in enumerate(groups):
        for o in g:
            group_of[o] = k
    return group_of


def _index(graph: ComputeGraph, groups: Sequence[Sequence[int]] | Sequence[int],
           ) -> tuple[Sequence[int], int]:
    """(group index, number of groups) of a grouping given as groups or as a group index."""
    if groups and isinstance(groups[0], int):
        return groups, max(groups) + 1  # type: ignore[return-value, arg-type]
    return group_index(graph, groups), len(groups)  # type: ignore[arg-type]


def quotient(graph: ComputeGraph, groups: Sequence[Sequence[int]] | Sequence[int],
             ) -> set[tuple[int, int]]:
    """Edges (a, b) of the graph of groups: some op of group a feeds some op of group b.

    Args:
        graph: The network.
        groups: Groups covering every op, or the group index of every op (`group_index`).
    """
    group_of, _ = _index(graph, groups)
    return {(group_of[i], group_of[j]) for i, j in graph.edges() if group_of[i] != group_of[j]}


def _kahn(n_nodes: int, edges: Iterable[tuple[int, int]],
          priority: Sequence[int] | None = None) -> list[int]:
    """Kahn's algorithm: nodes in a topological order, the ready node of least `priority`
    first (any ready node without one); nodes on or behind a cycle are left out."""
    succ: list[list[int]] = [[] for _ in range(n_nodes)]
    indegree = [0] * n_nodes
    for a, b in edges:
        succ[a].append(b)
        indegree[b] += 1
    key = range(n_nodes) if priority is None else priority
    ready = [(key[k], k) for k in range(n_nodes) if indegree[k] == 0]
    push, pop = (heapq.heappush, heapq.heappop) if priority is not None else (
        list.append, list.pop)
    if priority is not None:
        heapq.heapify(ready)
    order = []
    while ready:
        _, k = pop(ready)
        order.append(k)
        for m in succ[k]:
            indegree[m] -= 1
            if indegree[m] == 0:
                push(ready, (key[m], m))
    return order


def topological_order(graph: ComputeGraph, groups: Grouping) -> list[int]:
    """Group numbers in a topological order of the graph of groups, the group with the smallest
    op first among those ready; groups on or behind a cycle are left out.

    Args:
        graph: The network.
        groups: Non-empty groups covering every op.
    """
    groups = [tuple(g) for g in groups]
    return _kahn(len(groups), quotient(graph, groups), [min(g) for g in groups])


def is_acyclic(graph: ComputeGraph, groups: Sequence[Sequence[int]] | Sequence[int]) -> bool:
    """True if no path leaves a group and re-enters it (the graph of groups is a DAG).

    Args:
        graph: The network.
        groups: Groups covering every op, or the group index of every op (`group_index`).
    """
    group_of, n = _index(graph, groups)
    return _is_dag(n, quotient(graph, group_of))


def _is_dag(n_nodes: int, edges: Iterable[tuple[int, int]]) -> bool:
    return len(_kahn(n_nodes, edges)) == n_nodes


def is_convex(graph: ComputeGraph, ops: Iterable[int]) -> bool:
    """True if no path leaves the node set and re-enters it.

    Ids increase along every path, so only ops below the set's largest id can lie on such a
    path; the search stays below it.
    """
    members = set(ops)
    top = max(members)
    frontier = [c for o in members for c in graph.successors(o) if c not in members and c < top]
    seen = set(frontier)
    while frontier:
        for c in graph.successors(frontier.pop()):
            if c in members:
                return False
            if c < top and c not in seen:
                seen.add(c)
                frontier.append(c)
    return True


def make_acyclic(graph: ComputeGraph, groups: Iterable[Sequence[int]]) -> list[Group]:
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
    group_of = group_index(graph, groups)
    edges = quotient(graph, group_of)
    if _is_dag(len(groups), edges):
        return sorted(groups)
    cyclic = _cyclic_components(len(groups), edges)
    level = _levels(graph, groups, group_of, cyclic)
    out = [g for k, g in enumerate(groups) if k not in cyclic]
    for k in cyclic:
        by_level: dict[int, list[int]] = {}
        for o in groups[k]:
            by_level.setdefault(level[o], []).append(o)
        for ops in by_level.values():
            out.extend(components(graph, ops))
    return sorted(out)


def _cyclic_components(n_groups: int, edges: set[tuple[int, int]]) -> dict[int, int]:
    """Map from group index to its strongly connected component, for groups on a cycle."""
    q = nx.DiGraph()
    q.add_nodes_from(range(n_groups))
    q.add_edges_from(edges)
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


def violations(graph: ComputeGraph, groups: Grouping, first_only: bool = False,
               limit: int = 10) -> list[str]:
    """Reasons the grouping is not a partition into weakly connected groups with an acyclic
    graph of groups; empty if it is one.

    Coverage (an op in no group or in two, an id the graph lacks) is checked first; only a
    grouping that covers every op once is checked for connected groups and cycles.

    Args:
        graph: The network.
        groups: The grouping (a `PartitionPlan` works).
        first_only: Stop at the first reason (the search's fast check).
        limit: Most reasons returned.
    """
    groups = [tuple(g) for g in groups]
    most = 1 if first_only else limit
    reasons = list(islice(_coverage(graph, groups), most))
    if not reasons:
        found = chain(_disconnected(graph, groups), _cycle(graph, groups))
        reasons = list(islice(found, most))
    return reasons


def _coverage(graph: ComputeGraph, groups: Sequence[Group]) -> Iterator[str]:
    seen: dict[int, int] = {}
    for k, g in enumerate(groups):
        for op in g:
            if not 0 <= op < len(graph):
                yield f"group {k} names op {op}, which is not in {graph.name!r}"
            elif op in seen:
                yield f"op {graph[op].name!r} is in group {seen[op]} and group {k}"
            else:
                seen[op] = k
    if len(seen) < len(graph):
        missing = [op.id for op in graph if op.id not in seen]
        yield f"{len(missing)} op(s) in no group: {_names(graph, missing)}"


def _disconnected(graph: ComputeGraph, groups: Sequence[Group]) -> Iterator[str]:
    for k, g in enumerate(groups):
        if len(g) != 1 and len(components(graph, g)) != 1:
            yield f"group {k} ({_names(graph, g)}) is not connected"


def _cycle(graph: ComputeGraph, groups: Sequence[Group]) -> Iterator[str]:
    """The groups on one cycle of the graph of groups, if it has one."""
    group_of = group_index(graph, groups)
    succ: dict[int, set[int]] = {}
    for i, j in graph.edges():
        a, b = group_of[i], group_of[j]
        if a != b:
            succ.setdefault(a, set()).add(b)
    edges = [(a, b) for a, targets in succ.items() for b in targets]
    order = _kahn(len(groups), edges)
    if len(order) == len(groups):
        return
    left = set(range(len(groups))).difference(order)
    behind = nx.DiGraph((a, b) for a, b in edges if a in left and b in left)
    cycle = [u for u, _ in nx.find_cycle(behind)]
    yield "groups form a cycle: " + " -> ".join(f"group {k}" for k in cycle)


def _names(graph: ComputeGraph, ops: Sequence[int], most: int = 4) -> str:
    names = [graph[o].name for o in list(ops)[:most]]
    return ", ".join(names) + (f", ... ({len(ops)} ops)" if len(ops) > most else "")
