"""The result of a search: best plan, its cost, the history of evaluations and a summary.

`SearchSummary` is the run's figures, typed and frozen; `SearchSummary.to_dict` is the
summary.json document (keys in docs/search.md), made only at the edge. The optimum
(`search.exact`) is a baseline like the others but kept apart (``optimum``), with the search's
gap to it (`gap_to_optimum`).

History columns (one row per proposed-and-evaluated plan, in order; stable names):

==============================  ==========================================================
``evaluation``                  1-based index of the plan in the budget
``dram_bytes``                  DRAM traffic of the plan, whole network
``dram_bytes_fuseable``         DRAM traffic of its groups of fuseable ops (paper's scope)
``mbu_bytes``                   max buffer usage over its groups of fuseable ops (paper's MBU)
``fused_mbu_bytes``             largest F_beta over its groups of two or more ops (0 if none)
``cycles``                      analytic cycles
``groups``                      number of groups
``valid``                       the plan is valid (always true: a search only records valid plans)
``best_dram_bytes``             least ``dram_bytes`` so far (valid plans)
``best_dram_bytes_fuseable``    ``dram_bytes_fuseable`` of that best plan
==============================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from simulator.cost import PlanCost
from simulator.plan import PartitionPlan
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    import pandas as pd

    from search.baselines import Baseline
    from simulator.hw import HardwareConfig

__all__ = ["HISTORY_COLUMNS", "OBJECTIVE_COLUMNS", "SUMMARY_FORMAT", "CacheRate", "Optimum",
           "SearchResult", "SearchSummary", "empty_history", "gap_to_optimum"]

SUMMARY_FORMAT = "fusion-dse.search"
"""The ``format`` of summary.json."""

HISTORY_COLUMNS = ("evaluation", "dram_bytes", "dram_bytes_fuseable", "mbu_bytes",
                   "fused_mbu_bytes", "cycles", "groups", "valid", "best_dram_bytes",
                   "best_dram_bytes_fuseable")

OBJECTIVE_COLUMNS = {"dram": "dram_bytes", "mbu": "fused_mbu_bytes", "cycles": "cycles"}
"""History / Pareto column of each objective."""


def empty_history() -> pd.DataFrame:
    """A history with no rows and the stable columns."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype="bool" if c == "valid" else "int64")
                         for c in HISTORY_COLUMNS})


@dataclass(frozen=True)
class CacheRate:
    """Lookups of one memo: answered from it (`hits`) or added to it (`misses`)."""

    hits: int
    misses: int

    @property
    def hit_rate(self) -> float:
        """Share of lookups answered from the memo (rounded to 6 places; 0 without lookups)."""
        total = self.hits + self.misses
        return round(self.hits / total, 6) if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        """``hits``, ``misses``, ``hit_rate``."""
        return {"hits": self.hits, "misses": self.misses, "hit_rate": self.hit_rate}


def gap_to_optimum(dram_bytes: int, optimum_bytes: int) -> float:
    """How far `dram_bytes` is above `optimum_bytes`, as a fraction (0.05: 5 % more DRAM),
    rounded to 6 places."""
    return round(dram_bytes / optimum_bytes - 1, 6) if optimum_bytes else 0.0


