"""Plan evaluation: memoised group costs, unfusable ops, plan totals and reference figures.

`CostCache` memoises the group costs of one (graph, hardware, dataflow); `evaluate_plan` sums a
plan into a `PlanCost` with the paper's metrics (DRAM over the fuseable ops, max buffer usage)
and the whole-network figures, next to the compulsory lower bound and the layer-by-layer
reference.

Unfusable ops are those that do not fit the buffer even alone (for LBDF in particular an op
whose weights alone exceed it). As in the paper they are removed before optimisation: a plan
runs each of them layer by layer in a group of its own, which is valid, and the "fuseable"
totals leave those groups out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from simulator.cost import brr, lbdf, lbl
from simulator.cost.traffic import compulsory_bytes
from simulator.cost.types import GroupCost, GroupCostFn
from simulator.errors import InputError
from simulator.plan import PartitionPlan, structural_violations
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["SCHEMES", "CostCache", "PlanCost", "evaluate_plan", "get_scheme",
           "unfusable_ops"]

SCHEMES: dict[str, GroupCostFn] = {
    "lbdf": lbdf.group_cost,
    "brr": brr.group_cost,
    "lbl": lbl.group_cost,
}


def get_scheme(name: str) -> GroupCostFn:
    """The cost model of dataflow `name` (lbdf, brr or lbl)."""
    try:
        return SCHEMES[name.lower()]
    except KeyError:
        raise InputError(f"unknown scheme {name!r}; choose one of "
                         f"{', '.join(SCHEMES)}") from None


class CostCache:
    """Memoised group costs of one graph on one hardware configuration under one dataflow."""

    def __init__(self, graph: ComputeGraph, hw: HardwareConfig, scheme: str) -> None:
        self.graph, self.hw, self.scheme = graph, hw, scheme.lower()
        self._fn = get_scheme(scheme)
        self._costs: dict[tuple[int, ...], GroupCost] = {}
        self.hits = 0
        self.misses = 0

    def group(self, ops: Iterable[int]) -> GroupCost:
        """Cost of running `ops` as one group (computed once per distinct op set)."""
        key = tuple(sorted(ops))
        cost = self._costs.get(key)
        if cost is not None:
            self.hits += 1
            return cost
        self.misses += 1
        cost = self._fn(self.graph, tuple(sorted(key)), self.hw)
        self._costs[key] = cost
        return cost

    def lbl(self, op: int) -> GroupCost:
        """Layer-by-layer cost of one op (how unfusable ops run)."""
        return _context(self.graph, self.hw, self.scheme).lbl[op]

    @property
    def references(self) -> dict[str, int]:
        """Lower bounds and layer-by-layer traffic, whole network and fuseable ops."""
        return _context(self.graph, self.hw, self.scheme).references

    @property
    def hit_rate(self) -> float:
        """Fraction of lookups answered from the cache."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    @property
    def unfusable(self) -> tuple[int, ...]:
        """Ops that do not fit the buffer even alone (none under LBL)."""
        return _context(self.graph, self.hw, self.scheme).unfusable


@dataclass(frozen=True)
class _Context:
    """What every plan of one (graph, hardware, dataflow) shares: computed once."""

    unfusable: tuple[int, ...]
    lbl: tuple[GroupCost, ...]
    references: dict[str, int]


@lru_cache(maxsize=64)
def _context(graph: ComputeGraph, hw: HardwareConfig, scheme: str) -> _Context:
    fn = get_scheme(scheme)
    lbl_costs = tuple(lbl.group_cost(graph, (o.id,), hw) for o in graph)
    unfusable = () if scheme == "lbl" else tuple(
        o.id for o in graph if not fn(graph, (o.id,), hw).fits)
    fuseable = [o.id for o in graph if o.id not in set(unfusable)]
    d = hw.dtype_bytes
    references = {
        "lower_bound": compulsory_bytes(graph, range(len(graph)), d),
        "lower_bound_fuseable": compulsory_bytes(graph, fuseable, d) if fuseable else 0,
        "lbl_dram": sum(c.dram_bytes for c in lbl_costs),
        "lbl_dram_fuseable": sum(lbl_costs[o].dram_bytes for o in fuseable),
    }
    return _Context(unfusable, lbl_costs, references)


