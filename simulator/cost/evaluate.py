"""Plan evaluation: memoised group costs, how each group runs, plan totals and references.

`CostCache` memoises the group costs of one (graph, hardware, dataflow) and owns the rule of
what runs: `CostCache.run` costs an unfusable op alone layer by layer, anything else as one
group of the dataflow. `plan_totals` sums the costs of a plan's groups (the one place a plan's
totals are computed: the search's score and `evaluate_plan` both read it); `evaluate_plan`
returns a `PlanCost` with the paper's metrics (DRAM over the fuseable ops, max buffer usage)
and the whole-network figures, next to the compulsory lower bound and the layer-by-layer
reference.

Unfusable ops are those that do not fit the buffer even alone (for LBDF in particular an op
whose weights alone exceed it). As in the paper they are removed before optimisation: a plan
runs each of them on its own, layer by layer and tiled to the buffer (`simulator.cost.lbl`),
and the "fuseable" totals leave those groups out. F_beta is not monotone, so an unfusable op
may still fit in a larger group (a 1x1 expand, a depthwise and a 1x1 project can fit where
the depthwise alone does not); a user's plan may hold one, and that group is costed and
counted like any other. The *fuseable scope* of a plan is therefore the ops of its groups
other than unfusable singletons run alone, and `lower_bound_fuseable` and `lbl_dram_fuseable`
are taken over that scope (docs/cost-model.md, section 7): the compulsory traffic of the scope
bounds the fuseable DRAM of every valid plan. For every plan the searches produce (unfusable
ops alone) the scope is the set of fuseable ops, whose figures are cached
(`CostCache.references`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

from simulator.cost import lbl
from simulator.cost.traffic import compulsory_bytes
from simulator.cost.types import GroupCost, GroupCostFn
from simulator.memo import Memo
from simulator.partition import Group, violations
from simulator.plan import PartitionPlan
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["COST_MODELS", "ENERGY_PARTS", "CostCache", "PlanCost", "PlanTotals",
           "evaluate_plan", "fuseable_scope", "plan_totals"]

ENERGY_PARTS = ("energy_dram_pj", "energy_buffer_pj", "energy_mac_pj", "energy_leak_pj")
"""The keys of a plan's energy by component (`PlanCost.totals`), in `energy_parts` order."""

class _CostModels(Mapping[Scheme, GroupCostFn]):
    """The group cost of every registered dataflow (`simulator.dataflow`), by scheme."""

    def __getitem__(self, scheme: Scheme) -> GroupCostFn:
        from simulator.dataflow import DATAFLOWS

        return DATAFLOWS[scheme].cost

    def __iter__(self) -> Iterator[Scheme]:
        from simulator.dataflow import DATAFLOWS

        return iter(tuple(DATAFLOWS))

    def __len__(self) -> int:
        from simulator.dataflow import DATAFLOWS

        return len(DATAFLOWS)


COST_MODELS: Mapping[Scheme, GroupCostFn] = _CostModels()
"""The cost model of every dataflow (a hybrid group's: its cheapest member's)."""


class CostCache:
    """Memoised group costs of one graph on one hardware configuration under one dataflow.

    Attributes:
        graph, hw: The network and the machine.
        scheme: The dataflow (cast from its name).
        hits, misses: Lookups answered from / added to the cache.
    """

    def __init__(self, graph: ComputeGraph, hw: HardwareConfig, scheme: str | Scheme) -> None:
        """Bind a (graph, hardware, dataflow); raises `InputError` for an unknown scheme."""
        self.graph, self.hw, self.scheme = graph, hw, Scheme.parse(scheme)
        self._fn = COST_MODELS[self.scheme]
        self._costs: Memo[Group, GroupCost] = Memo()

    def group(self, ops: Iterable[int]) -> GroupCost:
        """Cost of running `ops` as one group (computed once per distinct op set)."""
        return self._lookup(tuple(sorted(ops)))

    def _lookup(self, key: Group) -> GroupCost:
        return self._costs.get(key, self._compute)

    def _compute(self, key: Group) -> GroupCost:
        return self._fn(self.graph, key, self.hw)

    def run(self, ops: Iterable[int]) -> GroupCost:
        """How `ops` runs as a group of a plan: an unfusable op alone runs layer by layer (its
        LBL cost, streamed or tiled to the buffer, flagged `runs_alone`; it fits unless not even
        its smallest tile does); anything else is `group(ops)`."""
        key = tuple(sorted(ops))
        if len(key) == 1:
            alone = self._alone.get(key[0])
            if alone is not None:
                return alone
        return self._lookup(key)

    @property
    def references(self) -> dict[str, int]:
        """Lower bounds and layer-by-layer traffic (every op on its own, streamed or tiled),
        whole network and fuseable ops (the scope of every plan that keeps the unfusable ops
        alone; `evaluate_plan` rescopes the fuseable figures to a plan that does not)."""
        return self._shared.references

    @property
    def hits(self) -> int:
        """Lookups answered from the cache."""
        return self._costs.hits

    @property
    def misses(self) -> int:
        """Lookups that costed a group and added it to the cache."""
        return self._costs.misses

    @property
    def hit_rate(self) -> float:
        """Fraction of lookups answered from the cache."""
        return self._costs.hit_rate

    @property
    def unfusable(self) -> tuple[int, ...]:
        """Ops that do not fit the buffer even alone, ascending (none under LBL)."""
        return self._shared.unfusable

    @cached_property
    def _shared(self) -> _Context:
        return _context(self.graph, self.hw, self.scheme)

    @cached_property
    def _alone(self) -> dict[int, GroupCost]:
        return self._shared.alone


