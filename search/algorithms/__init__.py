"""Search algorithms in ask-and-tell form: random search, local search and NSGA-II.

They are offered by name in `search.registry.SEARCHES`; `make_algorithm` creates one from it.
"""

from __future__ import annotations

from search.algorithms.base import SearchAlgorithm
from search.algorithms.local_search import LocalSearch
from search.algorithms.nsga2 import NSGA2Search
from search.algorithms.random_search import RandomSearch
from search.registry import SEARCHES

__all__ = ["LocalSearch", "NSGA2Search", "RandomSearch", "SearchAlgorithm", "make_algorithm"]


def make_algorithm(name: str) -> SearchAlgorithm:
    """A fresh algorithm of `search.registry.SEARCHES` by name (``rs``, ``ls``, ``nsga2``).

    Raises:
        InputError: unknown name.
    """
    return SEARCHES.create(name)
