"""Solution edge sets (Mills et al. §III-C): from an explained edge to ways of splitting a group.

An explainer points at an edge (i, j) of an invalid group. Removing that edge alone separates
the group only when no other path joins i's side to j's side: residual skips (an edge that
spans (i, j)) and branches that run beside it (the edges a skip (i, j) spans) keep it
connected, and a squeeze-and-excitation block inside a residual nests both. The paper resolves
this with the topological labels (every edge (u, v) has u < v): a *solution* for (i, j) is a
cut of the group at a threshold t with i <= t < j — the ops labelled <= t on one side, the
others on the other — and its edge set is every group edge crossing the threshold. The
explained edge is always in it; so are the skips that encompass it and, when (i, j) is itself
a skip, one edge of each branch it spans, which is exactly the paper's recursive augmentation,
nested skips included. Every such cut keeps the graph of groups acyclic (all crossing edges go
the same way). Overlapping solutions are deduplicated and only minimal edge sets are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from simulator.partition import Group, components
from simulator.workload.graph import ComputeGraph

__all__ = ["Edge", "Solution", "solutions", "solutions_for_edge", "split_at"]

Edge = tuple[int, int]


@dataclass(frozen=True)
class Solution:
    """One way of splitting a group: the edges removed and the two sides' connected pieces.

    Attributes:
        edges: The group edges crossing the cut (the explained edge among them).
        first: Connected pieces of the ops before the cut, each sorted.
        second: Connected pieces of the ops after the cut.
    """

    edges: frozenset[Edge]
    first: tuple[Group, ...]
    second: tuple[Group, ...]

    @property
    def groups(self) -> tuple[Group, ...]:
        """All pieces, first side then second."""
        return self.first + self.second


def split_at(graph: ComputeGraph, ops: Sequence[int], threshold: int) -> Solution:
    """Cut `ops` between the ops labelled <= `threshold` and the others."""
    members = sorted(ops)
    inside = set(members)
    before = [o for o in members if o <= threshold]
    after = [o for o in members if o > threshold]
    crossing = frozenset((u, v) for v in after for u in graph.predecessors(v)
                         if u in inside and u <= threshold)
    return Solution(crossing, tuple(components(graph, before)), tuple(components(graph, after)))


def solutions_for_edge(graph: ComputeGraph, ops: Sequence[int], edge: Edge) -> list[Solution]:
    """The minimal cuts of `ops` separating the ends of `edge` (empty if it is not a group
    edge)."""
    i, j = edge
    members = sorted(ops)
    if i not in members or j not in members or i not in graph.predecessors(j):
        return []
    cuts = [split_at(graph, members, t) for t in members if i <= t < j]
    return _minimal(cuts)


def solutions(graph: ComputeGraph, ops: Sequence[int], edges: Iterable[Edge]) -> list[Solution]:
    """Solutions of every explained edge, in the explainer's order, duplicates removed."""
    found: dict[frozenset[Edge], Solution] = {}
    for edge in edges:
        for s in solutions_for_edge(graph, ops, edge):
            found.setdefault(s.edges, s)
    return list(found.values())


def _minimal(cuts: list[Solution]) -> list[Solution]:
    unique: dict[frozenset[Edge], Solution] = {}
    for c in cuts:
        unique.setdefault(c.edges, c)
    sets = list(unique)
    return [unique[s] for s in sets if not any(o < s for o in sets)]
