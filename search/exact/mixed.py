"""Incumbents of a mixed scheme (a hybrid): the optimum of each of its fused members.

Every plan of a member dataflow is a plan of the hybrid whose groups cost at most as much
(docs/cost-model.md 4.4), so each member's optimum, costed through the hybrid's cache, is a
valid incumbent at or below that member's optimum: the hybrid's answer is never above
min(member optima) even where a work cap stops the hybrid's own search before it proves its
optimum. Each member is solved once per cache, under the default work caps.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from simulator.cost import CostCache
from simulator.plan import PartitionPlan
from simulator.workload.graph import ComputeGraph

__all__ = ["member_plans"]

_SOLVED: WeakKeyDictionary[CostCache, tuple[tuple[str, PartitionPlan], ...]] = \
    WeakKeyDictionary()


def member_plans(graph: ComputeGraph, cache: CostCache) -> tuple[tuple[str, PartitionPlan], ...]:
    """(source, plan) of the optimum of every fused member of the mixed scheme of `cache`
    (``()`` for a scheme of its own)."""
    if not cache.scheme.mixed:
        return ()
    known = _SOLVED.get(cache)
    if known is None:
        from search.exact.solver import optimum

        known = tuple((f"{s}_optimum", optimum(graph, CostCache(graph, cache.hw, s)).plan)
                      for s in cache.scheme.fused)
        _SOLVED[cache] = known
    return known