def unfusable_ops(graph: ComputeGraph, hw: HardwareConfig, scheme: str) -> tuple[int, ...]:
    """Ops that cannot run fused under `scheme` on `hw`: they run layer by layer."""
    return CostCache(graph, hw, scheme).unfusable


@dataclass(frozen=True)
class PlanCost:
    """Totals of a plan, in the paper's scope (fuseable ops) and over the whole network.

    Attributes:
        scheme: The dataflow.
        groups: Cost of each group, in plan order (unfusable singletons costed layer by layer).
        unfusable: Ops that cannot run fused (they form singleton LBL groups).
        violations: Why the plan is invalid (empty when valid).
        dram_bytes: F_D over all groups.
        dram_bytes_fuseable: F_D over groups of fuseable ops (the paper's DRAM access).
        mbu: Maximum buffer usage: the largest F_beta over groups of fuseable ops.
        cycles, energy_pj: Sums over all groups.
        lower_bound, lower_bound_fuseable: Compulsory traffic of the network / fuseable ops.
        lbl_dram, lbl_dram_fuseable: Layer-by-layer traffic of the network / fuseable ops.
    """

    scheme: str
    groups: tuple[GroupCost, ...]
    unfusable: tuple[int, ...]
    violations: tuple[str, ...]
    dram_bytes: int
    dram_bytes_fuseable: int
    mbu: int
    cycles: int
    energy_pj: float
    lower_bound: int
    lower_bound_fuseable: int
    lbl_dram: int
    lbl_dram_fuseable: int

    @property
    def valid(self) -> bool:
        """True when the plan is a partition into groups that all run."""
        return not self.violations

    def totals(self) -> dict[str, Any]:
        """The plan-level figures as a JSON-ready dict (stable keys)."""
        return {
            "scheme": self.scheme,
            "valid": self.valid,
            "violations": list(self.violations),
            "groups": len(self.groups),
            "unfusable_ops": len(self.unfusable),
            "dram_bytes": self.dram_bytes,
            "dram_bytes_fuseable": self.dram_bytes_fuseable,
            "mbu_bytes": self.mbu,
            "cycles": self.cycles,
            "energy_pj": self.energy_pj,
            "lower_bound_bytes": self.lower_bound,
            "lower_bound_fuseable_bytes": self.lower_bound_fuseable,
            "lbl_dram_bytes": self.lbl_dram,
            "lbl_dram_fuseable_bytes": self.lbl_dram_fuseable,
        }


def evaluate_plan(graph: ComputeGraph, plan: PartitionPlan, hw: HardwareConfig, scheme: str,
                  cache: CostCache | None = None) -> PlanCost:
    """Cost a partition plan; invalid plans are costed too, with their violations listed."""
    cache = cache or CostCache(graph, hw, scheme)
    violations = structural_violations(graph, plan)
    unfusable = set(cache.unfusable)
    costs = []
    for k, g in enumerate(plan.groups):
        ops = tuple(o for o in g.ops if 0 <= o < len(graph))
        cost = cache.lbl(ops[0]) if len(ops) == 1 and ops[0] in unfusable else cache.group(ops)
        costs.append(cost)
        if not cost.fits:
            violations.append(f"group {k} ({graph[ops[0]].name}, {len(ops)} ops): {cost.reason}")
    return _totals(cache, tuple(costs), tuple(sorted(unfusable)), violations)


def _totals(cache: CostCache, costs: tuple[GroupCost, ...], unfusable: tuple[int, ...],
            violations: Sequence[str]) -> PlanCost:
    alone = set(unfusable)
    fused = [c for c in costs if not (len(c.ops) == 1 and c.ops[0] in alone)]
    refs = cache.references
    return PlanCost(
        scheme=cache.scheme, groups=costs, unfusable=unfusable,
        violations=tuple(violations),
        dram_bytes=sum(c.dram_bytes for c in costs),
        dram_bytes_fuseable=sum(c.dram_bytes for c in fused),
        mbu=max((c.buffer_bytes for c in fused), default=0),
        cycles=sum(c.timing.cycles for c in costs),
        energy_pj=sum(c.timing.energy_pj for c in costs),
        lower_bound=refs["lower_bound"],
        lower_bound_fuseable=refs["lower_bound_fuseable"],
        lbl_dram=refs["lbl_dram"],
        lbl_dram_fuseable=refs["lbl_dram_fuseable"],
    )
