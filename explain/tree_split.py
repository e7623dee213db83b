"""Recursive greedy tree splitting (Mills et al. §III-D, Algorithm 1) as a search repair.

`GetSplitter` implements `search.splitter.Splitter`. For a group that does not fit, an
explainer ranks the group's edges; each explained edge gives solutions (`explain.solutions`),
cuts of the group into two sides. The solutions fall into three categories:

1. both sides fit: the preferred end point; the one with the least F_D(side 1) + F_D(side 2)
   wins, and once one exists the other categories are not considered (they need three or
   more groups, so more DRAM traffic);
2. one side fits: the solution whose fitting side has the most ops is kept and its other side
   is split recursively;
3. neither side fits: both sides of every such solution are split recursively and the result
   with the least DRAM traffic wins.

A side may fall apart into several connected pieces (a cut through a branch); a side fits when
all its pieces do. Results are memoised by group. When no solution leads to groups that all
fit, the splitter falls back to `RandomSplitter`; the fallbacks are counted. Because sides
are explained again as the recursion descends, Algorithm 1 nearly always ends in fitting groups;
the *rectify rate* (Table V: "an initial invalid fusion group successfully broken up into
smaller subgraphs according to the explanatory edges") therefore measures the explanation
itself: the share of invalid groups that cutting at every topological threshold spanned by the
top explained edges, and nothing else, breaks into pieces that all fit. It is reported with
the counts of F_beta and F_D queries and the time spent explaining.

Baseline guard (`keep_baseline`, on by default; a departure from the paper, which tries the GET
split first and the random split only when it fails): the paper's baseline split of the same
group, drawn from the same generator the random repair would be given, is computed too, and the
cheaper of the two (least F_D summed over the pieces) is returned; ties keep Algorithm 1's. A
repaired group therefore never costs more DRAM than under the random repair, so with the same
seed every plan a random search proposes costs at most what it costs with the random repair.
How often the baseline was cheaper is counted (`baseline_kept`). `GetSplitter.split_outcome`
returns, with the pieces, which split was kept (`SplitChoice`) and the explanation Algorithm 1
cut the group by, so a report shows exactly what was done.

Explaining ahead (`GetSplitter.prepare`): with an explainer that explains many groups at once
(`BatchExplainer`: GNNExplainer, one optimisation over them all) and whose answer for a group
depends on nothing else, the groups Algorithm 1 will explain are explained before it runs, a
level of its recursion at a time, each level in one batch (`_prefetch`, which takes the same
decisions with the same functions). The search's repair hints whole rounds and random search
whole windows of plans (`search.repair`). Algorithm 1 then runs unchanged and finds every
explanation ready: splits and counters are those it makes alone.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

import numpy as np

from explain import defaults
from explain.solutions import Edge, Solution, solutions
from search.registry import EXPLAINERS
from search.splitter import RandomSplitter
from simulator.cost import CostCache
from simulator.partition import Group, components
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

__all__ = ["AllEdgesExplainer", "BatchExplainer", "DeferredExplainer", "Explainer", "GetSplitter",
           "SplitChoice", "SplitOutcome", "SplitStats", "guided_splitter"]


@runtime_checkable
class Explainer(Protocol):
    """Ranks the edges of an invalid group by how much they make it invalid.

    Attributes:
        name: Identifier (``"gnne"``, ``"pg"``, ``"rg"``, ``"alledges"``).
    """

    name: str

    def supports(self, scheme: Scheme) -> bool:
        """True if the explainer can explain groups of dataflow `scheme`."""
        ...

    def explain(self, graph: ComputeGraph, ops: Group, cache: CostCache,
                rng: np.random.Generator) -> list[Edge]:
        """Edges of the group (pairs (i, j) with j a successor of i, both in `ops`), most
        responsible first."""
        ...


@runtime_checkable
class BatchExplainer(Explainer, Protocol):
    """An explainer that explains many groups at once (GNNExplainer: one optimisation over
    them all). Its answer for a group must not depend on the batch, nor on the order of calls,
    nor on a generator: `GetSplitter` explains ahead what Algorithm 1 will ask (`prepare`)."""

    def explain_many(self, graph: ComputeGraph, groups: Sequence[Group],
                     cache: CostCache) -> list[list[Edge]]:
        """`explain` of every group, in order."""
        ...


@dataclass(frozen=True)
class AllEdgesExplainer:
    """No explanation: every edge of the group is a candidate, in topological order."""

    name: str = "alledges"

    def supports(self, scheme: Scheme) -> bool:
        """Every dataflow."""
        return True

    def explain(self, graph: ComputeGraph, ops: Group, cache: CostCache,
                rng: np.random.Generator) -> list[Edge]:
        """All group edges, sorted."""
        return sorted(graph.internal_edges(ops))


@dataclass
class SplitStats:
    """Counters of one splitter.

    Attributes:
        requests: Invalid groups the search asked to split.
        rectified: Of those, groups the top explanation alone breaks into fitting pieces.
        fallbacks: Groups handed to the random splitter.
        baseline_kept: Groups where the baseline's random split was cheaper than Algorithm 1's
            and was returned instead (`GetSplitter.keep_baseline`).
        fbeta_queries, fd_queries: Cost-model queries made by the tree search.
        explain_seconds: Time spent in the explainer.
        explanations: Explainer calls.
    """

    requests: int = 0
    rectified: int = 0
    fallbacks: int = 0
    baseline_kept: int = 0
    fbeta_queries: int = 0
    fd_queries: int = 0
    explain_seconds: float = 0.0
    explanations: int = 0

    @property
    def rectify_rate(self) -> float:
        """Share of invalid groups the explanation rectified (Table V)."""
        return self.rectified / self.requests if self.requests else 0.0

    def to_dict(self) -> dict[str, float]:
        """The counters and the rate, for summaries."""
        return {"requests": self.requests, "rectified": self.rectified,
                "rectify_rate": self.rectify_rate, "fallbacks": self.fallbacks,
                "baseline_kept": self.baseline_kept,
                "fbeta_queries": self.fbeta_queries, "fd_queries": self.fd_queries,
                "explain_seconds": self.explain_seconds, "explanations": self.explanations}


class SplitChoice(Enum):
    """Which split of a group `GetSplitter` returned."""

    FITS = "fits"
    """The group fits: nothing to split."""
    ALGORITHM_1 = "algorithm-1"
    """Algorithm 1's split, by the explanation."""
    BASELINE = "baseline"
    """The baseline random split, cheaper in DRAM than Algorithm 1's (`keep_baseline`)."""
    FALLBACK = "fallback"
    """The random split: Algorithm 1 found no split into fitting groups."""


