"""The search driver: runs an ask-and-tell algorithm within a budget and records every plan.

`run_search` builds the run's context (generator, caches, encoding, repairer), checks that the
network has something to fuse, then repeats ask -> evaluate -> tell until the termination says
stop. The last batch is truncated at the budget, so a `PlanBudget` of N evaluates exactly N
plans. An algorithm that has nothing more to propose says so with a true ``done`` attribute
(the exact solver, after proposing the optimum): the loop then stops before the budget, and
``budget_used`` says how many plans were evaluated. Each evaluated plan is scored (memoised),
checked and recorded; the best plan (least DRAM) is re-costed with
`simulator.cost.evaluate_plan`, the reference. An algorithm with a ``report()`` method adds its
figures to the summary (``search_report``: which path ``auto`` took).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from search.algorithms.base import SearchAlgorithm
from search.budget import SearchState, Termination, as_termination
from search.pareto import ParetoArchive
from search.problem import PlanScore, SearchContext, SearchProblem
from search.result import (
    HISTORY_COLUMNS,
    OBJECTIVE_COLUMNS,
    CacheRate,
    SearchResult,
    SearchSummary,
    empty_history,
)
from simulator.cost import CostCache, Failure, PlanCost, evaluate_plan
from simulator.cost.brr import incompatibility
from simulator.errors import InputError
from simulator.plan import PartitionPlan, layer_by_layer

__all__ = ["ProgressFn", "run_search", "search_space"]

ProgressFn = Callable[[int, "int | None"], None]
"""Called after every batch with (plans evaluated, best DRAM bytes so far or None)."""


def search_space(context: SearchContext) -> dict[str, int]:
    """Size of the search space and which adjacent op pairs can share a group.

    Returns:
        ``ops``, ``unfusable_ops``, ``variables`` (fuseable edges), ``fusable_pairs`` (edges
        whose two ops fit as one group), ``brr_incompatible_pairs`` and ``over_buffer_pairs``.
    """
    fits = incompatible = 0
    for i, j in context.encoding.edges:
        cost = context.cache.group((i, j))
        fits += cost.fits
        incompatible += cost.failure is Failure.BRR_INCOMPATIBLE
    n_vars = context.encoding.n_vars
    return {
        "ops": len(context.graph),
        "unfusable_ops": len(context.unfusable),
        "variables": n_vars,
        "fusable_pairs": fits,
        "brr_incompatible_pairs": incompatible,
        "over_buffer_pairs": n_vars - fits - incompatible,
    }


def _notes(problem: SearchProblem) -> list[str]:
    """Facts about the problem a user should know (BRR on squeeze-and-excitation)."""
    if not problem.scheme.tiled:
        return []
    reason = incompatibility(problem.graph, range(len(problem.graph)))
    if not reason:
        return []
    return [f"{problem.graph.name} has squeeze-and-excitation style blocks (a globally pooled "
            "tensor broadcast back onto a feature map): BRR cannot tile a group holding one "
            "whole, so plans split them (e.g. " + reason.removeprefix("BRR-incompatible: ")
            + ")"]


def _status(problem: SearchProblem, space: dict[str, int]) -> tuple[str, str]:
    """(status, message) of a run before it starts: ``ok`` or why there is nothing to search."""
    g, buf, scheme = problem.graph.name, f"{problem.hw.buffer_bytes:,} B", problem.scheme
    if space["unfusable_ops"] == space["ops"]:
        return "nothing_to_fuse", (f"every op of {g} is unfusable under {scheme} with a {buf} "
                                   "buffer (each needs more than the buffer even alone): the "
                                   "layer-by-layer plan is the only plan")
    if space["variables"] == 0:
        return "nothing_to_fuse", (f"no two adjacent ops of {g} are both fuseable under "
                                   f"{scheme} with a {buf} buffer: the layer-by-layer plan is "
                                   "the only plan")
    if space["fusable_pairs"] == 0:
        larger = ("the search keeps the layer-by-layer plan (a larger group may still fit: "
                  "F_beta is not monotone; the optimum says)" if space["over_buffer_pairs"]
                  else "the layer-by-layer plan is the only valid plan")
        return "no_fusable_pair", (f"no two adjacent ops of {g} fit one {scheme} group with a "
                                   f"{buf} buffer ({space['brr_incompatible_pairs']} pairs "
                                   f"BRR-incompatible, {space['over_buffer_pairs']} over the "
                                   f"buffer): {larger}")
    return "ok", ""


@dataclass
class _Recorder:
    """History rows, best plan and Pareto archive of one run."""

    objectives: tuple[str, ...]
    rows: list[tuple] = field(default_factory=list)
    best: PartitionPlan | None = None
    best_score: PlanScore | None = None
    best_at: int = 0
    archive: ParetoArchive[tuple[PartitionPlan, PlanScore]] = field(default_factory=ParetoArchive)

    @property
    def evaluated(self) -> int:
        return len(self.rows)

    def state(self) -> SearchState:
        return SearchState(self.evaluated, self.best_at)

    def add(self, plan: PartitionPlan, s: PlanScore) -> None:
        n = self.evaluated + 1
        if s.valid and (self.best_score is None or s.dram_bytes < self.best_score.dram_bytes):
            self.best, self.best_score, self.best_at = plan, s, n
        if s.valid and len(self.objectives) > 1:
            self.archive.add(s.objectives(self.objectives), n, (plan, s))
        b = self.best_score
        self.rows.append((n, s.dram_bytes, s.dram_bytes_fuseable, s.mbu_bytes,
                          s.fused_mbu_bytes, s.cycles, s.groups, s.valid,
                          b.dram_bytes if b else None, b.dram_bytes_fuseable if b else None))

    def history(self) -> pd.DataFrame:
        if not self.rows:
            return empty_history()
        df = pd.DataFrame(self.rows, columns=list(HISTORY_COLUMNS))
        kinds = {c: ("bool" if c == "valid" else
                     "Int64" if c.startswith("best") else "int64") for c in HISTORY_COLUMNS}
        return df.astype(kinds)

    def pareto(self) -> tuple[pd.DataFrame | None, tuple[PartitionPlan, ...]]:
        if len(self.objectives) < 2:
            return None, ()
        entries = self.archive.entries
        rows = []
        for e in entries:
            s = e.item[1]
            row = {"evaluation": e.evaluation}
            row.update({OBJECTIVE_COLUMNS[o]: int(v) for o, v in zip(self.objectives,
                                                                     e.values, strict=True)})
            row.update(dram_bytes_fuseable=s.dram_bytes_fuseable, mbu_bytes=s.mbu_bytes,
                       groups=s.groups)
            rows.append(row)
        columns = ["evaluation", *(OBJECTIVE_COLUMNS[o] for o in self.objectives),
                   "dram_bytes_fuseable", "mbu_bytes", "groups"]
        return pd.DataFrame(rows, columns=columns), tuple(e.item[0] for e in entries)


def run_search(problem: SearchProblem, algorithm: SearchAlgorithm, budget: int | Termination,
               rng: np.random.Generator, progress: ProgressFn | None = None,
               cache: CostCache | None = None) -> SearchResult:
    """Search for the valid plan with the least DRAM traffic.

    Args:
        problem: Network, hardware, dataflow, objectives and splitter.
        algorithm: A fresh (or restartable) ask-and-tell algorithm.
        budget: Number of plans to propose and evaluate, or a `Termination`.
        rng: The run's generator: the only source of randomness, passed down.
        progress: Called after every batch (see `ProgressFn`).
        cache: Group-cost cache to use (a fresh one by default).

    Returns:
        The result; when the network has nothing to fuse (see ``summary.status``) the
        layer-by-layer plan, with no plan evaluated.

    Raises:
        InputError: a budget that is not a positive integer, or an op that cannot run even
            on its own, tiled to the buffer (then no plan runs).
    """
    termination = as_termination(budget)
    started = time.perf_counter()
    context = SearchContext(problem, rng, cache)
    stuck = next((c for o in context.unfusable if not (c := context.cache.run((o,))).fits),
                 None)
    if stuck is not None:
        raise InputError(f"no plan of {problem.graph.name} can run with a "
                         f"{problem.hw.buffer_bytes:,} B buffer: {stuck.reason}")
    space = search_space(context)
    status, message = _status(problem, space)
    recorder = _Recorder(problem.objectives)
    if status == "ok":
        _loop(context, algorithm, termination, recorder, progress)
    plan = recorder.best if recorder.best is not None else layer_by_layer(problem.graph)
    cost = evaluate_plan(problem.graph, plan, problem.hw, problem.scheme, context.cache)
    if not cost.valid:
        raise RuntimeError(f"search returned an invalid plan: {cost.violations[0]}")
    pareto, front = recorder.pareto()
    summary = _summary(problem, algorithm, termination, context, recorder, cost, space,
                       (status, message, tuple(_notes(problem))), started)
    return SearchResult(problem.graph, problem.hw, plan, cost, recorder.history(), summary,
                        pareto, front)


def _loop(context: SearchContext, algorithm: SearchAlgorithm, termination: Termination,
          recorder: _Recorder, progress: ProgressFn | None) -> None:
    algorithm.start(context)
    while not termination.done(recorder.state()) and not _finished(algorithm):
        context.remaining = termination.remaining(recorder.state())
        plans = algorithm.ask()
        if not plans:
            raise RuntimeError(f"algorithm {algorithm.name!r} proposed no plan")
        cap = termination.remaining(recorder.state())
        plans = plans[:cap] if cap is not None else plans
        scores = [context.score(p) for p in plans]
        for p, s in zip(plans, scores, strict=True):
            recorder.add(p, s)
        algorithm.tell(plans, scores)
        if progress is not None:
            best = recorder.best_score
            progress(recorder.evaluated, best.dram_bytes if best else None)


def _finished(algorithm: SearchAlgorithm) -> bool:
    """True once the algorithm has nothing more to propose (an optional ``done`` attribute)."""
    return bool(getattr(algorithm, "done", False))


def _report(algorithm: SearchAlgorithm) -> dict | None:
    """The algorithm's own figures (an optional ``report()`` method), or None."""
    report = getattr(algorithm, "report", None)
    return report() if callable(report) else None


def _summary(problem: SearchProblem, algorithm: SearchAlgorithm, termination: Termination,
             context: SearchContext, recorder: _Recorder, cost: PlanCost,
             space: dict[str, int], outcome: tuple[str, str, tuple[str, ...]],
             started: float) -> SearchSummary:
    """The run's figures; `outcome` is (status, message, notes), `started` the start time."""
    repairer = context.repairer
    status, message, notes = outcome
    return SearchSummary(
        model=problem.graph.name, hw=problem.hw.name, buffer_bytes=problem.hw.buffer_bytes,
        scheme=problem.scheme, search=algorithm.name, repair=problem.splitter.name,
        objectives=tuple(problem.objectives),
        budget=termination.remaining(SearchState(0, 0)), budget_used=recorder.evaluated,
        distinct_plans=context.plans.misses, diversified_repairs=repairer.diversified,
        best=cost.totals(), found_at=recorder.best_at, search_space=space,
        caches={"group": CacheRate(context.cache.hits, context.cache.misses),
                "splitter": CacheRate(repairer.hits, repairer.misses),
                "plan": CacheRate(context.plans.hits, context.plans.misses)},
        status=status, message=message, notes=notes,
        seconds=round(time.perf_counter() - started, 3), search_report=_report(algorithm))
