"""The stages of one optimisation run, each a thin adapter over a pure library function.

::

    load          model + hardware        -> ComputeGraph, HardwareConfig
    graph stages  ComputeGraph, hw, scheme -> StagedGraph       (named stages: fuse, fission,
                                             substitute, search.substitution.stages; then
                                             any GRAPH_STAGES passes, in order)
    problem       graph, hw, scheme, splitter (search.registry.REPAIRS) -> SearchProblem
    search        problem, algorithm from search.registry.SEARCHES       -> SearchResult
    optimum       graph + cache           -> Optimum (search.exact under its work caps;
                                             reused from the search when it solved exactly:
                                             exact, auto)
    baselines     graph, hw, scheme       -> reference baselines, on the graph searched
    incumbent     result, optimum, baselines -> the result whose plan is the best of every
                                             plan the run computed (the search's own best
                                             kept as ``search_best``)
    report        result + seed, hardware, baselines, optimum, splitter report -> SearchResult

One `CostCache` of (graph, hardware, scheme) is made once and shared by the search, the
optimum and the baselines (the optimum of an explicit heuristic search is computed after it, so
the search's own figures, cache rates included, are those of the search alone).
`run_pipeline` chains the stages; `fusion_dse.optimization.optimize` is its public facade.
Validation lives where the values are used (the budget in `search.budget`, the scheme and
objectives in `search.problem.SearchProblem`, names in `search.registry`); this module checks
only what nothing below it sees, the seed and the exact solver's caps and time limit.

Every figure of a run is a function of its inputs: the exact solver stops on counted work
(`search.exact.solver.DEFAULT_CAPS`), never on the clock unless a time limit is asked for, and
a run never writes a plan worse than one it computed (`incumbent_stage`).
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from fusion_dse.api import resolve_hw
from fusion_dse.runspec import RunSpec
from search.baselines import Baseline, reference_baselines
from search.budget import SearchState, Termination
from search.exact.solver import DEFAULT_CAPS, ExactCaps, ExactResult, optimum
from search.problem import SearchProblem
from search.registry import DEFAULT_EXACT_TIME_LIMIT
from search.result import Optimum, SearchResult
from search.splitter import Splitter
from search.substitution.stages import StagedGraph, run_stages
from simulator.cost import CostCache, PlanCost, evaluate_plan, plan_totals
from simulator.errors import InputError
from simulator.hw import HardwareConfig
from simulator.plan import PartitionPlan
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import check_spec, load

if TYPE_CHECKING:
    import pandas as pd

    from search.algorithms.base import SearchAlgorithm
    from search.driver import ProgressFn

__all__ = ["DEFAULT_EXACT_TIME_LIMIT", "GRAPH_STAGES", "GraphStage", "RunSpec",
           "baselines_stage", "exact_caps", "graph_stages", "incumbent_stage", "load_stage",
           "optimum_stage", "problem_stage", "report_stage", "rewrite_stage", "run_pipeline",
           "search_stage"]

GraphStage = Callable[[ComputeGraph], ComputeGraph]
"""A graph pass: a pure function returning a network that computes the same outputs (graphs
are immutable values: a pass returns a new graph, or its argument unchanged)."""

GRAPH_STAGES: tuple[GraphStage, ...] = ()
"""The graph passes every run applies between loading and search, in order (none yet)."""
_PROVEN: OrderedDict[tuple[ComputeGraph, HardwareConfig, Scheme, ExactCaps], ExactResult] = \
    OrderedDict()
_PROVEN_SIZE = 32
"""Reproducible exact answers of this process by (graph, hardware, dataflow, work caps), most
recent last."""

_MIB = 2**20


def load_stage(spec: RunSpec) -> tuple[ComputeGraph, HardwareConfig]:
    """The network and the hardware configuration of `spec`: the model's name (or file) is
    checked, then the hardware, before the network is built (`simulator.workload.loader.
    check_spec`), so that a bad hardware is refused at once."""
    if isinstance(spec.model, ComputeGraph):
        return spec.model, resolve_hw(spec.hw, spec.overrides)
    check_spec(spec.model, spec.input_shape)
    hw = resolve_hw(spec.hw, spec.overrides)
    return load(spec.model, spec.input_shape), hw


def graph_stages(graph: ComputeGraph,
                 stages: Sequence[GraphStage] = GRAPH_STAGES) -> ComputeGraph:
    """`graph` after every pass of `stages`, in order."""
    for stage in stages:
        graph = stage(graph)
    return graph


def rewrite_stage(spec: RunSpec, graph: ComputeGraph, hw: HardwareConfig) -> StagedGraph:
    """`graph` after the named graph stages of `spec` (none: `graph` itself), rewritten for
    `hw` and the run's dataflow; the substitution search is seeded with the run's seed."""
    return run_stages(graph, spec.graph_stages, hw, spec.scheme, algorithm=spec.substitution,
                      seed=spec.seed)


def problem_stage(spec: RunSpec, graph: ComputeGraph, hw: HardwareConfig,
                  splitter: Splitter) -> SearchProblem:
    """The search problem of `spec` (it checks the scheme, the objectives and, the one place
    this is asked, that the splitter supports the scheme)."""
    return SearchProblem(graph, hw, spec.scheme, spec.objectives, splitter)


def search_stage(problem: SearchProblem, algorithm: SearchAlgorithm, termination: Termination,
                 seed: int, cache: CostCache,
                 progress: bool | ProgressFn = False) -> SearchResult:
    """Run `algorithm` on `problem` with the run's generator, made from `seed`."""
    label = f"{problem.scheme} {algorithm.name}"
    with _progress_bar(progress, termination, label) as callback:
        return run_search(problem, algorithm, termination, np.random.default_rng(seed),
                          callback, cache)


