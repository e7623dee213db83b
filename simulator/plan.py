"""Partition plans: fusion groups covering a graph as a value, and their JSON form.

A `PartitionPlan` is a tuple of disjoint `FusionGroup`s. It is structurally valid when every op
is covered exactly once, each group is weakly connected and the graph of groups is acyclic (no
path leaves a group and re-enters it): `simulator.partition.violations` checks that. Whether
each group fits the buffer depends on the dataflow; `simulator.cost.evaluate_plan` adds that
check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from simulator import limits
from simulator.errors import InputError
from simulator.partition import Group, components
from simulator.workload.graph import ComputeGraph

__all__ = [
    "FusionGroup",
    "PartitionPlan",
    "PlanError",
    "layer_by_layer",
    "load_plan",
    "plan_context",
    "read_plan_document",
    "plan_from_doc",
    "plan_of",
    "segment_plan",
]

PLAN_FORMAT = "fusion-dse.plan"


class PlanError(InputError):
    """A plan document that cannot be read or does not fit its graph."""


@dataclass(frozen=True, slots=True)
class FusionGroup:
    """A set of op ids executed together; `ops` is sorted ascending."""

    ops: Group

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


def plan_of(groups: Iterable[Sequence[int]]) -> PartitionPlan:
    """A plan of groups that are already sorted, disjoint and non-empty (cheaper than
    `PartitionPlan.of`)."""
    ordered = sorted(tuple(g) for g in groups)
    return PartitionPlan(tuple(FusionGroup(g) for g in ordered))


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
        groups.extend(components(graph, range(a, b)))
    return PartitionPlan.of(groups)


def read_plan_document(path: str | Path) -> Any:
    """The parsed JSON of a plan file, read within `simulator.limits` (a regular UTF-8 file of
    bounded size and nesting).

    Raises:
        PlanError: unreadable, too large, not a regular file, not UTF-8 or not JSON.
    """
    return limits.load_json_file(path, "plan", f"plan file {str(path)!r}", PlanError)


def plan_context(doc: Any) -> dict[str, Any]:
    """What a plan document records about how it was costed: ``scheme``, ``hw`` (the
    hardware's name), ``buffer_bytes`` and ``hardware`` (every hardware field, validated when
    used), those present and well-formed (plan.json of ``fusion-dse optimize`` has all four)."""
    if not isinstance(doc, dict):
        return {}
    context: dict[str, Any] = {}
    if isinstance(doc.get("scheme"), str):
        context["scheme"] = doc["scheme"]
    if isinstance(doc.get("hw"), str) and 0 < len(doc["hw"]) <= limits.MAX_NAME_CHARS:
        context["hw"] = doc["hw"]
    buffer = doc.get("buffer_bytes")
    if isinstance(buffer, int) and not isinstance(buffer, bool):
        context["buffer_bytes"] = buffer
    if isinstance(doc.get("hardware"), dict):
        context["hardware"] = doc["hardware"]
    return context


def load_plan(path: str | Path, graph: ComputeGraph) -> PartitionPlan:
    """Read a plan JSON file (groups as lists of op names or ids, or objects with ``ops``).

    Raises:
        PlanError: unreadable file, malformed document, or an op the graph does not have.
    """
    return plan_from_doc(read_plan_document(path), graph, str(path))


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
