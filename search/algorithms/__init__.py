"""Search algorithms in ask-and-tell form: random search, local search and NSGA-II."""

from __future__ import annotations

from collections.abc import Callable

from search.algorithms.base import SearchAlgorithm
from search.algorithms.local_search import LocalSearch
from search.algorithms.nsga2 import NSGA2Search
from search.algorithms.random_search import RandomSearch
from simulator.errors import InputError

__all__ = ["ALGORITHMS", "LocalSearch", "NSGA2Search", "RandomSearch", "SearchAlgorithm",
           "make_algorithm"]

ALGORITHMS: dict[str, Callable[[], SearchAlgorithm]] = {
    "rs": RandomSearch,
    "ls": LocalSearch,
    "nsga2": NSGA2Search,
}
"""Algorithm factories by name, with the paper's settings (K = 10)."""


def make_algorithm(name: str) -> SearchAlgorithm:
    """A fresh algorithm by name (``rs``, ``ls`` or ``nsga2``).

    Raises:
        InputError: unknown name.
    """
    try:
        return ALGORITHMS[name.lower()]()
    except KeyError:
        raise InputError(f"unknown search algorithm {name!r}; choose one of "
                         f"{', '.join(ALGORITHMS)}") from None