def run_search(problem: SearchProblem, algorithm: SearchAlgorithm, termination: Termination,
               rng: np.random.Generator, progress: ProgressFn | None,
               cache: CostCache) -> SearchResult:
    """`search.driver.run_search`, imported when a search runs (it brings pandas), so that a
    run's inputs are all checked first."""
    from search.driver import run_search as run

    return run(problem, algorithm, termination, rng, progress, cache)


def baselines_stage(problem: SearchProblem,
                    cache: CostCache) -> tuple[dict[str, Baseline], float]:
    """The reference baselines of the problem and the seconds they took."""
    started = time.perf_counter()
    baselines = reference_baselines(problem.graph, problem.hw, problem.scheme, cache)
    return baselines, round(time.perf_counter() - started, 3)


def optimum_stage(problem: SearchProblem, cache: CostCache, solved: ExactResult | None = None,
                  time_limit: float | None = DEFAULT_EXACT_TIME_LIMIT,
                  caps: ExactCaps = DEFAULT_CAPS) -> Optimum:
    """The least-DRAM plan as a reference: `solved` when the search already has it, else
    `search.exact.optimum` under `caps` (and the opt-in `time_limit`; capped: ``optimal``
    false, with the reason and a proven lower bound when the solver has one).

    An answer of the work caps depends only on (graph, hardware, dataflow, caps), so the last
    `_PROVEN_SIZE` of this process are kept and reused (``reused`` in the summary; its
    ``seconds`` are those of the solve that found it): a sweep's points that differ only in
    search, repair, budget or seed solve each problem once per worker. An answer a wall-clock
    limit cut depends on the machine and is never reused."""
    key = (problem.graph, problem.hw, problem.scheme, caps)
    reused = solved is None and key in _PROVEN
    exact = solved or _PROVEN.get(key) or optimum(problem.graph, cache, caps=caps,
                                                  time_limit=time_limit)
    if exact.reproducible and exact.caps == caps:
        _PROVEN[key] = exact
        _PROVEN.move_to_end(key)
        while len(_PROVEN) > _PROVEN_SIZE:
            _PROVEN.popitem(last=False)
    cost = evaluate_plan(problem.graph, exact.plan, problem.hw, problem.scheme, cache)
    if not cost.valid:
        raise RuntimeError(f"the exact solver returned an invalid plan: {cost.violations[0]}")
    info = {k: v for k, v in exact.to_dict().items()
            if k not in ("dram_bytes", "cycles", "mbu_bytes", "groups")}
    info["reused"] = reused
    return Optimum(Baseline("optimum", exact.plan, cost.dram_bytes, cost.dram_bytes_fuseable,
                            cost.mbu, cost.cycles, cost.energy_pj, len(exact.plan), info))


