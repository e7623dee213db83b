"""NSGA-II (Deb et al. 2002; Mills et al. §IV-B) on pymoo 0.6, driven by ask and tell.

The genome is the edge-cut vector of `search.encoding` (binary, one bit per fuseable edge).
Sampling draws each individual like random search (one cut probability per plan); variation is
pymoo's two-point crossover (neighbouring bits are neighbouring edges of the network) and
bit-flip mutation (one flip per genome on average); a pymoo `Repair` decodes every offspring,
runs the context's repairer (convexity repair, then the splitter on groups that do not fit;
the splitter's baseline repair when its own gives a plan already evaluated or already in the
batch, `Repairer.repair_new`) and writes the repaired plan back into the genome. Objectives
are the problem's (``dram``, or ``dram`` with ``mbu`` or ``cycles``); survival is pymoo's rank
and crowding.

pymoo is driven by `Algorithm.ask` / `Algorithm.tell` rather than `minimize`, so the driver
controls the budget exactly (pymoo's ``n_eval`` termination overshoots by a generation), and
its `random_state` is a generator spawned from the run's, so every pymoo operator draws from
the run's seed and never from global state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.evaluator import Evaluator
from pymoo.core.population import Population
from pymoo.core.problem import Problem
from pymoo.core.repair import Repair
from pymoo.core.sampling import Sampling
from pymoo.core.termination import NoTermination
from pymoo.operators.crossover.pntx import TwoPointCrossover
from pymoo.operators.crossover.ux import UniformCrossover
from pymoo.operators.mutation.bitflip import BitflipMutation
from pymoo.problems.static import StaticProblem

from search.problem import PlanScore, SearchContext
from simulator.plan import PartitionPlan

__all__ = ["NSGA2Search"]


class _CutProblem(Problem):
    """The binary problem pymoo sees; evaluation happens outside, in the driver."""

    def __init__(self, n_var: int, n_obj: int) -> None:
        super().__init__(n_var=n_var, n_obj=n_obj, xl=0, xu=1, vtype=bool)


class _CutSampling(Sampling):
    """Random-search sampling: one cut probability per individual."""

    def _do(self, problem: Problem, n_samples: int, *args: Any,
            random_state: np.random.Generator, **kwargs: Any) -> np.ndarray:
        p = random_state.random((n_samples, 1))
        return random_state.random((n_samples, problem.n_var)) < p


class _SplitterRepair(Repair):
    """Decode, repair with the run's repairer, write the valid plan back into the genome."""

    def __init__(self, context: SearchContext) -> None:
        super().__init__()
        self.context = context
        self.plans: dict[bytes, PartitionPlan] = {}

    def _do(self, problem: Problem, X: np.ndarray, **kwargs: Any) -> np.ndarray:
        ctx = self.context
        out = np.empty_like(X, dtype=bool)
        batch = set(self.plans.values())
        for k, x in enumerate(X.astype(bool)):
            plan = ctx.repairer.repair_new(ctx.encoding.groups(x),
                                           lambda p: p in batch or ctx.seen(p))
            batch.add(plan)
            out[k] = ctx.encoding.encode(plan)
            self.plans[out[k].tobytes()] = plan
        return out


@dataclass
class NSGA2Search:
    """NSGA-II with population `pop_size` (K = 10 as in the paper)."""

    pop_size: int = 10
    name: str = field(default="nsga2", init=False)
    _context: SearchContext | None = field(default=None, init=False, repr=False)
    _algorithm: NSGA2 | None = field(default=None, init=False, repr=False)
    _repair: _SplitterRepair | None = field(default=None, init=False, repr=False)
    _problem: _CutProblem | None = field(default=None, init=False, repr=False)
    _asked: Population | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.pop_size < 2:
            raise ValueError(f"NSGA-II needs a population of at least 2, got {self.pop_size}")

    def start(self, context: SearchContext) -> None:
        """Set up pymoo's NSGA-II on the run's encoding, repairer and generator."""
        n_var = context.encoding.n_vars
        self._context = context
        self._repair = _SplitterRepair(context)
        self._problem = _CutProblem(n_var, len(context.problem.objectives))
        self._algorithm = NSGA2(
            pop_size=self.pop_size,
            sampling=_CutSampling(),
            crossover=TwoPointCrossover() if n_var >= 3 else UniformCrossover(),
            mutation=BitflipMutation(prob=1.0, prob_var=1.0 / max(n_var, 1)),
            repair=self._repair,
            eliminate_duplicates=True,
            seed=context.rng.spawn(1)[0],
        )
        self._algorithm.setup(self._problem, termination=NoTermination(), verbose=False)

    def ask(self) -> list[PartitionPlan]:
        """pymoo's next offspring (the initial population first), as repaired plans.

        When duplicate elimination leaves pymoo without offspring (a tiny search space, or a
        converged population), random immigrants are asked instead.
        """
        algo, repair = self._algorithm, self._repair
        assert algo is not None and repair is not None, "start() the algorithm first"
        repair.plans.clear()
        pop = algo.ask()
        if pop is None or len(pop) == 0:
            algo.termination.force_termination = False
            pop = self._immigrants()
        self._asked = pop
        return [repair.plans[x.astype(bool).tobytes()] for x in pop.get("X")]

    def _immigrants(self) -> Population:
        algo, problem = self._algorithm, self._problem
        X = _CutSampling().do(problem, self.pop_size, random_state=algo.random_state).get("X")
        pop = Population.new("X", X)
        return self._repair.do(problem, pop, random_state=algo.random_state)

    def tell(self, plans: Sequence[PartitionPlan], scores: Sequence[PlanScore]) -> None:
        """Give pymoo the objective values of the evaluated offspring."""
        algo, ctx = self._algorithm, self._context
        assert algo is not None and ctx is not None and self._asked is not None
        pop = self._asked[:len(plans)]
        F = np.array([s.objectives(ctx.problem.objectives) for s in scores], dtype=float)
        Evaluator().eval(StaticProblem(self._problem, F=F), pop)
        algo.tell(infills=pop)
