"""The ask-and-tell interface every search algorithm shares (STYLE.md #4).

An algorithm is a configuration until `start` binds it to a run's `SearchContext`. The driver
(`search.driver.run_search`) then repeats: ``plans = ask()``, evaluate them (truncating the
batch at the budget), ``tell(plans, scores)``. Every plan `ask` returns must be valid: it comes
out of the context's repairer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from search.problem import PlanScore, SearchContext
from simulator.plan import PartitionPlan

__all__ = ["SearchAlgorithm"]


@runtime_checkable
class SearchAlgorithm(Protocol):
    """A search strategy in ask-and-tell form.

    Attributes:
        name: Short identifier (``rs``, ``ls``, ``nsga2``).
    """

    name: str

    def start(self, context: SearchContext) -> None:
        """Bind to a run: its generator, caches, encoding and repairer."""
        ...

    def ask(self) -> list[PartitionPlan]:
        """The next batch of valid plans to evaluate (never empty)."""
        ...

    def tell(self, plans: Sequence[PartitionPlan], scores: Sequence[PlanScore]) -> None:
        """The scores of the first ``len(plans)`` plans of the last batch, in order."""
        ...