@dataclass(frozen=True)
class _Context:
    """What every plan of one (graph, hardware, dataflow) shares: computed once.

    Attributes:
        unfusable: Ops that do not fit even alone.
        alone: The cost each of them runs at: LBL (streamed or tiled), flagged `runs_alone`.
        references: Lower bounds and layer-by-layer traffic.
    """

    unfusable: tuple[int, ...]
    alone: dict[int, GroupCost]
    references: dict[str, int]


@lru_cache(maxsize=64)
def _context(graph: ComputeGraph, hw: HardwareConfig, scheme: Scheme) -> _Context:
    lbl_costs = tuple(lbl.group_cost(graph, (o.id,), hw) for o in graph)
    unfusable = tuple(o.id for o in graph
                      if scheme.searchable and not any(COST_MODELS[s](graph, (o.id,), hw).fits
                                                       for s in scheme.fused))
    fuseable = [o.id for o in graph if o.id not in set(unfusable)]
    d = hw.dtype_bytes
    references = {
        "lower_bound": compulsory_bytes(graph, range(len(graph)), d),
        "lower_bound_fuseable": compulsory_bytes(graph, fuseable, d) if fuseable else 0,
        "lbl_dram": sum(c.dram_bytes for c in lbl_costs),
        "lbl_dram_fuseable": sum(lbl_costs[o].dram_bytes for o in fuseable),
    }
    alone = {o: replace(lbl_costs[o], runs_alone=True) for o in unfusable}
    return _Context(unfusable, alone, references)


@dataclass(frozen=True, slots=True)
class PlanTotals:
    """The sums over a plan's group costs that every consumer of a plan reads.

    Attributes:
        dram_bytes: F_D over all groups.
        dram_bytes_fuseable: F_D over the groups not run alone (the paper's DRAM access).
        mbu: Largest F_beta over the groups not run alone (the paper's MBU).
        fused_mbu: Largest F_beta over groups of two or more ops (0 layer by layer).
        cycles: Analytic cycles summed over groups.
        energy_pj: Energy summed over groups.
        runs: Every group runs (fits; an unfusable op alone runs unless not even its smallest
            tile fits).
        peak_buffer: Largest F_beta over all groups, unfusable ops run alone included: the
            peak buffer of the whole network, what the simulator's peak equals.
        energy_parts: Energy by component, summed over groups: DRAM, buffer, MAC, leakage
            (pJ; they add up to `energy_pj`).
    """

    dram_bytes: int
    dram_bytes_fuseable: int
    mbu: int
    fused_mbu: int
    cycles: int
    energy_pj: float
    runs: bool
    peak_buffer: int = 0
    energy_parts: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


