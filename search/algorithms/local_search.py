"""Local search (Stützle 1999; Mills et al. §IV-B): a population of the top-K plans, each
mutated by one edit per iteration.

The first ask returns K random plans (after the `seeds`, valid plans given by the caller, e.g.
the capped optimum in ``--search auto``; without seeds the run is as before). Every later ask
returns one repaired one-edit mutant of each population member (`search.mutation`: move an op
to a neighbouring group, merge two adjacent groups, split a group), preferring mutants not
evaluated before. `tell` keeps the K best distinct plans seen: ordered by DRAM, or with several
objectives by Pareto rank and then DRAM; ties keep the incumbent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from search.mutation import mutate
from search.pareto import pareto_ranks
from search.problem import PlanScore, SearchContext
from simulator.plan import PartitionPlan

__all__ = ["LocalSearch"]


@dataclass
class LocalSearch:
    """Top-K local search with one-edit mutations (K = 10 as in the paper).

    Attributes:
        k: Population size.
        seeds: Valid plans the first batch starts with (at most `k` are used).
    """

    k: int = 10
    seeds: tuple[PartitionPlan, ...] = ()
    name: str = field(default="ls", init=False)
    _context: SearchContext | None = field(default=None, init=False, repr=False)
    _population: list[tuple[PartitionPlan, PlanScore]] = field(default_factory=list,
                                                               init=False, repr=False)

    def __post_init__(self) -> None:
        if self.k <= 0:
            raise ValueError(f"population size k must be positive, got {self.k}")

    def start(self, context: SearchContext) -> None:
        """Bind to a run and empty the population."""
        self._context = context
        self._population = []

    @property
    def population(self) -> list[PartitionPlan]:
        """The current top-K plans, best first."""
        return [p for p, _ in self._population]

    def ask(self) -> list[PartitionPlan]:
        """The seeds and random plans (K in all) at first, then one mutant per member."""
        ctx = self._context
        assert ctx is not None, "start() the algorithm first"
        if not self._population:
            seeds = list(self.seeds[:self.k])
            return seeds + [ctx.random_plan() for _ in range(self.k - len(seeds))]
        fuseable = ctx.fuseable
        return [mutate(ctx.repairer, plan, fuseable, ctx.rng, ctx.seen)
                for plan, _ in self._population]

    def tell(self, plans: Sequence[PartitionPlan], scores: Sequence[PlanScore]) -> None:
        """Merge the evaluated plans into the population and keep the K best distinct ones."""
        ctx = self._context
        assert ctx is not None, "start() the algorithm first"
        pool: dict[PartitionPlan, PlanScore] = dict(self._population)
        for plan, score in zip(plans, scores, strict=True):
            if score.valid:
                pool.setdefault(plan, score)
        entries = list(pool.items())
        names = ctx.problem.objectives
        values = [s.objectives(names) for _, s in entries]
        ranks = pareto_ranks(values) if len(names) > 1 else [0] * len(entries)
        order = sorted(range(len(entries)), key=lambda i: (ranks[i], values[i][0], i))
        self._population = [entries[i] for i in order[:self.k]]
