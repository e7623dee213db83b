"""``--search auto``: the exact optimum where it is proven within the solver's work caps, else
local search seeded with the best plan the capped solver found.

`AutoSearch` solves the problem exactly at `start` (`search.exact.optimum` under its work caps,
`search.exact.solver.DEFAULT_CAPS`: sets found, down-sets listed, sets costed; a wall-clock
limit only when asked for). When the solve proves the optimum (``optimal``) and the problem has
the single objective ``dram``, it behaves as `search.exact.algorithm.ExactSearch`: it proposes
the optimum and is `done`. Otherwise (a cap was hit, or a second objective asks for a front) it
runs `search.algorithms.local_search.LocalSearch` within the budget, its first population
holding the exact answer (never worse than the baselines the solver started from), so the
search never ends worse. The caps count work, so which path is taken depends on the inputs
alone, never on the machine's load. `report` says which path was taken and why (summary.json
``search_report``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from search.algorithms.local_search import LocalSearch
from search.exact.solver import DEFAULT_CAPS, ExactCaps, ExactResult, optimum
from search.problem import PlanScore, SearchContext
from search.registry import DEFAULT_EXACT_TIME_LIMIT
from simulator.plan import PartitionPlan

__all__ = ["AutoSearch"]


@dataclass
class AutoSearch:
    """The optimum when it is proven in time, else seeded local search.

    Attributes:
        time_limit: Opt-in wall-clock cap on the exact solve (s; None: none, the default).
        caps: Work caps of the exact solve.
        k: Population of the local search.
        name: Registry key, ``auto``.
        result: The exact solver's result, after `start`.
        path: ``exact`` or ``ls``, after `start`.
        reason: Why that path, after `start`.
    """

    time_limit: float | None = DEFAULT_EXACT_TIME_LIMIT
    caps: ExactCaps = DEFAULT_CAPS
    k: int = 10
    name: str = field(default="auto", init=False)
    result: ExactResult | None = field(default=None, init=False, repr=False)
    path: str = field(default="", init=False)
    reason: str = field(default="", init=False)
    _proposed: bool = field(default=False, init=False, repr=False)
    _ls: LocalSearch | None = field(default=None, init=False, repr=False)

    def start(self, context: SearchContext) -> None:
        """Solve exactly under the cap; start local search from the answer if needed."""
        self.result = r = optimum(context.graph, context.cache, caps=self.caps,
                                  time_limit=self.time_limit)
        self._proposed = False
        objectives = tuple(context.problem.objectives)
        if r.optimal and objectives == ("dram",):
            self.path, self._ls = "exact", None
            self.reason = (f"the exact solver proved the optimum ({r.costed:,} of "
                           f"{r.candidates:,} candidate sets costed)")
            return
        self.path = "ls"
        self.reason = (f"{r.cap_reason}; local search seeded with that plan" if not r.optimal
                       else f"objectives {','.join(objectives)}: local search for the front, "
                            "seeded with the exact DRAM optimum")
        self._ls = LocalSearch(self.k, seeds=(r.plan,))
        self._ls.start(context)

    @property
    def done(self) -> bool:
        """True once the proven optimum was proposed (the exact path has nothing more)."""
        return self._ls is None and self._proposed

    def ask(self) -> list[PartitionPlan]:
        """The optimum (exact path), or the local search's next batch."""
        assert self.result is not None, "start() the algorithm first"
        if self._ls is not None:
            return self._ls.ask()
        self._proposed = True
        return [self.result.plan]

    def tell(self, plans: Sequence[PartitionPlan], scores: Sequence[PlanScore]) -> None:
        """Passed on to the local search (the exact path has nothing to learn)."""
        if self._ls is not None:
            self._ls.tell(plans, scores)

    def report(self) -> dict[str, Any]:
        """``auto``'s path (``exact`` or ``ls``), the reason and the time cap."""
        r = self.result
        return {"auto_path": self.path, "reason": self.reason,
                "source": r.source if r else None,
                "reproducible": r.reproducible if r else None,
                "exact_caps": self.caps.to_dict(), "exact_time_limit": self.time_limit}