@dataclass(frozen=True)
class SplitOutcome:
    """One split request: the pieces returned and how they were chosen.

    Attributes:
        pieces: The fitting groups returned, sorted.
        choice: Which split they are.
        explained: The explanation Algorithm 1 cut the group by (its top `max_edges` edges,
            most responsible first); empty when the group fits.
        algorithm_1: Algorithm 1's pieces, sorted; None when the group fits or Algorithm 1
            found no split into fitting groups.
    """

    pieces: tuple[Group, ...]
    choice: SplitChoice
    explained: tuple[Edge, ...]
    algorithm_1: tuple[Group, ...] | None


@dataclass
class GetSplitter:
    """Explanation-guided recursive splitter (Algorithm 1) behind the `Splitter` protocol.

    Attributes:
        explainer: Ranks the edges of an invalid group.
        max_edges: Explained edges considered per group (the explainer's top ones); None for
            all of them (the `alledges` baseline).
        keep_baseline: Also compute the random splitter's pieces (from a copy of the same
            generator) and return them when they cost less DRAM (see the module).
        stats: Counters (see `SplitStats`).
    """

    explainer: Explainer
    max_edges: int | None = defaults.MAX_EDGES
    keep_baseline: bool = True
    stats: SplitStats = field(default_factory=SplitStats)
    _memo: dict[tuple, list[Group] | None] = field(default_factory=dict, repr=False)
    _rectified: dict[tuple, bool] = field(default_factory=dict, repr=False)
    _explained: dict[tuple, tuple[Edge, ...]] = field(default_factory=dict, repr=False)
    _prepared: set[tuple] = field(default_factory=set, repr=False)
    _solutions: dict[tuple, list[Solution]] = field(default_factory=dict, repr=False)

    def _solutions_of(self, graph: ComputeGraph, cache: CostCache, group: Group,
                      edges: list[Edge]) -> list[Solution]:
        """`solutions` of a group's explained edges, memoised (`prepare` and Algorithm 1 ask
        for the same)."""
        key = (cache.graph, cache.hw, cache.scheme, group, tuple(edges))
        if key not in self._solutions:
            self._solutions[key] = solutions(graph, group, edges)
        return self._solutions[key]

    @property
    def baseline(self) -> RandomSplitter | None:
        """With `keep_baseline`, the random splitter: local search and NSGA-II repair with it
        instead when this splitter's repair gives a plan already evaluated
        (`search.repair.Repairer.repair_new`); None for Algorithm 1 alone."""
        return RandomSplitter() if self.keep_baseline else None

    @property
    def name(self) -> str:
        """The explainer's name (the repair's name in summaries)."""
        return self.explainer.name

    def supports(self, scheme: Scheme) -> bool:
        """What the explainer supports."""
        return self.explainer.supports(scheme)

    def report(self) -> dict[str, Any]:
        """The Table V figures (`SplitStats`) and the settings, for the run's summary, with the
        explainer's own figures when it has any (GNNExplainer's masks optimised and reused)."""
        made = getattr(self.explainer, "_made", self.explainer)  # not made: nothing to report
        own = getattr(made, "report", None)
        return {**self.stats.to_dict(), "max_edges": self.max_edges,
                "keep_baseline": self.keep_baseline, **(own() if callable(own) else {})}

    @property
    def prepares(self) -> bool:
        """True if `prepare` does anything: the explainer explains in batches (GNNExplainer)."""
        return _batch_explainer(self.explainer) is not None

    def prepare(self, graph: ComputeGraph, groups: Sequence[Group], cache: CostCache) -> None:
        """A hint that `groups` will be split next (`search.repair.Repairer` gives every group
        of a round, random search every group of an ask): with an explainer that explains in
        batches, every group Algorithm 1 will explain for them is explained now, a level of
        the recursion at a time, each level in one batch. Splits do not change, only the time
        they take; other explainers ignore it."""
        explainer = _batch_explainer(self.explainer)
        if explainer is None or not groups:
            return
        start = time.perf_counter()
        _prefetch(self, graph, cache, groups, explainer)
        self.stats.explain_seconds += time.perf_counter() - start

    def split(self, graph: ComputeGraph, ops: Group, cache: CostCache,
              rng: np.random.Generator) -> list[Group]:
        """Fitting groups covering `ops`: Algorithm 1, or the random fallback; with
        `keep_baseline`, the random split instead when it costs less DRAM."""
        return list(self.split_outcome(graph, ops, cache, rng).pieces)

    def split_outcome(self, graph: ComputeGraph, ops: Group, cache: CostCache,
                      rng: np.random.Generator) -> SplitOutcome:
        """`split`, with which split was kept and the explanation Algorithm 1 cut by."""
        group = tuple(sorted(ops))
        tree = _Tree(self, graph, cache, rng)
        if tree.fits(group):
            return SplitOutcome((group,), SplitChoice.FITS, (), None)
        baseline = (RandomSplitter().split(graph, group, cache, copy.deepcopy(rng))
                    if self.keep_baseline else None)
        self.prepare(graph, [group], cache)
        self.stats.requests += 1
        key = (cache.graph, cache.hw, cache.scheme, group)
        if key not in self._rectified:
            self._rectified[key] = tree.rectified_by_explanation(group)
        self.stats.rectified += self._rectified[key]
        found = tree.split_invalid(group)
        explained = self._explained.get(key, ())
        if found is None:  # the fallback is the baseline split when the guard computed it
            self.stats.fallbacks += 1
            pieces = (baseline if baseline is not None
                      else RandomSplitter().split(graph, group, cache, rng))
            return SplitOutcome(tuple(sorted(pieces)), SplitChoice.FALLBACK, explained, None)
        algorithm_1 = tuple(sorted(found))
        if baseline is not None and _dram(cache, baseline) < _dram(cache, found):
            self.stats.baseline_kept += 1
            return SplitOutcome(tuple(sorted(baseline)), SplitChoice.BASELINE, explained,
                                algorithm_1)
        return SplitOutcome(algorithm_1, SplitChoice.ALGORITHM_1, explained, algorithm_1)


