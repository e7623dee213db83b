"""Partition search: encoding, repair, search algorithms, budgets and reference baselines.

`run_search(problem, algorithm, budget, rng)` finds the valid partition plan with the least DRAM
traffic within a budget of proposed plans (Mills et al. 2023, §IV-B); `reference_baselines`
gives the plans every result is compared with; `search.registry` names every search algorithm
and repair. Imports `simulator` only.

The names below load on first use, so that importing a light module of the package (the
registry, for the command-line parser) does not import pymoo.
"""

from __future__ import annotations

from simulator.lazy import lazy_exports

_EXPORTS = {
    "search.algorithms": ("LocalSearch", "NSGA2Search", "RandomSearch", "SearchAlgorithm",
                          "make_algorithm"),
    "search.baselines": ("Baseline", "greedy_fusion", "reference_baselines", "segment_dp"),
    "search.budget": ("AnyOf", "PlanBudget", "Stagnation", "Termination"),
    "search.driver": ("run_search",),
    "search.encoding": ("EdgeEncoding",),
    "search.problem": ("OBJECTIVES", "PlanScore", "SearchContext", "SearchProblem"),
    "search.registry": ("REPAIRS", "SEARCHES"),
    "search.repair": ("Repairer",),
    "search.result": ("SearchResult", "SearchSummary"),
    "search.splitter": ("RandomSplitter", "Splitter"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_HOME)


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