@dataclass(frozen=True)
class Optimum:
    """The least-DRAM plan (`search.exact.optimum`) as a reference, or why it is missing.

    Attributes:
        baseline: Its figures as a `search.baselines.Baseline` named ``optimum`` (``info``
            holds the solver's figures: ``optimal``, ``cap_reason``, ``bound_bytes``,
            ``candidates``, ``costed``, ``states``, ``seconds``); None when not computed.
        reason: Why it was not computed (``""`` when it was).
    """

    baseline: Baseline | None
    reason: str = ""

    @property
    def optimal(self) -> bool:
        """True when the plan is proven optimal (no cap cut the solve)."""
        return self.baseline is not None and bool(self.baseline.info.get("optimal"))

    @property
    def bound_bytes(self) -> int | None:
        """A proven lower bound on the optimum's DRAM: the optimum itself when optimal, the
        solver's bound when capped (None when unknown)."""
        if self.baseline is None:
            return None
        if self.optimal:
            return self.baseline.dram_bytes
        return self.baseline.info.get("bound_bytes")

    def gaps(self, dram_bytes: int) -> dict[str, float | None]:
        """``gap_to_optimum`` of a plan with `dram_bytes` (None unless the optimum is proven)
        and, when only a bound is known, ``gap_to_optimum_at_most`` (its gap to the bound);
        nothing when the optimum was not computed."""
        if self.baseline is None:
            return {}
        if self.optimal:
            return {"gap_to_optimum": gap_to_optimum(dram_bytes, self.baseline.dram_bytes)}
        gaps: dict[str, float | None] = {"gap_to_optimum": None}
        if self.bound_bytes:
            gaps["gap_to_optimum_at_most"] = gap_to_optimum(dram_bytes, self.bound_bytes)
        return gaps

    def to_dict(self) -> dict[str, Any]:
        """``status`` (``optimal``, ``capped`` or ``not computed``) and the figures or reason."""
        if self.baseline is None:
            return {"status": "not computed", "reason": self.reason}
        return {"status": "optimal" if self.optimal else "capped", **self.baseline.to_dict()}


