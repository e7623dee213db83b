"""Random search (Li & Talwalkar 2020; Mills et al. §IV-B): independent random plans.

Each plan draws one cut probability p ~ U(0, 1), cuts every variable edge with probability p
and is repaired by the splitter; the driver keeps the best. Drawing p per plan samples every
granularity, from one big group (then split by the repair) to layer by layer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from search.problem import PlanScore, SearchContext
from simulator.partition import Group
from simulator.plan import PartitionPlan

__all__ = ["RandomSearch"]


@dataclass
class RandomSearch:
    """Random search; `batch` plans per ask.

    The cuts of the next `lookahead` plans (no more than the budget has left) are drawn ahead
    and the repair is told of them (`Repairer.prepare`): an explanation-guided repair then
    explains the groups of all of them together. A repair draws nothing from the run's
    generator, so the plans are those drawn one at a time, whatever `batch` and `lookahead`
    (with GNNExplainer, up to the rounding of masks optimised in another batch,
    `explain.gnne`).
    """

    batch: int = 10
    lookahead: int = 500
    name: str = field(default="rs", init=False)
    _context: SearchContext | None = field(default=None, init=False, repr=False)
    _pending: deque[list[Group]] = field(default_factory=deque, init=False, repr=False)

    def start(self, context: SearchContext) -> None:
        """Bind to a run."""
        self._context = context
        self._pending.clear()

    def ask(self) -> list[PartitionPlan]:
        """`batch` fresh random plans (`SearchContext.random_plan`)."""
        ctx = self._context
        assert ctx is not None, "start() the algorithm first"
        if len(self._pending) < self.batch:
            left = ctx.remaining
            window = self.lookahead if left is None else min(self.lookahead, left)
            new = [ctx.encoding.groups(ctx.random_cuts())
                   for _ in range(max(window, self.batch) - len(self._pending))]
            ctx.repairer.prepare(new)
            self._pending.extend(new)
        return [ctx.repairer.repair(self._pending.popleft()) for _ in range(self.batch)]

    def tell(self, plans: Sequence[PartitionPlan], scores: Sequence[PlanScore]) -> None:
        """Nothing to learn: the driver tracks the best plan."""
