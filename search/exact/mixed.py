"""Incumbents of a mixed scheme (a hybrid): the optimum of each of its fused members.

Every plan of a member dataflow is a plan of the hybrid whose groups cost at most as much
(docs/cost-model.md 4.4), so each member's optimum, costed through the hybrid's cache, is a
valid incumbent at or below that member's optimum: the hybrid's answer is never above
min(member answers) even where a work cap stops the hybrid's own search before it proves its
optimum. Each member is solved under the caller's work caps (each member solve its own caps,
as a solve of that dataflow alone would be), once per (cache, caps); under a wall-clock limit
each member takes an equal share of the time left with the hybrid's own search, and is solved
afresh (an answer a clock cut depends on the machine).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from simulator.cost import CostCache
from simulator.plan import PartitionPlan
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from search.exact.solver import ExactCaps

__all__ = ["member_plans"]

_SOLVED: WeakKeyDictionary[CostCache, dict[ExactCaps, tuple[tuple[str, PartitionPlan, bool],
                                                              ...]]] = WeakKeyDictionary()


def member_plans(graph: ComputeGraph, cache: CostCache, caps: ExactCaps | None = None,
                 deadline: float | None = None
                 ) -> tuple[tuple[str, PartitionPlan, bool], ...]:
    """(source, plan, reproducible) of the optimum of every fused member of the mixed scheme
    of `cache` (``()`` for a scheme of its own), each solved under `caps` (None:
    `search.exact.solver.DEFAULT_CAPS`) and, with a `deadline` (`time.perf_counter()`'s
    clock), an equal share of the time left to it with the hybrid's own search
    (``reproducible`` false where the clock cut a member's solve)."""
    if not cache.scheme.mixed:
        return ()
    from search.exact.solver import DEFAULT_CAPS, optimum

    caps = DEFAULT_CAPS if caps is None else caps
    memo = _SOLVED.setdefault(cache, {}) if deadline is None else {}
    known = memo.get(caps)
    if known is None:
        members = cache.scheme.fused
        out = []
        for i, s in enumerate(members):
            share = None if deadline is None else \
                max(1e-9, (deadline - time.perf_counter()) / (len(members) - i + 1))
            res = optimum(graph, CostCache(graph, cache.hw, s), caps=caps, time_limit=share)
            out.append((f"{s}_optimum", res.plan, res.reproducible))
        known = memo[caps] = tuple(out)
    return known
