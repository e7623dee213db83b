"""Partition search: encoding, repair, search algorithms, budgets and reference baselines.

`run_search(problem, algorithm, budget, rng)` finds the valid partition plan with the least DRAM
traffic within a budget of proposed plans (Mills et al. 2023, §IV-B); `reference_baselines`
gives the plans every result is compared with. Imports `simulator` only.
"""

from search.algorithms import (
    ALGORITHMS,
    LocalSearch,
    NSGA2Search,
    RandomSearch,
    SearchAlgorithm,
    make_algorithm,
)
from search.baselines import Baseline, greedy_fusion, reference_baselines, segment_dp
from search.budget import AnyOf, PlanBudget, Stagnation, Termination
from search.driver import run_search
from search.encoding import EdgeEncoding, make_acyclic
from search.problem import OBJECTIVES, PlanScore, SearchContext, SearchProblem
from search.repair import Repairer
from search.result import SearchResult
from search.splitter import RandomSplitter, Splitter, get_splitter

__all__ = [
    "ALGORITHMS",
    "OBJECTIVES",
    "AnyOf",
    "Baseline",
    "EdgeEncoding",
    "LocalSearch",
    "NSGA2Search",
    "PlanBudget",
    "PlanScore",
    "RandomSearch",
    "RandomSplitter",
    "Repairer",
    "SearchAlgorithm",
    "SearchContext",
    "SearchProblem",
    "SearchResult",
    "Splitter",
    "Stagnation",
    "Termination",
    "get_splitter",
    "greedy_fusion",
    "make_acyclic",
    "make_algorithm",
    "reference_baselines",
    "run_search",
    "segment_dp",
]