def guided_splitter(explainer: str, max_edges: int | None = defaults.MAX_EDGES,
                    keep_baseline: bool = True) -> GetSplitter:
    """The explanation-guided repair over `search.registry.EXPLAINERS` entry `explainer` (the
    factory the registry's explanation-guided repairs name). The explainer is made when the
    repair is first used (`DeferredExplainer`), so that creating the repair, as a run does
    before checking its other inputs, imports neither torch nor torch_geometric.

    Raises:
        InputError: unknown explainer.
    """
    return GetSplitter(DeferredExplainer(EXPLAINERS.get(explainer).name), max_edges,
                       keep_baseline)


@dataclass
class DeferredExplainer:
    """The `search.registry.EXPLAINERS` entry `name`, made on first use: the GNN and the
    explainers (torch, torch_geometric) load when a run asks the repair whether it supports its
    dataflow or to explain a group, not when the repair is created."""

    name: str
    _made: Explainer | None = field(default=None, repr=False)

    def made(self) -> Explainer:
        """The explainer (made now, once)."""
        if self._made is None:
            self._made = EXPLAINERS.create(self.name)
        return self._made

    def supports(self, scheme: Scheme) -> bool:
        """What the explainer supports."""
        return self.made().supports(scheme)

    def explain(self, graph: ComputeGraph, ops: Group, cache: CostCache,
                rng: np.random.Generator) -> list[Edge]:
        """The explainer's ranking of the group's edges."""
        return self.made().explain(graph, ops, cache, rng)