def incumbent_stage(result: SearchResult, problem: SearchProblem, cache: CostCache,
                    baselines: Mapping[str, Baseline],
                    best_known: Optimum | None = None) -> SearchResult:
    """`result` whose plan is the least-DRAM plan of everything the run computed: the search's
    best, the optimum and the baselines with a plan (cycles break DRAM ties; the search's plan
    is kept on a full tie). When another plan wins, the result's plan and cost become it,
    summary ``best`` names its ``source`` and ``search_best`` keeps the search's own figures
    (what the paper's tables compare). Nothing changes when the search found no plan."""
    if result.summary.status != "ok" or not result.summary.best:
        return result
    known = [(b.name, b.plan, b.dram_bytes, b.cycles) for b in baselines.values()
             if b.plan is not None]
    if best_known is not None and best_known.baseline is not None:
        b = best_known.baseline
        known.insert(0, ("optimum", b.plan, b.dram_bytes, b.cycles))
    own = (result.cost.dram_bytes, result.cost.cycles)
    better = [k for k in known if (k[2], k[3]) < own]
    if not better:
        return result
    name, plan, _, _ = min(better, key=lambda k: (k[2], k[3]))
    cost = evaluate_plan(problem.graph, plan, problem.hw, problem.scheme, cache)
    summary = replace(result.summary, best=cost.totals(), best_source=name,
                      search_best={**result.summary.best,
                                   "found_at": result.summary.found_at})
    pareto, front = _with_incumbent(result, problem, cache, plan, cost)
    return replace(result, plan=plan, cost=cost, summary=summary, search_plan=result.plan,
                   search_cost=result.cost, pareto=pareto, front=front)


def _with_incumbent(result: SearchResult, problem: SearchProblem, cache: CostCache,
                    plan: PartitionPlan,
                    cost: PlanCost) -> tuple[pd.DataFrame | None, tuple[PartitionPlan, ...]]:
    """The run's Pareto front with the incumbent `plan` added (``evaluation`` 0: not a plan
    of the search) and the points it dominates removed, so the front's least-DRAM end is the
    plan written."""
    if result.pareto is None:
        return result.pareto, result.front
    import pandas as pd

    from search.result import OBJECTIVE_COLUMNS

    totals = plan_totals(cache.run(g.ops) for g in plan.groups)  # as `PlanScore` reads them
    figures = {"dram_bytes": totals.dram_bytes, "fused_mbu_bytes": totals.fused_mbu,
               "cycles": totals.cycles}
    cols = [OBJECTIVE_COLUMNS[o] for o in problem.objectives]
    new = [int(figures[c]) for c in cols]
    keep = [k for k, row in enumerate(result.pareto[cols].itertuples(index=False))
            if not (all(a <= b for a, b in zip(new, row, strict=True)) and list(row) != new)]
    row = {"evaluation": 0, **dict(zip(cols, new, strict=True)),
           "dram_bytes_fuseable": cost.dram_bytes_fuseable, "mbu_bytes": cost.mbu,
           "groups": len(plan)}
    frame = result.pareto.iloc[keep]
    pareto = pd.concat([pd.DataFrame([row], columns=result.pareto.columns), frame],
                       ignore_index=True).astype(result.pareto.dtypes.to_dict())
    order = pareto.sort_values(cols, kind="stable").index
    plans = (plan, *(result.front[k] for k in keep))
    return pareto.loc[order].reset_index(drop=True), tuple(plans[k] for k in order)


