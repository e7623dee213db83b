"""Random-search proposals of partition plans and the distinct fusion groups they contain.

The paper collects its GNN training groups by running a plain random search (RS) over partition
plans (Mills et al. §IV-A). An RS proposal here is a segment plan: the topological order is cut
into contiguous segments of random lengths, each falling apart into its weakly connected
components (`simulator.plan.segment_plan`, always structurally valid). Half of the proposals
then merge a few randomly chosen pairs of adjacent groups, kept only when the union stays convex
(`simulator.partition.is_convex`), which adds groups that span several segments (a residual
branch with the block after it, say).
Nothing here depends on the search package: the groups are the raw material, labelled later by
the cost model.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np

from simulator.partition import Group, group_index, is_convex
from simulator.plan import segment_plan
from simulator.workload.graph import ComputeGraph

__all__ = ["merge_adjacent", "propose_plan", "random_segment_plan", "sample_groups"]

MERGE_PROBABILITY = 0.5


def random_segment_plan(graph: ComputeGraph, rng: np.random.Generator,
                        max_len: int = 30) -> list[Group]:
    """Groups of a random segment plan: segment lengths uniform in 1..L, L uniform in 1..max_len.

    Drawing the longest length per plan mixes plans of short and of long segments, so groups of
    every size up to `max_len` appear.
    """
    longest = int(rng.integers(1, max_len + 1))
    lengths = rng.integers(1, longest + 1, size=len(graph))
    cuts = np.cumsum(lengths)
    return [g.ops for g in segment_plan(graph, cuts[cuts < len(graph)].tolist())]


def _neighbours(graph: ComputeGraph, groups: Sequence[Group], k: int,
                group_of: Sequence[int]) -> list[int]:
    found = {group_of[m] for o in groups[k]
             for m in (*graph.predecessors(o), *graph.successors(o))}
    found.discard(k)
    return sorted(found)


def merge_adjacent(graph: ComputeGraph, groups: Sequence[Group], rng: np.random.Generator,
                   attempts: int, max_ops: int) -> list[Group]:
    """Merge up to `attempts` random pairs of adjacent groups whose union is convex.

    Args:
        graph: The network.
        groups: A partition of the graph into groups.
        rng: Source of randomness.
        attempts: Merges to try.
        max_ops: Unions larger than this are not formed.
    """
    merged = [tuple(g) for g in groups]
    for _ in range(attempts):
        group_of = group_index(graph, merged)
        k = int(rng.integers(len(merged)))
        near = _neighbours(graph, merged, k, group_of)
        if not near:
            continue
        j = near[int(rng.integers(len(near)))]
        union = tuple(sorted(merged[k] + merged[j]))
        if len(union) <= max_ops and is_convex(graph, union):
            merged = [g for i, g in enumerate(merged) if i not in (k, j)] + [union]
    return sorted(merged)


def propose_plan(graph: ComputeGraph, rng: np.random.Generator, max_len: int = 30,
                 max_ops: int = 30) -> list[Group]:
    """One random-search proposal: a random segment plan, half the time with random merges."""
    groups = random_segment_plan(graph, rng, max_len)
    if len(groups) > 1 and rng.random() < MERGE_PROBABILITY:
        attempts = int(rng.integers(1, len(groups) // 2 + 2))
        groups = merge_adjacent(graph, groups, rng, attempts, max_ops)
    return groups


def sample_groups(graph: ComputeGraph, n_groups: int, rng: np.random.Generator, *,
                  min_ops: int = 2, max_ops: int = 30, patience: int = 3000,
                  key: Callable[[Group], Hashable] | None = None) -> list[Group]:
    """Distinct groups of `min_ops`..`max_ops` ops from random proposals, in order of discovery.

    Stops at `n_groups` groups, or earlier when `patience` proposals in a row brought nothing
    new (a small network has only so many). The first k groups do not depend on `n_groups`,
    so a smaller quota with the same generator state gives a prefix of a larger one.

    Args:
        graph: The network.
        n_groups: How many distinct groups to collect.
        rng: The only source of randomness.
        min_ops: Smallest group kept (2 leaves out single ops, which need no fusion).
        max_ops: Largest group kept (and the longest segment proposed).
        patience: Proposals in a row without a new group before giving up.
        key: Groups with equal keys count as one (the first is kept); default: the op set.
            Keying on the encoded subgraph drops the copies repeated blocks produce.
    """
    seen: set[Group] = set()
    found: dict[Hashable, Group] = {}
    stale = 0
    while len(found) < n_groups and stale < patience:
        before = len(found)
        for g in propose_plan(graph, rng, max_len=max_ops, max_ops=max_ops):
            if not min_ops <= len(g) <= max_ops or g in seen:
                continue
            seen.add(g)
            found.setdefault(g if key is None else key(g), g)
            if len(found) == n_groups:
                break
        stale = 0 if len(found) > before else stale + 1
    return list(found.values())
