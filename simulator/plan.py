"""Partition plans: fusion groups covering a graph, their JSON form and structural validity.

A `PartitionPlan` is a tuple of disjoint `FusionGroup`s. It is structurally valid when every op
is covered exactly once, each group is weakly connected and the graph of groups is acyclic (no
path leaves a group and re-enters it). Whether each group fits the buffer depends on the
dataflow; `simulator.cost.check_plan` adds that check.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import networkx as nx

from simulator.errors import InputError
from simulator.workload.graph import ComputeGraph

__all__ = [
    "FusionGroup",
    "PartitionPlan",
    "PlanError",
    "connected_components",
    "layer_by_layer",
    "load_plan",
    "segment_plan",
    "structural_violations",
]

PLAN_FORMAT = "fusion-dse.plan"


class PlanError(InputError):
    """A plan document that cannot be read or does not fit its graph."""


@dataclass(frozen=True, slots=True)
class FusionGroup:
    """A set of op ids executed together; `ops` is sorted ascending."""

    ops: tuple[int, ...]

    @classmethod
    def of(cls, ops: Iterable[int]) -> FusionGroup:
        """A group of the given op ids (order and duplicates ignored)."""
        return cls(tuple(sorted(set(int(o) for o in ops))))

    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self):
        return iter(self.ops)

    def __contains__(self, op: object) -> bool:
        return op in self.as_set

    @property
    def as_set(self) -> frozenset[int]:
        """The op ids as a frozenset."""
        return frozenset(self.ops)


@dataclass(frozen=True)
class PartitionPlan:
    """Disjoint fusion groups, kept in order of their smallest op id."""

    groups: tuple[FusionGroup, ...]

    @classmethod
    def of(cls, groups: Iterable[Iterable[int]]) -> PartitionPlan:
        """A plan from any iterables of op ids; empty groups are dropped."""
        gs = [FusionGroup.of(g) for g in groups]
        return cls(tuple(sorted((g for g in gs if g.ops), key=lambda g: g.ops[0])))

    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self):
        return iter(self.groups)

    @cached_property
    def group_of(self) -> dict[int, int]:
        """Map from op id to the index of its group (the last one if an op is repeated)."""
        return {op: k for k, g in enumerate(self.groups) for op in g.ops}

    def to_dict(self, graph: ComputeGraph, extra: Sequence[Mapping[str, Any]] | None = None,
                ) -> dict[str, Any]:
        """JSON-ready plan with groups as op names; `extra` adds per-group fields."""
        groups = []
        for k, g in enumerate(self.groups):
            entry: dict[str, Any] = {"ops": [graph[o].name for o in g.ops]}
            if extra is not None:
                entry.update(extra[k])
            groups.append(entry)
        return {"format": PLAN_FORMAT, "version": 1, "model": graph.name, "groups": groups}


def layer_by_layer(graph: ComputeGraph) -> PartitionPlan:
    """The plan with every op in a group of its own."""
    return PartitionPlan(tuple(FusionGroup((op.id,)) for op in graph))


def segment_plan(graph: ComputeGraph, cuts: Iterable[int]) -> PartitionPlan:
    """The plan of contiguous segments of the topological order, each split into its weakly
    connected components.

    `cuts` are the ids where a new segment starts (0 and len(graph) are implied). Such plans
    are always structurally valid: a path leaving a segment cannot re-enter it, because every
    op between two ops of a segment in topological order belongs to the segment.
    """
    bounds = sorted({0, len(graph), *(int(c) for c in cuts if 0 < int(c) < len(graph))})
    groups: list[list[int]] = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        groups.extend(connected_components(graph, range(a, b)))
    return PartitionPlan.of(groups)


def connected_components(graph: ComputeGraph, ops: Iterable[int]) -> list[list[int]]:
    """The weakly connected components of the node set `ops` (each listed from its
    smallest op id)."""
    left = set(ops)
    found = []
    while left:
        start = min(left)
        left.discard(start)
        stack, comp = [start], []
        while stack:
            n = stack.pop()
            comp.append(n)
            for m in (*graph.predecessors(n), *graph.successors(n)):
                if m in left:
                    left.discard(m)
                    stack.append(m)
        found.append(comp)
    return found


def structural_violations(graph: ComputeGraph, plan: PartitionPlan,
                          limit: int = 10) -> list[str]:
    """Reasons the plan is not a partition into convex connected groups; empty if it is."""
    reasons = _coverage(graph, plan)
    if reasons:
        return reasons[:limit]
    for k, g in enumerate(plan.groups):
        if not graph.is_weakly_connected(g.ops):
            reasons.append(f"group {k} ({_names(graph, g.ops)}) is not connected")
    cycle = _group_cycle(graph, plan)
    if cycle:
        reasons.append("groups form a cycle: " + " -> ".join(f"group {k}" for k in cycle))
    return reasons[:limit]


def _coverage(graph: ComputeGraph, plan: PartitionPlan) -> list[str]:
    seen: dict[int, int] = {}
    reasons = []
    for k, g in enumerate(plan.groups):
        for op in g.ops:
            if not 0 <= op < len(graph):
                reasons.append(f"group {k} names op {op}, which is not in {graph.name!r}")
            elif op in seen:
                reasons.append(f"op {graph[op].name!r} is in group {seen[op]} and group {k}")
            else:
                seen[op] = k
    missing = [op.id for op in graph if op.id not in seen]
    if missing:
        reasons.append(f"{len(missing)} op(s) in no group: {_names(graph, missing)}")
    return reasons


def _group_cycle(graph: ComputeGraph, plan: PartitionPlan) -> list[int]:
    """Groups on a cycle of the graph of groups (empty if it is acyclic)."""
    group_of = plan.group_of
    succ: dict[int, set[int]] = {}
    for i, j in graph.edges():
        a, b = group_of[i], group_of[j]
        if a != b:
            succ.setdefault(a, set()).add(b)
    indeg = dict.fromkeys(range(len(plan.groups)), 0)
    for targets in succ.values():
        for b in targets:
            indeg[b] += 1
    ready = [k for k, n in indeg.items() if n == 0]
    while ready:  # Kahn: what remains afterwards lies on or behind a cycle
        k = ready.pop()
        del indeg[k]
        for b in succ.get(k, ()):
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    if not indeg:
        return []
    quotient = nx.DiGraph((a, b) for a, targets in succ.items() for b in targets
                          if a in indeg and b in indeg)
    return [u for u, _ in nx.find_cycle(quotient)]


def _names(graph: ComputeGraph, ops: Sequence[int], most: int = 4) -> str:
    names = [graph[o].name for o in list(ops)[:most]]
    return ", ".join(names) + (f", ... ({len(ops)} ops)" if len(ops) > most else "")


def load_plan(path: str | Path, graph: ComputeGraph) -> PartitionPlan:
    """Read a plan JSON file (groups as lists of op names or ids, or objects with ``ops``).

    Raises:
        PlanError: unreadable file, malformed document, or an op the graph does not have.
    """
    where = str(path)
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as err:
        raise PlanError(f"cannot read plan file {where!r}: {err.strerror}") from err
    except json.JSONDecodeError as err:
        raise PlanError(f"plan file {where!r} is not valid JSON: {err}") from err
    return plan_from_doc(doc, graph, where)


def plan_from_doc(doc: Any, graph: ComputeGraph, where: str = "plan") -> PartitionPlan:
    """A plan from a parsed plan document or a bare list of groups."""
    groups = doc.get("groups") if isinstance(doc, dict) else doc
    if not isinstance(groups, list):
        raise PlanError(f"{where}: expected a list of groups under 'groups'")
    return PartitionPlan.of(_group_ids(g, k, graph, where) for k, g in enumerate(groups))


def _group_ids(group: Any, k: int, graph: ComputeGraph, where: str) -> list[int]:
    ops = group.get("ops") if isinstance(group, dict) else group
    if not isinstance(ops, list) or not ops:
        raise PlanError(f"{where}: group {k} is not a non-empty list of op names or ids")
    ids = []
    for op in ops:
        if isinstance(op, bool) or not isinstance(op, (int, str)):
            raise PlanError(f"{where}: group {k} has {op!r}, not an op name or id")
        if isinstance(op, int):
            if not 0 <= op < len(graph):
                raise PlanError(f"{where}: group {k} names op id {op}; {graph.name!r} has ids "
                                f"0..{len(graph) - 1}")
            ids.append(op)
            continue
        try:
            ids.append(graph.id_of(op))
        except KeyError:
            raise PlanError(f"{where}: group {k} names unknown op {op!r} "
                            f"(not in {graph.name!r})") from None
    if len(set(ids)) != len(ids):
        raise PlanError(f"{where}: group {k} lists an op twice")
    return ids
