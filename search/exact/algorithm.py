"""The exact solver behind the ask-and-tell protocol (`search.algorithms.base.SearchAlgorithm`).

`ExactSearch` solves at `start` (`search.exact.optimum` on the run's cost cache) and proposes
the optimum at the first `ask`, together with the plans of the exact two-objective front when
the problem has a second objective (``mbu`` or ``cycles``). It has nothing further to propose:
it sets `done`, and if the driver keeps asking (a plan budget larger than the first batch) it
proposes the optimum again, which the driver's plan memo answers without costing anything, so
the best plan and the front do not change. A driver that honours `done` stops there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from search.exact.solver import (
    DEFAULT_CAPS,
    ExactCaps,
    ExactResult,
    enumerate_space,
    front,
    optimum,
)
from search.problem import PlanScore, SearchContext
from simulator.plan import PartitionPlan

__all__ = ["ExactSearch"]


@dataclass
class ExactSearch:
    """The optimum (and exact front) as a search algorithm.

    Attributes:
        time_limit: Opt-in wall-clock cap on the solve (s; None: none): an answer it cut is
            not reproducible.
        caps: Work caps of the solve (`search.exact.solver.DEFAULT_CAPS`).
        name: Registry key, ``exact``.
        result: The solver's result, after `start`.
        done: True once the optimum was proposed.
    """

    time_limit: float | None = None
    caps: ExactCaps = DEFAULT_CAPS
    name: str = field(default="exact", init=False)
    result: ExactResult | None = field(default=None, init=False, repr=False)
    done: bool = field(default=False, init=False)
    _first: list[PartitionPlan] = field(default_factory=list, init=False, repr=False)

    def start(self, context: SearchContext) -> None:
        """Solve the run's problem on its cost cache."""
        graph, cache = context.graph, context.cache
        self.result = optimum(graph, cache, caps=self.caps, time_limit=self.time_limit)
        self._first = [self.result.plan]
        second = [o for o in context.problem.objectives[1:] if o in ("mbu", "cycles")]
        if len(context.problem.objectives) == 2 and second:
            points = front(graph, cache, enumerate_space(graph, cache), f"dram,{second[0]}")
            self._first += [p.plan for p in points if p.plan != self.result.plan]
        self.done = False

    def ask(self) -> list[PartitionPlan]:
        """The optimum (and front plans) first; afterwards the optimum again."""
        assert self.result is not None, "start() the algorithm first"
        if self.done:
            return [self.result.plan]
        self.done = True
        return list(self._first)

    def tell(self, plans: Sequence[PartitionPlan], scores: Sequence[PlanScore]) -> None:
        """Nothing to learn: the answer is fixed at `start`."""

    def report(self) -> dict[str, Any]:
        """The solve's work caps, its opt-in time limit and where the answer came from."""
        r = self.result
        return {"source": r.source if r else None, "reproducible": r.reproducible if r else None,
                "exact_caps": self.caps.to_dict(), "exact_time_limit": self.time_limit}
