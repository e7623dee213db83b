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
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

import numpy as np

from explain.solutions import Edge, Solution, solutions
from search.registry import EXPLAINERS
from search.splitter import RandomSplitter
from simulator.cost import CostCache
from simulator.partition import Group, components
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

__all__ = ["AllEdgesExplainer", "DeferredExplainer", "Explainer", "GetSplitter", "SplitChoice",
           "SplitOutcome", "SplitStats", "guided_splitter"]


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
    max_edges: int | None = 4
    keep_baseline: bool = True
    stats: SplitStats = field(default_factory=SplitStats)
    _memo: dict[tuple, list[Group] | None] = field(default_factory=dict, repr=False)
    _rectified: dict[tuple, bool] = field(default_factory=dict, repr=False)
    _explained: dict[tuple, tuple[Edge, ...]] = field(default_factory=dict, repr=False)

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
        """The Table V figures (`SplitStats`) and the settings, for the run's summary."""
        return {**self.stats.to_dict(), "max_edges": self.max_edges,
                "keep_baseline": self.keep_baseline}

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


def guided_splitter(explainer: str, max_edges: int | None = 4,
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
        cats = self._categorise(solutions(self.graph, group, self._explain(group)))
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
        both, one, neither = [], [], []
        for s in found:
            first = all(self.fits(g) for g in s.first)
            second = all(self.fits(g) for g in s.second)
            if first and second:
                both.append(s)
            elif not both:
                (one if first or second else neither).append((s, first) if first or second
                                                            else s)
        return both, one, neither

    def _intermediate(self, candidates: list[tuple[Solution, bool]]) -> list[Group] | None:
        def valid_ops(c: tuple[Solution, bool]) -> int:
            s, first_fits = c
            return sum(len(g) for g in (s.first if first_fits else s.second))

        s, first_fits = max(candidates, key=valid_ops)
        valid, invalid = (s.first, s.second) if first_fits else (s.second, s.first)
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
