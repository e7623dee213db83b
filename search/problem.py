"""The search problem, the score of a plan, and the per-run context algorithms work in.

`SearchProblem` is the frozen description of one optimisation (network, hardware, dataflow,
objectives, splitter). `SearchContext` is what one run shares between the driver and the
algorithm: the run's generator, the group-cost cache, the encoding, the repairer and the plan
memo. `PlanScore` is the fast summary of a plan the algorithms are told: the totals of its
cached group costs (`simulator.cost.plan_totals`, which `simulator.cost.evaluate_plan` reads
too; the driver re-costs the best plan with the latter).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from search.encoding import EdgeEncoding
from search.repair import Repairer
from search.splitter import RandomSplitter, Splitter
from simulator.cost import CostCache, plan_totals
from simulator.errors import InputError
from simulator.memo import Memo
from simulator.partition import violations
from simulator.plan import PartitionPlan
from simulator.scheme import DEFAULT_SCHEME, Scheme, searchable_schemes
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["OBJECTIVES", "PlanScore", "SearchContext", "SearchProblem", "parse_objectives",
           "problem_settings"]

OBJECTIVES: dict[str, str] = {
    "dram": "DRAM traffic of the whole network, bytes (F_D summed over groups)",
    "mbu": "buffer the fusion needs: the largest F_beta over groups of two or more ops, bytes",
    "cycles": "analytic cycles summed over groups",
}
"""Objectives a search can minimise; every objective list starts with ``dram``."""


def parse_objectives(objectives: str | Sequence[str]) -> tuple[str, ...]:
    """Validated objective names from ``"dram,mbu"`` or ``("dram", "mbu")``.

    Raises:
        InputError: empty, unknown or repeated names, or a list not starting with ``dram``.
    """
    names = objectives.split(",") if isinstance(objectives, str) else list(objectives)
    names = [str(n).strip().lower() for n in names]
    unknown = [n for n in names if n not in OBJECTIVES]
    if unknown or not names:
        raise InputError(f"unknown objective {', '.join(map(repr, unknown)) or '(none)'}; "
                         f"choose 'dram', 'dram,mbu' or 'dram,cycles'")
    if names[0] != "dram" or len(set(names)) != len(names):
        raise InputError(f"objectives {','.join(names)!r}: the first must be 'dram' and none "
                         "may repeat (e.g. 'dram,mbu')")
    return tuple(names)


def problem_settings(scheme: str | Scheme, objectives: str | Sequence[str],
                     ) -> tuple[Scheme, tuple[str, ...]]:
    """The dataflow and objectives of a `SearchProblem`, checked as it checks them (callers
    check them before loading the network).

    Raises:
        InputError: an unknown or unsearchable scheme (layer by layer), bad objectives, or
            a second objective with a hybrid (its groups choose their dataflow by DRAM).
    """
    parsed = Scheme.parse(scheme)
    if not parsed.searchable:
        choices = ", ".join(f"'{s}'" for s in searchable_schemes())
        raise InputError(f"scheme '{parsed}' runs every op alone: there is nothing to "
                         f"search; choose {choices}")
    names = parse_objectives(objectives)
    if parsed.mixed and len(names) > 1:
        raise InputError(f"scheme '{parsed}' gives each group its least-DRAM dataflow: it "
                         f"minimises 'dram' alone, not {','.join(names)!r}")
    return parsed, names


@dataclass(frozen=True)
class SearchProblem:
    """One optimisation: minimise `objectives` over valid plans of `graph` on `hw`.

    Attributes:
        graph: The network.
        hw: The hardware configuration (its buffer size is the constraint).
        scheme: Fusion dataflow, a searchable `Scheme` (LBDF, BRR or hybrid) or its name.
        objectives: Objective names (`OBJECTIVES`), ``dram`` first.
        splitter: Repair of groups that do not fit.
    """

    graph: ComputeGraph
    hw: HardwareConfig
    scheme: Scheme = DEFAULT_SCHEME
    objectives: tuple[str, ...] = ("dram",)
    splitter: Splitter = field(default_factory=RandomSplitter)

    def __post_init__(self) -> None:
        scheme, objectives = problem_settings(self.scheme, self.objectives)
        object.__setattr__(self, "scheme", scheme)
        object.__setattr__(self, "objectives", objectives)
        if not self.splitter.supports(scheme):
            raise InputError(f"repair {self.splitter.name!r} does not support scheme "
                             f"'{scheme}'")


@dataclass(frozen=True, slots=True)
class PlanScore:
    """The figures of one evaluated plan.

    Attributes:
        dram_bytes: DRAM traffic of the whole network.
        dram_bytes_fuseable: DRAM traffic of groups of fuseable ops (the paper's scope).
        mbu_bytes: Max buffer usage over groups of fuseable ops (the paper's MBU).
        fused_mbu_bytes: Largest F_beta over groups of two or more ops (0 layer by layer):
            the buffer the plan's fusion needs, its ``mbu`` objective. Under LBDF a single op
            that streams its rows costs the same DRAM alone or layer by layer, so the plan
            keeps the DRAM traffic of its fused groups on any buffer of at least this size:
            minimising it with DRAM draws the DRAM-vs-buffer curve from one run (approximate
            where a smaller buffer tiles single ops, with re-reads; the paper's MBU cannot go
            below the largest fuseable single op).
        cycles: Analytic cycles.
        energy_pj: Energy.
        groups: Number of groups.
        valid: Structurally valid and every group runs.
    """

    dram_bytes: int
    dram_bytes_fuseable: int
    mbu_bytes: int
    fused_mbu_bytes: int
    cycles: int
    energy_pj: float
    groups: int
    valid: bool

    def objective(self, name: str) -> float:
        """Value of objective `name`; +inf for an invalid plan."""
        if not self.valid:
            return math.inf
        return float({"dram": self.dram_bytes, "mbu": self.fused_mbu_bytes,
                      "cycles": self.cycles}[name])

    def objectives(self, names: Sequence[str]) -> tuple[float, ...]:
        """Values of several objectives."""
        return tuple(self.objective(n) for n in names)


class SearchContext:
    """What one run shares: generator, caches, encoding, repairer and plan memo.

    Attributes:
        problem: The problem.
        graph: ``problem.graph``.
        rng: The run's only generator.
        cache: Group costs (memoised F_beta, F_D, cycles).
        encoding: Edge-cut encoding with the unfusable ops excluded.
        repairer: Applies the splitter to groups that do not fit (memoised).
        plans: The plan scores, memoised per plan (its misses: the distinct plans).
    """

    def __init__(self, problem: SearchProblem, rng: np.random.Generator,
                 cache: CostCache | None = None) -> None:
        self.problem, self.graph, self.rng = problem, problem.graph, rng
        self.cache = cache or CostCache(problem.graph, problem.hw, problem.scheme)
        self.unfusable = frozenset(self.cache.unfusable)
        self.encoding = EdgeEncoding.of(problem.graph, self.unfusable)
        self.repairer = Repairer(problem.graph, self.cache, problem.splitter,
                                 int(rng.integers(2**63)))
        self.plans: Memo[PartitionPlan, PlanScore] = Memo()
        self.remaining: int | None = None
        """Plans the search may still evaluate, set by the driver before every ask (None: no
        cap); random search draws no more plans ahead than that."""

    @property
    def fuseable(self) -> frozenset[int]:
        """Ops that may share a group (all but the unfusable ones)."""
        return frozenset(range(len(self.graph))) - self.unfusable

    def seen(self, plan: PartitionPlan) -> bool:
        """True if the plan was evaluated before in this run."""
        return plan in self.plans

    def random_cuts(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """A random cut vector: each edge cut with one probability drawn uniformly per plan,
        so that plans of every granularity, from one group to layer by layer, are sampled."""
        rng = rng or self.rng
        p = rng.random()
        return rng.random(self.encoding.n_vars) < p

    def random_plan(self) -> PartitionPlan:
        """A repaired (valid) random plan."""
        return self.repairer.repair(self.encoding.groups(self.random_cuts()))

    def score(self, plan: PartitionPlan) -> PlanScore:
        """The plan's figures (memoised per plan)."""
        return self.plans.get(plan, self._score)

    def _score(self, plan: PartitionPlan) -> PlanScore:
        groups = [g.ops for g in plan.groups]
        structured = not violations(self.graph, groups, first_only=True)
        t = plan_totals(self.cache.run(ops) for ops in groups)
        return PlanScore(t.dram_bytes, t.dram_bytes_fuseable, t.mbu, t.fused_mbu, t.cycles,
                         t.energy_pj, len(groups), structured and t.runs)
