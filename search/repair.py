"""Repair of proposed plans: the splitter applied to every group that does not fit.

`Repairer.repair` turns any partition into connected groups into a *valid* plan (DESIGN.md):
the graph of groups is made acyclic (`make_acyclic`), every group that does not fit is replaced
by the splitter's pieces, and the two steps repeat until nothing changes. Each round only
refines the partition and single ops always run, so the loop ends.

Split results are memoised by group (the paper caches its recursive splitter the same way).
The generator a split draws from is derived from the run's generator and the group itself, so a
group is split the same way whenever it comes up in a run: memoisation changes nothing but
speed, and results do not depend on the order in which groups are met.

A splitter may name a *baseline* splitter (its ``baseline`` attribute, e.g. the explanation-
guided splitter's random split). `Repairer.repair(..., baseline=True)` then repairs with the
baseline instead; local search and NSGA-II use it when the splitter's own repair gives back a
plan already evaluated (`Repairer.repair_new`), so that a deterministic, DRAM-minimising repair
does not spend the budget re-proposing known plans. Splitters without a baseline (the random
one) are unaffected.

A splitter may also take *hints* (a true ``prepares`` attribute and a ``prepare(graph, groups,
cache)`` method): before each round of a repair it is told every group of the round not split
yet, and `Repairer.prepare` tells it the groups of plans to be repaired later (random search
draws its plans ahead). The explanation-guided splitter over GNNExplainer then explains them in
batches. A hint changes no result, only when the work is done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cached_property

import numpy as np

from search.splitter import Splitter
from simulator.cost import CostCache
from simulator.memo import Memo
from simulator.partition import Group, components, is_acyclic, make_acyclic
from simulator.plan import PartitionPlan, plan_of
from simulator.workload.graph import ComputeGraph

__all__ = ["Repairer", "SplitterError"]


class SplitterError(RuntimeError):
    """A splitter broke its contract (a bug in the splitter, not bad user input)."""


class Repairer:
    """Repairs plans of one (graph, hardware, dataflow) with one splitter; memoises splits.

    Attributes:
        graph: The network.
        cache: Group costs.
        splitter: Applied to groups that do not fit.
        hits, misses: Split-memo lookups answered from / added to the memo.
        baseline: The splitter's baseline splitter, or None.
        diversified: Plans `repair_new` took from the baseline repair because the splitter's
            own repair gave a plan already evaluated.
    """

    def __init__(self, graph: ComputeGraph, cache: CostCache, splitter: Splitter,
                 key: int) -> None:
        """Bind a splitter.

        Args:
            graph: The network.
            cache: Group costs of (graph, hardware, dataflow).
            splitter: The repair of groups that do not fit.
            key: Non-negative integer drawn once from the run's generator; with a group's ops
                it seeds the generator of that group's split.

        The splitter's `supports` is asked once, where it joins a problem
        (`search.problem.SearchProblem`), not again here.
        """
        self.graph, self.cache, self.splitter, self.key = graph, cache, splitter, int(key)
        self._memo: Memo[Group, tuple[Group, ...]] = Memo()
        self._baseline_memo: Memo[Group, tuple[Group, ...]] = Memo()
        self.baseline: Splitter | None = getattr(splitter, "baseline", None)
        self.diversified = 0

    @property
    def hits(self) -> int:
        """Split requests answered from the memos."""
        return self._memo.hits + self._baseline_memo.hits

    @property
    def misses(self) -> int:
        """Split requests that ran a splitter."""
        return self._memo.misses + self._baseline_memo.misses

    @property
    def hit_rate(self) -> float:
        """Fraction of split requests answered from the memo."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def runs(self, group: Group) -> bool:
        """True if the group can execute (`CostCache.run`): it fits, or it is an unfusable op
        alone (LBL)."""
        return self.cache.run(group).fits

    def split(self, group: Group, baseline: bool = False) -> tuple[Group, ...]:
        """The splitter's (memoised, checked) pieces of a group that does not fit; with
        `baseline`, the baseline splitter's (drawn from the same per-group generator)."""
        use_baseline = baseline and self.baseline is not None
        splitter, memo = ((self.baseline, self._baseline_memo) if use_baseline
                          else (self.splitter, self._memo))
        return memo.get(group, lambda g: self._split(splitter, g))

    def _split(self, splitter: Splitter, group: Group) -> tuple[Group, ...]:
        rng = np.random.default_rng([self.key, len(group), *group])
        pieces = tuple(sorted(tuple(sorted(p)) for p in
                              splitter.split(self.graph, group, self.cache, rng)))
        self._check(splitter, group, pieces)
        return pieces

    def _check(self, splitter: Splitter, group: Group, pieces: Sequence[Group]) -> None:
        name = splitter.name
        if sorted(o for p in pieces for o in p) != list(group):
            raise SplitterError(f"splitter {name!r} returned pieces that do not cover the "
                                f"group starting at op {group[0]} exactly")
        for p in pieces:
            if len(components(self.graph, p)) != 1:
                raise SplitterError(f"splitter {name!r} returned a disconnected piece {p}")
            if not self.runs(p):
                raise SplitterError(f"splitter {name!r} returned a piece that does not fit: "
                                    f"{p}")

    def repair(self, groups: Iterable[Sequence[int]], baseline: bool = False) -> PartitionPlan:
        """A valid plan from weakly connected, disjoint groups covering every op; with
        `baseline`, groups that do not fit are split by the baseline splitter (if any)."""
        return self._repair(make_acyclic(self.graph, [tuple(g) for g in groups]), baseline)

    @cached_property
    def _hints(self) -> bool:
        """True if the splitter takes hints: a true ``prepares`` attribute and a
        ``prepare(graph, groups, cache)`` method (the explanation-guided splitter over an
        explainer that explains in batches)."""
        return bool(getattr(self.splitter, "prepares", False))

    def prepare(self, plans: Sequence[Iterable[Sequence[int]]]) -> None:
        """A hint that these plans will be repaired next: a splitter that takes hints is told
        every group of their first round (the explanation-guided one then explains together
        what it will need). Changes no result."""
        if self._hints:
            self._prepare([g for groups in plans
                           for g in make_acyclic(self.graph, [tuple(g) for g in groups])], False)

    def _prepare(self, groups: Sequence[Group], baseline: bool) -> None:
        if baseline or not self._hints:
            return
        todo = list(dict.fromkeys(g for g in groups if g not in self._memo))
        if todo:
            self.splitter.prepare(self.graph, todo, self.cache)

    def _repair(self, current: list[Group], baseline: bool) -> PartitionPlan:
        while True:
            self._prepare(current, baseline)
            out: list[Group] = []
            changed = False
            for g in current:
                if self.runs(g):
                    out.append(g)
                else:
                    out.extend(self.split(g, baseline))
                    changed = True
            if not changed:
                return plan_of(out)
            current = out if is_acyclic(self.graph, out) else make_acyclic(self.graph, out)

    def repair_new(self, groups: Sequence[Sequence[int]],
                   known: Callable[[PartitionPlan], bool]) -> PartitionPlan:
        """`repair`, or the baseline repair when `repair` gives a `known` plan and the
        baseline's is not known (counted in `diversified`)."""
        plan = self.repair(groups)
        if self.baseline is None or not known(plan):
            return plan
        other = self.repair(groups, baseline=True)
        if other == plan or known(other):
            return plan
        self.diversified += 1
        return other
