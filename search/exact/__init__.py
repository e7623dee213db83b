"""Provably optimal fusion plans: candidate sets, the down-set shortest path, a MILP check.

`optimum(graph, cache)` is the entry point (see docs/exact.md); `ExactSearch` wraps it as a
`search.algorithms.base.SearchAlgorithm`.
"""

from search.exact.candidates import (
    Candidate,
    CandidateSpace,
    costed_candidates,
    enumerate_space,
)
from search.exact.solver import ExactResult, FrontPoint, StateCap, front, optimum, solve

__all__ = ["Candidate", "CandidateSpace", "ExactResult", "FrontPoint", "StateCap",
           "costed_candidates", "enumerate_space", "front", "optimum", "solve"]