@dataclass(frozen=True, repr=False)
class SearchSummary:
    """The figures of one run (the mappings are not to be modified).

    The search fills the fields up to `seconds`; the application's pipeline adds the rest
    (`fusion_dse.pipeline`), and those of them still None are left out of `to_dict`.

    Attributes:
        model, hw, buffer_bytes, scheme: What was searched.
        search, repair: Names of the algorithm and of the splitter.
        objectives: Objective names, ``dram`` first.
        budget: Plans the budget allows (None for a termination without a count).
        budget_used: Plans proposed and evaluated.
        distinct_plans: Of those, plans evaluated for the first time.
        diversified_repairs: Proposals repaired with the splitter's baseline because its own
            repair gave a known plan.
        best: ``PlanCost.totals()`` of the best plan.
        found_at: 1-based evaluation at which it was found (0: none evaluated).
        search_space: `search.driver.search_space` of the problem.
        caches: `CacheRate` of the ``group``, ``splitter`` and ``plan`` memos.
        status, message: ``ok`` and ``""``, or why there was nothing to search.
        notes: Facts about the problem a user should know.
        seconds: Wall-clock time of the search.
        search_report: The algorithm's own figures (``auto``: the path it took), if any.
        seed: Seed of the run's generator.
        hardware: All hardware fields (`HardwareConfig.to_dict`).
        baselines: Reference baselines by name (`search.baselines.reference_baselines`).
        baseline_seconds: Wall-clock time of the baselines.
        splitter: The splitter's own figures (`Splitter.report`), if it has any.
        optimum: The optimum (`Optimum`), added by the pipeline; with it, ``best`` gains
            ``gap_to_optimum`` (and ``gap_to_optimum_at_most`` when the solve was capped).
        graph_stages: What the graph stages did (`search.substitution.stages.StagedGraph.
            to_dict`: stages, ops before and after, per-stage figures, the rewrites), added by
            the pipeline when a stage ran.
        best_source: Which computation found ``best``: ``search`` (the algorithm), or, when a
            plan the run computed besides the search was better (the pipeline's incumbent
            stage), ``optimum`` or a baseline's name.
        search_best: When ``best_source`` is not ``search``, the search's own best
            (``PlanCost.totals()`` and ``found_at``): what a comparison of search algorithms
            reads.
        model_spec: The model as the run was asked for it (``resnet50@320``, a file path),
            added by the pipeline; `model` is the network's name.
        input_shapes: The shapes of the network's inputs, added by the pipeline.
    """

    model: str
    hw: str
    buffer_bytes: int
    scheme: str
    search: str
    repair: str
    objectives: tuple[str, ...]
    budget: int | None
    budget_used: int
    distinct_plans: int
    diversified_repairs: int
    best: Mapping[str, Any]
    found_at: int
    search_space: Mapping[str, int]
    caches: Mapping[str, CacheRate]
    status: str
    message: str
    notes: tuple[str, ...]
    seconds: float
    search_report: Mapping[str, Any] | None = None
    seed: int | None = None
    hardware: Mapping[str, Any] | None = None
    baselines: Mapping[str, Baseline] | None = None
    baseline_seconds: float | None = None
    splitter: Mapping[str, Any] | None = None
    optimum: Optimum | None = None
    graph_stages: Mapping[str, Any] | None = None
    best_source: str = "search"
    search_best: Mapping[str, Any] | None = None
    model_spec: str | None = None
    input_shapes: tuple[tuple[int, ...], ...] | None = None

    @property
    def model_label(self) -> str:
        """The model with its input shape, for titles and headers:
        ``resnet50@320 (1x3x320x320)``."""
        name = self.model_spec or self.model
        if not self.input_shapes:
            return name
        return f"{name} ({', '.join('x'.join(map(str, s)) for s in self.input_shapes)})"

    def _search_best(self) -> dict[str, Any] | None:
        """``search_best``: the search's own best (``best`` itself when the search found the
        plan written), with its gap to the optimum; None without a plan."""
        if not self.best:
            return None
        own = dict(self.search_best) if self.search_best is not None \
            else {**self.best, "found_at": self.found_at}
        return {**own, **(self.optimum.gaps(own["dram_bytes"]) if self.optimum else {})}

    def to_dict(self) -> dict[str, Any]:
        """The summary.json document: stable keys, in a stable order (docs/search.md)."""
        doc: dict[str, Any] = {
            "format": SUMMARY_FORMAT, "version": 1, "model": self.model, "hw": self.hw,
            "buffer_bytes": self.buffer_bytes, "scheme": str(self.scheme),
            "search": self.search, "repair": self.repair, "objectives": list(self.objectives),
            "budget": self.budget, "budget_used": self.budget_used,
            "distinct_plans": self.distinct_plans,
            "diversified_repairs": self.diversified_repairs,
            "best": {**self.best,
                     "found_at": self.found_at if self.best_source == "search" else None,
                     "source": self.best_source,
                     **(self.optimum.gaps(self.best["dram_bytes"]) if self.optimum else {})},
            "search_space": dict(self.search_space),
            "caches": {name: rate.to_dict() for name, rate in self.caches.items()},
            "status": self.status, "message": self.message, "notes": list(self.notes),
            "seconds": self.seconds,
        }
        extra = {"search_report": self.search_report, "seed": self.seed,
                 "hardware": self.hardware,
                 "baselines": None if self.baselines is None else
                 {name: b.to_dict() for name, b in self.baselines.items()},
                 "baseline_seconds": self.baseline_seconds, "splitter": self.splitter,
                 "optimum": None if self.optimum is None else self.optimum.to_dict(),
                 "graph_stages": None if self.graph_stages is None else dict(self.graph_stages),
                 "search_best": self._search_best(), "model_spec": self.model_spec,
                 "input_shapes": None if self.input_shapes is None else
                 [list(s) for s in self.input_shapes]}
        doc.update((k, v) for k, v in extra.items() if v is not None)
        return doc

    def _facts(self) -> list[tuple[str, str]]:
        """(label, value) pairs of the short forms (`__repr__`, `_repr_html_`)."""
        best = self.best or {}
        known = self.optimum
        optimum = ("not computed" if known is None or known.baseline is None else
                   f"{known.baseline.dram_bytes:,} B ({'proven' if known.optimal else 'capped'})")
        return [("model", self.model_label), ("hardware", f"{self.hw}, buffer "
                                              f"{_size(self.buffer_bytes)}"),
                ("run", f"{str(self.scheme).upper()}, {self.search} + {self.repair} repair, "
                        f"seed {self.seed}, {self.budget_used:,} of {self.budget or 0:,} plans"),
                ("best plan", f"{best.get('dram_bytes', 0):,} B DRAM, {best.get('groups')} "
                              f"groups, from {self.best_source}"),
                ("optimum", optimum), ("status", self.status)]

    def __repr__(self) -> str:
        """One line: the model, hardware, run, best DRAM and optimum (the whole document is
        `to_dict`)."""
        return "SearchSummary(" + "; ".join(f"{k} {v}" for k, v in self._facts()) + ")"

    def _repr_html_(self) -> str:
        """A small table for notebooks."""
        return _html_table("SearchSummary", self._facts())


