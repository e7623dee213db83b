"""Random search (Li & Talwalkar 2020; Mills et al. §IV-B): independent random plans.

Each plan draws one cut probability p ~ U(0, 1), cuts every variable edge with probability p
and is repaired by the splitter; the driver keeps the best. Drawing p per plan samples every
granularity, from one big group (then split by the repair) to layer by layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from search.problem import PlanScore, SearchContext
from simulator.plan import PartitionPlan

__all__ = ["RandomSearch"]


@dataclass
class RandomSearch:
    """Random search; `batch` plans per ask (results do not depend on it)."""

    batch: int = 10
    name: str = field(default="rs", init=False)
    _context: SearchContext | None = field(default=None, init=False, repr=False)

    def start(self, context: SearchContext) -> None:
        """Bind to a run."""
        self._context = context

    def ask(self) -> list[PartitionPlan]:
        """`batch` fresh random plans."""
        assert self._context is not None, "start() the algorithm first"
        return [self._context.random_plan() for _ in range(self.batch)]

    def tell(self, plans: Sequence[PartitionPlan], scores: Sequence[PlanScore]) -> None:
        """Nothing to learn: the driver tracks the best plan."""
