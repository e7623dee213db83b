"""Partition-plan encoding for variation operators: plans as edge-cut vectors.

A plan is encoded as a binary vector over the graph's *variable edges*: the op-to-op edges whose
two ends are both fuseable (unfusable ops, which do not fit the buffer even alone, always run
alone and are excluded before search, as in the paper). Bit k = 1 cuts edge k. Decoding takes
the connected components of the uncut edges as groups and then applies `make_acyclic`
(`simulator.partition`), so every decoded plan is a partition into weakly connected groups
whose graph of groups is acyclic (DESIGN.md, "Fusion group, partition plan"). Whether each
group also fits the buffer is the business of `search.repair`.

`encode` is the inverse on structurally valid plans: an edge is cut exactly when its ends lie in
different groups, so ``decode(encode(plan)) == plan`` (groups are connected, and an acyclic plan
is left untouched by `make_acyclic`). Repaired offspring can therefore be written back into the
genome (Lamarckian repair).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from simulator.partition import Group, make_acyclic
from simulator.plan import PartitionPlan, plan_of
from simulator.workload.graph import ComputeGraph

__all__ = ["EdgeEncoding"]

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