def _dram(cache: CostCache, groups: Sequence[Group]) -> int:
    return sum(cache.group(g).dram_bytes for g in groups)


class _Tree:
    """One request: Algorithm 1 over the splitter's memo (keyed by graph, hardware, dataflow
    and group)."""

    def __init__(self, owner: GetSplitter, graph: ComputeGraph, cache: CostCache,
                 rng: np.random.Generator) -> None:
        self.owner, self.graph, self.cache, self.rng = owner, graph, cache, rng
        self.stats = owner.stats
        self.explained: dict[Group, list[Edge]] = {}

    def fits(self, group: Group) -> bool:
        self.stats.fbeta_queries += 1
        return self.cache.run(group).fits

    def dram(self, groups: Sequence[Group]) -> int:
        self.stats.fd_queries += len(groups)
        return sum(self.cache.group(g).dram_bytes for g in groups)

    def split(self, group: Group) -> list[Group] | None:
        return [group] if self.fits(group) else self.split_invalid(group)

    def split_invalid(self, group: Group) -> list[Group] | None:
        key = (self.cache.graph, self.cache.hw, self.cache.scheme, group)
        if key not in self.owner._memo:  # pieces are always smaller: no re-entrance
            self.owner._memo[key] = self._split(group)
        return self.owner._memo[key]

    def _split(self, group: Group) -> list[Group] | None:
        if len(group) == 1:
            return None
        cats = self._categorise(self.owner._solutions_of(self.graph, self.cache, group,
                                                         self._explain(group)))
        if cats[0]:
            best = min(cats[0], key=lambda s: self.dram(s.groups))
            return list(best.groups)
        if cats[1]:
            return self._intermediate(cats[1])
        options = [self._split_all(s.groups) for s in cats[2]]
        options = [o for o in options if o is not None]
        return min(options, key=self.dram) if options else None

    def _explain(self, group: Group) -> list[Edge]:
        if group not in self.explained:
            start = time.perf_counter()
            edges = self.owner.explainer.explain(self.graph, group, self.cache, self.rng)
            self.stats.explain_seconds += time.perf_counter() - start
            self.stats.explanations += 1
            k = self.owner.max_edges
            self.explained[group] = edges if k is None else edges[:k]
            # The first explanation of a group is the one its memoised split was cut by.
            key = (self.cache.graph, self.cache.hw, self.cache.scheme, group)
            self.owner._explained.setdefault(key, tuple(self.explained[group]))
        return self.explained[group]

    def rectified_by_explanation(self, group: Group) -> bool:
        """True if the explanation alone breaks the group into fitting pieces: cut at every
        topological threshold its edges span (Table V's rectify rate)."""
        cuts = {t for i, j in self._explain(group) for t in group if i <= t < j}
        if not cuts:
            return False
        bounds = sorted(cuts)
        segments, start = [], 0
        for t in bounds:
            end = group.index(t) + 1
            segments.append(group[start:end])
            start = end
        segments.append(group[start:])
        return all(self.fits(p) for seg in segments if seg for p in components(self.graph, seg))

    def _categorise(self, found: list[Solution]) -> tuple[list, list, list]:
        return _categorise(found, self.fits)

    def _intermediate(self, candidates: list[tuple[Solution, bool]]) -> list[Group] | None:
        valid, invalid = _intermediate_sides(candidates)
        rest = self._split_all(invalid)
        return None if rest is None else list(valid) + rest

    def _split_all(self, groups: Sequence[Group]) -> list[Group] | None:
        out: list[Group] = []
        for g in groups:
            pieces = self.split(g)
            if pieces is None:
                return None
            out.extend(pieces)
        return out