def plan_totals(costs: Iterable[GroupCost]) -> PlanTotals:
    """Totals of a plan from the costs of its groups (`CostCache.run` of each), in plan order."""
    dram = dram_fuseable = mbu = fused_mbu = cycles = peak = 0
    energy = e_dram = e_buffer = e_mac = e_leak = 0.0
    runs = True
    for c in costs:
        runs = runs and c.fits
        dram += c.dram_bytes
        cycles += c.timing.cycles
        t = c.timing
        energy += t.energy_pj
        e_dram += t.energy_dram_pj
        e_buffer += t.energy_buffer_pj
        e_mac += t.energy_mac_pj
        e_leak += t.energy_leak_pj
        peak = max(peak, c.buffer_bytes)
        if not c.runs_alone:
            dram_fuseable += c.dram_bytes
            mbu = max(mbu, c.buffer_bytes)
        if len(c.ops) > 1:
            fused_mbu = max(fused_mbu, c.buffer_bytes)
    return PlanTotals(dram, dram_fuseable, mbu, fused_mbu, cycles, energy, runs, peak,
                      (e_dram, e_buffer, e_mac, e_leak))


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
        mbu: Maximum buffer usage: the largest F_beta over groups of fuseable ops (the paper's
            MBU; unfusable ops run alone are left out, as from `dram_bytes_fuseable`).
        cycles, energy_pj: Sums over all groups.
        lower_bound: Compulsory traffic of the network.
        lower_bound_fuseable: Compulsory traffic of the plan's fuseable scope (the ops of its
            groups other than unfusable singletons run alone; module docs).
        lbl_dram: Layer-by-layer traffic of the network (every op on its own, streamed or
            tiled).
        lbl_dram_fuseable: Layer-by-layer traffic of the plan's fuseable scope.
        peak_buffer: The peak buffer of the whole network: the largest F_beta over all groups
            (unfusable ops run alone included), which the simulated peak equals.
        energy_parts: Energy by component (DRAM, buffer, MAC, leakage), summing to
            `energy_pj`.
        area_mm2: The on-chip buffers' area (`simulator.hw.HardwareConfig.area_mm2`).
    """

    scheme: Scheme
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
    peak_buffer: int = 0
    energy_parts: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    area_mm2: float = 0.0

    @property
    def valid(self) -> bool:
        """True when the plan is a partition into groups that all run."""
        return not self.violations

    @property
    def groups_by_dataflow(self) -> dict[str, int]:
        """How many groups run under each dataflow (every member of the plan's scheme, in
        member order; unfusable ops run alone count as layer by layer)."""
        counts = {str(s): 0 for s in (*self.scheme.members, Scheme.LBL)}
        for g in self.groups:
            counts[str(g.scheme)] += 1
        return counts

    def totals(self) -> dict[str, Any]:
        """The plan-level figures as a JSON-ready dict (stable keys; a hybrid plan's adds
        ``groups_by_dataflow``)."""
        return {**self._totals(),
                **({"groups_by_dataflow": self.groups_by_dataflow} if self.scheme.mixed
                   else {})}

    def _totals(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "valid": self.valid,
            "violations": list(self.violations),
            "groups": len(self.groups),
            "unfusable_ops": len(self.unfusable),
            "dram_bytes": self.dram_bytes,
            "dram_bytes_fuseable": self.dram_bytes_fuseable,
            "mbu_bytes": self.mbu,
            "peak_buffer_bytes": self.peak_buffer,
            "cycles": self.cycles,
            "energy_pj": self.energy_pj,
            **dict(zip(ENERGY_PARTS, self.energy_parts, strict=True)),
            "area_mm2": self.area_mm2,
            "lower_bound_bytes": self.lower_bound,
            "lower_bound_fuseable_bytes": self.lower_bound_fuseable,
            "lbl_dram_bytes": self.lbl_dram,
            "lbl_dram_fuseable_bytes": self.lbl_dram_fuseable,
        }


def evaluate_plan(graph: ComputeGraph, plan: PartitionPlan, hw: HardwareConfig,
                  scheme: str | Scheme, cache: CostCache | None = None,
                  checked: bool = False) -> PlanCost:
    """Cost a partition plan; invalid plans are costed too, with their violations listed.

    Args:
        graph, plan, hw, scheme: The network, its plan, the machine and the dataflow.
        cache: Group costs of (graph, hw, scheme) to reuse.
        checked: The caller has already checked that `plan` is a partition of `graph`
            (`simulator.partition.violations`): only whether every group runs is checked.
    """
    cache = cache or CostCache(graph, hw, scheme)
    found = [] if checked else violations(graph, plan)
    costs = []
    for k, g in enumerate(plan.groups):
        ops = tuple(o for o in g.ops if 0 <= o < len(graph))
        cost = cache.run(ops)
        costs.append(cost)
        if not cost.fits:
            found.append(f"group {k} ({graph[ops[0]].name}, {len(ops)} ops): {cost.reason}")
    totals = plan_totals(costs)
    refs = cache.references
    lower_fuseable, lbl_fuseable = _fuseable_references(cache, costs)
    return PlanCost(
        scheme=cache.scheme, groups=tuple(costs), unfusable=cache.unfusable,
        violations=tuple(found), dram_bytes=totals.dram_bytes,
        dram_bytes_fuseable=totals.dram_bytes_fuseable, mbu=totals.mbu, cycles=totals.cycles,
        energy_pj=totals.energy_pj, lower_bound=refs["lower_bound"],
        lower_bound_fuseable=lower_fuseable, lbl_dram=refs["lbl_dram"],
        lbl_dram_fuseable=lbl_fuseable, peak_buffer=totals.peak_buffer,
        energy_parts=totals.energy_parts, area_mm2=hw.area_mm2,
    )


def fuseable_scope(costs: Iterable[GroupCost]) -> tuple[int, ...]:
    """The fuseable scope of a plan from its group costs (`CostCache.run` of each): the ops
    of its groups other than unfusable singletons run alone, ascending."""
    return tuple(sorted({o for c in costs if not c.runs_alone for o in c.ops}))


def _fuseable_references(cache: CostCache, costs: list[GroupCost]) -> tuple[int, int]:
    """(lower_bound_fuseable, lbl_dram_fuseable) over the plan's fuseable scope."""
    refs = cache.references
    alone = {c.ops[0] for c in costs if c.runs_alone}
    if alone == set(cache.unfusable):  # every unfusable op alone: the cached scope
        return refs["lower_bound_fuseable"], refs["lbl_dram_fuseable"]
    scope = fuseable_scope(costs)
    lower = compulsory_bytes(cache.graph, scope, cache.hw.dtype_bytes) if scope else 0
    return lower, refs["lbl_dram"] - sum(cache.run((o,)).dram_bytes for o in alone)
