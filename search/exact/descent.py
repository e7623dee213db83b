"""A deterministic descent over a plan's groups: what the exact solver answers with when a work
cap stops it.

A capped search answers with the best plan it knows (the best plan over the sets it found, an
incumbent such as the segment DP's, the labelling relaxation's). On wide graphs those plans
keep fusion opportunities that one move finds: two adjacent groups that fit as one, an op that
costs less in its neighbour's group. `descend` takes, step after step, the move that lowers the
plan's (DRAM, cycles) most, among

* merging two groups joined by an edge, their union convex;
* moving an op into a group it has an edge with, its old group staying non-empty, weakly
  connected and convex, the new one convex;

the graph of groups staying acyclic (checked: a convex union does not ensure it, as a group
read by one of the two and reading the other can join them through two of its ops with no
path between them), every group fitting (`CostCache.run`), unfusable ops alone. A plan's DRAM
and cycles are sums over its groups, so a move's gain is read from the groups it changes. It
stops at a plan no move improves, or once it has asked `max_costed` distinct groups' costs
(making the best move costed before that): counted work, so the answer is the same on any
machine under any load. It never returns a worse plan, and proves nothing: the solver's lower
bound says how far from the optimum the answer can be.
"""

from __future__ import annotations

from search.exact.candidates import _Closure, bits
from simulator.cost import CostCache
from simulator.partition import is_acyclic
from simulator.plan import PartitionPlan
from simulator.workload.graph import ComputeGraph

__all__ = ["DESCENT_COSTED", "descend"]

DESCENT_COSTED = 20_000
"""Distinct groups a descent may cost (hrnet_w18_small-like, LBDF and BRR at 64 KiB-1 MiB: from
the segment DP's plan 75-510 groups, from layer by layer 927-1,431; at most 0.9 s CPU)."""


class _Descent:
    def __init__(self, graph: ComputeGraph, cache: CostCache, max_costed: int) -> None:
        self.graph, self.cache, self.max_costed = graph, cache, max_costed
        self.closure = _Closure.of(graph)
        self.unfusable = sum(1 << o for o in cache.unfusable)
        self.edges = list(graph.edges())
        self.keys: dict[int, tuple[int, int] | None] = {}

    def key(self, mask: int) -> tuple[int, int] | None:
        """(DRAM, cycles) of the group `mask` when it runs, else None; counted once."""
        if mask in self.keys:
            return self.keys[mask]
        if len(self.keys) >= self.max_costed:
            raise _Spent
        ops = bits(mask)
        out = None
        if not (mask & self.unfusable and len(ops) > 1):
            cost = self.cache.run(ops)
            if cost.fits:
                out = (int(cost.dram_bytes), int(cost.timing.cycles))
        self.keys[mask] = out
        return out

    def convex(self, mask: int) -> bool:
        return self.closure.hull(mask) == mask


class _Spent(Exception):
    """The descent asked `max_costed` groups' costs."""


def descend(graph: ComputeGraph, cache: CostCache, plan: PartitionPlan,
            max_costed: int = DESCENT_COSTED) -> tuple[PartitionPlan, int]:
    """`plan` improved by merges and moves (module docstring) until none lowers its (DRAM,
    cycles) or `max_costed` groups have been costed; with the groups costed. `plan` must be
    valid (every group fits, the graph of groups acyclic); the result is."""
    run = _Descent(graph, cache, max_costed)
    groups = [sum(1 << o for o in g.ops) for g in plan.groups]
    try:
        for g in groups:
            if run.key(g) is None:
                raise ValueError(f"descend: group {bits(g)} of the plan does not run")
    except _Spent:
        return plan, len(run.keys)
    while _step(run, groups) and len(run.keys) < max_costed:
        pass
    return PartitionPlan.of(bits(g) for g in groups), len(run.keys)


def _step(run: _Descent, groups: list[int]) -> bool:
    """Apply the best improving move to `groups` (in place); False when none improves. Where
    the cap stops the costing, the best of the moves costed before it."""
    owner = [0] * len(run.graph)
    for k, g in enumerate(groups):
        for o in bits(g):
            owner[o] = k
    moves: list[tuple[tuple[int, int], int, int, int, int]] = []  # gain, kind, x, y, op
    seen: set[tuple[int, int, int, int]] = set()
    for u, v in run.edges:
        a, b = owner[u], owner[v]
        if a == b:
            continue
        # merge the two groups (x into y), move u to b's group, move v to a's
        for move in ((0, min(a, b), max(a, b), -1), (1, a, b, u), (1, b, a, v)):
            if move in seen:
                continue
            seen.add(move)
            kind, x, y, op = move
            try:
                gain = _gain(run, groups, kind, x, y, op)
            except _Spent:
                break
            if gain is not None:
                moves.append((gain, kind, x, y, op))
        else:
            continue
        break
    for _, kind, x, y, op in sorted(moves):
        old_x, old_y = groups[x], groups[y]
        moved = old_x if kind == 0 else 1 << op  # a merge moves all of x into y
        groups[x], groups[y] = old_x & ~moved, old_y | moved
        for o in bits(moved):
            owner[o] = y
        if is_acyclic(run.graph, owner):
            if kind == 0:  # the merged group is y's; x is empty
                del groups[x]
            return True
        groups[x], groups[y] = old_x, old_y
        for o in bits(moved):
            owner[o] = x
    return False


def _gain(run: _Descent, groups: list[int], kind: int, x: int, y: int,
          op: int) -> tuple[int, int] | None:
    """The change of (DRAM, cycles) of a merge of groups x and y (kind 0) or of moving `op`
    from group x to group y (kind 1), when it lowers them and the groups it makes run."""
    before = [run.key(groups[x]), run.key(groups[y])]
    if kind == 0:
        union = groups[x] | groups[y]
        after = [run.key(union)] if run.convex(union) else [None]
    else:
        rest, grown = groups[x] & ~(1 << op), groups[y] | 1 << op
        if not rest or not run.convex(grown) or not run.convex(rest) \
                or not run.graph.is_weakly_connected(bits(rest)):
            return None
        after = [run.key(rest), run.key(grown)]
    if any(k is None for k in after):
        return None
    gain = (sum(k[0] for k in after) - sum(k[0] for k in before),
            sum(k[1] for k in after) - sum(k[1] for k in before))
    return gain if gain < (0, 0) else None