def _categorise(found: list[Solution], fits: Callable[[Group], bool],
                ) -> tuple[list, list, list]:
    """Algorithm 1's three categories of `found`: both sides fit; one side fits, as
    (solution, first side fits); neither side fits."""
    both, one, neither = [], [], []
    for s in found:
        first = all(fits(g) for g in s.first)
        second = all(fits(g) for g in s.second)
        if first and second:
            both.append(s)
        elif not both:
            (one if first or second else neither).append((s, first) if first or second
                                                        else s)
    return both, one, neither


def _intermediate_sides(candidates: list[tuple[Solution, bool]],
                        ) -> tuple[tuple[Group, ...], tuple[Group, ...]]:
    """The (fitting, not fitting) sides of the category-2 solution whose fitting side has the
    most ops (the first such)."""
    def valid_ops(c: tuple[Solution, bool]) -> int:
        s, first_fits = c
        return sum(len(g) for g in (s.first if first_fits else s.second))

    s, first_fits = max(candidates, key=valid_ops)
    return (s.first, s.second) if first_fits else (s.second, s.first)


def _batch_explainer(explainer: Explainer) -> BatchExplainer | None:
    """The explainer behind `explainer` (made, if deferred) when it explains groups in batches,
    else None."""
    made = getattr(explainer, "made", None)
    inner = made() if callable(made) else explainer
    batches = isinstance(inner, BatchExplainer) and getattr(inner, "batches", True)
    return inner if batches else None


def _prefetch(owner: GetSplitter, graph: ComputeGraph, cache: CostCache,
              groups: Sequence[Group], explainer: BatchExplainer) -> None:
    """Explain, a level of Algorithm 1's recursion at a time and each level in one batch,
    every group that splitting `groups` will explain: the group itself, then the pieces its
    explanation leads to (the category-2 solution's side that does not fit, or both sides of
    every category-3 solution), and so on. The same decisions as `_Tree`, from the same
    functions, without counting queries; groups whose split is memoised are not explained again
    (nor what lies below them). A group explained here and not needed (a category-3 branch
    abandoned when a sibling piece cannot be split) costs time, never a different result:
    the explainer's answer for a group does not depend on when or with what it is computed."""
    def fits(g: Group) -> bool:
        return cache.run(g).fits

    def key(g: Group) -> tuple:
        return (cache.graph, cache.hw, cache.scheme, g)

    k = owner.max_edges
    seen: set[Group] = set()
    frontier: list[Group] = []
    for g in groups:
        g = tuple(sorted(g))
        done = key(g) in owner._prepared or (key(g) in owner._memo and key(g) in owner._rectified)
        if g not in seen and len(g) > 1 and not done and not fits(g):
            seen.add(g)
            frontier.append(g)
    while frontier:
        nxt: list[Group] = []
        for g, edges in zip(frontier, explainer.explain_many(graph, frontier, cache),
                            strict=True):
            owner._prepared.add(key(g))  # explained, and below it all is by the call's end
            if key(g) in owner._memo:
                continue
            both, one, neither = _categorise(
                owner._solutions_of(graph, cache, g, edges if k is None else edges[:k]), fits)
            if both:
                continue
            pieces = (_intermediate_sides(one)[1] if one
                      else [p for s in neither for p in s.groups])
            for p in pieces:
                if (p not in seen and len(p) > 1 and key(p) not in owner._prepared
                        and key(p) not in owner._memo and not fits(p)):
                    seen.add(p)
                    nxt.append(p)
        frontier = nxt