@dataclass(frozen=True, repr=False)
class SearchResult:
    """What a search found (the DataFrames are not to be modified).

    Attributes:
        graph: The network.
        hw: The hardware configuration.
        plan: The valid plan with the least DRAM traffic found.
        cost: Its full cost (`simulator.cost.evaluate_plan`).
        history: One row per evaluated plan (`HISTORY_COLUMNS`).
        summary: The run's figures (`SearchSummary.to_dict` gives summary.json).
        pareto: With several objectives, the non-dominated plans found: columns
            ``evaluation``, the objective columns (`OBJECTIVE_COLUMNS`), then
            ``dram_bytes_fuseable``, ``mbu_bytes`` and ``groups``, sorted by DRAM; None with
            one objective.
        front: The plans of the `pareto` rows, in the same order.
        search_plan: When a plan the run computed besides the search was better
            (``summary.best_source``), the search's own best plan (None otherwise: `plan` is
            the search's).
        search_cost: Its cost (None with `search_plan`).
    """

    graph: ComputeGraph
    hw: HardwareConfig
    plan: PartitionPlan
    cost: PlanCost
    history: pd.DataFrame
    summary: SearchSummary
    pareto: pd.DataFrame | None = None
    front: tuple[PartitionPlan, ...] = field(default=())
    search_plan: PartitionPlan | None = None
    search_cost: PlanCost | None = None

    @property
    def budget_used(self) -> int:
        """Plans proposed and evaluated."""
        return len(self.history)

    @property
    def groups_by_name(self) -> list[list[str]]:
        """The plan's groups as lists of op names (`plan` holds op ids), in plan order."""
        return [[self.graph[o].name for o in g.ops] for g in self.plan.groups]

    def __repr__(self) -> str:
        """One line, not the tables: the summary's facts and the plan's size."""
        return (f"SearchResult({self.summary.model_label} on {self.hw.name}, "
                f"{str(self.summary.scheme).upper()}: {len(self.plan)} groups, DRAM "
                f"{self.cost.dram_bytes:,} B, {len(self.history):,} plans evaluated; "
                f".summary, .plan, .groups_by_name, .cost, .history)")

    def _repr_html_(self) -> str:
        """A small table for notebooks."""
        return _html_table("SearchResult", [*self.summary._facts(),
                                            ("groups", ", ".join(
                                                f"{g[0]}..{g[-1]}" if len(g) > 1 else g[0]
                                                for g in self.groups_by_name[:8])
                                             + (" ..." if len(self.plan) > 8 else ""))])


def _size(n: int) -> str:
    return f"{n / 2**20:.4g} MiB" if n >= 2**20 else f"{n / 1024:.4g} KiB"


def _html_table(title: str, facts: list[tuple[str, str]]) -> str:
    from html import escape

    rows = "".join(f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:"
                   f"left'>{escape(str(v))}</td></tr>" for k, v in facts)
    return f"<table><caption>{escape(title)}</caption>{rows}</table>"