def report_stage(result: SearchResult, problem: SearchProblem, seed: int,
                 baselines: Mapping[str, Baseline], baseline_seconds: float,
                 best_known: Optimum | None = None,
                 staged: StagedGraph | None = None,
                 model_spec: str | None = None) -> SearchResult:
    """The result with the run's seed, hardware, baselines, optimum, splitter figures, graph
    stages and model (as asked for, with its input shapes) added to its summary."""
    inputs = (staged.source if staged else problem.graph).input_shapes
    summary = replace(result.summary, seed=seed, hardware=problem.hw.to_dict(),
                      model_spec=model_spec or result.summary.model,
                      input_shapes=tuple(tuple(int(d) for d in s) for s in inputs),
                      baselines=baselines, baseline_seconds=baseline_seconds,
                      splitter=problem.splitter.report(), optimum=best_known,
                      graph_stages=staged.to_dict() if staged and staged.stages else None)
    return replace(result, summary=summary)


def run_pipeline(spec: RunSpec, progress: bool | ProgressFn = False,
                 stages: Sequence[GraphStage] = GRAPH_STAGES) -> SearchResult:
    """Run every stage of `spec` (see the module): load, graph passes, search, optimum,
    baselines, report.

    Raises:
        InputError: bad input of any kind (names, seed, budget, dataflow, objectives, the
            model's name and the hardware before the network is loaded).
    """
    run = spec.checked()  # every setting, before anything is loaded
    seed, termination, time_limit, caps = run.seed, run.termination, run.time_limit, run.caps
    search, splitter = run.search, run.splitter
    graph, hw = load_stage(spec)
    staged = rewrite_stage(spec, graph, hw)
    problem = problem_stage(spec, graph_stages(staged.graph, stages), hw, splitter)
    cache = CostCache(problem.graph, hw, problem.scheme)
    algorithm = search.create(time_limit=time_limit, caps=caps)
    result = search_stage(problem, algorithm, termination, seed, cache, progress)
    best_known = Optimum(None, "not asked for (no optimum)")
    if spec.compute_optimum:
        solved = getattr(algorithm, "result", None)
        best_known = optimum_stage(problem, cache, solved if isinstance(solved, ExactResult)
                                   else None, time_limit, caps)
    baselines, seconds = baselines_stage(problem, cache)
    result = incumbent_stage(result, problem, cache, baselines, best_known)
    spec_name = spec.model if isinstance(spec.model, str) else graph.name
    return report_stage(result, problem, seed, baselines, seconds, best_known, staged,
                        spec_name)


def exact_caps(max_costed: Any = DEFAULT_CAPS.max_costed) -> ExactCaps:
    """The default work caps with `max_costed` sets costed (None: no costing cap).

    Raises:
        InputError: `max_costed` is not a positive integer or None.
    """
    if max_costed is not None and (isinstance(max_costed, bool) or not isinstance(
            max_costed, (int, np.integer)) or max_costed <= 0):
        raise InputError(f"the exact solver's costing cap must be a positive number of sets "
                         f"or None, got {max_costed!r}")
    return replace(DEFAULT_CAPS, max_costed=None if max_costed is None else int(max_costed))


@contextmanager
def _progress_bar(progress: bool | ProgressFn, termination: Termination, label: str,
                  ) -> Iterator[ProgressFn | None]:
    """A progress callback: the caller's, a tqdm bar on stderr (True), or none (False)."""
    if callable(progress):
        yield progress
        return
    if not progress:
        yield None
        return
    total = termination.remaining(SearchState(0, 0))
    with tqdm(total=total, desc=label, unit="plan", file=sys.stderr, leave=False) as bar:
        def update(done: int, best: int | None) -> None:
            bar.update(done - bar.n)
            if best is not None:
                bar.set_postfix_str(f"best {best / _MIB:.3f} MiB", refresh=False)
        yield update
