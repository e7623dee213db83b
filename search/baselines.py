"""Reference baselines every search result is compared with.

* ``lbl``: layer by layer, every op alone (the no-fusion reference);
* ``lower_bound``: the compulsory traffic (network inputs and outputs, all weights once), a bound
  no plan beats; it has no plan;
* ``segment_dp``: the optimal plan among *segment plans* (contiguous runs of the topological
  order, each split into its weakly connected components), by dynamic programming;
* ``greedy``: DNNFusion's greedy fusion-plan generation (Niu et al., PLDI 2021, §4.3) with its
  mapping-type rules (Table 3), bounded by the buffer;
* ``greedy_fit``: the same growth without the mapping-type rules (every fusion that fits and
  lowers DRAM is taken), to show what the rules cost on an accelerator with layer fusion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from simulator.cost import CostCache, Failure, evaluate_plan
from simulator.partition import Group, is_acyclic
from simulator.plan import PartitionPlan, layer_by_layer, plan_of, segment_plan
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph, MappingType

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["MAPPING_RULES", "Baseline", "SegmentDP", "combine_mappings", "greedy_fusion",
           "reference_baselines", "segment_dp"]


# --- segment DP ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentDP:
    """The optimal segment plan.

    Attributes:
        plan: The plan (`simulator.plan.segment_plan` of `cuts`).
        cuts: Op ids where a segment starts (0 implied).
        dram_bytes: Its DRAM traffic, whole network (equals `evaluate_plan`'s).
        longest_segment: Most ops of any feasible segment the DP met.
        capped: True if some segment of `max_len` ops was feasible (longer segments were not
            considered; the plan is optimal among segments of <= `max_len` ops, as always).
    """

    plan: PartitionPlan
    cuts: tuple[int, ...]
    dram_bytes: int
    longest_segment: int
    capped: bool


def segment_dp(graph: ComputeGraph, cache: CostCache, max_len: int | None = 64) -> SegmentDP:
    """The segment plan with the least DRAM traffic whose groups all run, among segments of at
    most `max_len` ops.

    best[j] = min over i < j of best[i] + F_D(segment [i, j)), where a segment's F_D is the sum
    over its weakly connected components (unfusable ops alone run layer by layer, tiled to the
    buffer; with another op they make the segment infeasible, the searches' convention).
    Segment costs are additive, so the DP is exact over segment plans. From each start i the
    segment grows one op at a time (only the component that the new op joins changes, one
    group cost per step).

    F_beta is not monotone (adding an op can lower it: a tensor becomes internal, the tile count
    changes), so a segment that does not fit may fit again once it grows: the growth goes on
    past infeasible segments (they are only not used by the DP) and stops early only where no
    longer segment from i can run, because a component that cannot run keeps a reason that
    persists in every superset (an unfusable op with another op, excluded by the searches'
    convention although such a group may fit, F_beta not being monotone; LBDF weights over the
    buffer; BRR-incompatible; see docs/exact.md, "Pruning") or can no longer change (no op of it
    feeds an op after the segment, so no later op joins it). Otherwise it grows to `max_len` ops: at
    most n * `max_len` group costs, memoised in `cache`.

    `max_len` bounds the segments where nothing stops the growth: the default 64 is above the
    longest feasible segment of every zoo network at the paper's 128-256 KiB (see
    docs/search.md); ``capped`` reports when a feasible segment reached it. None removes the
    bound (O(n^2) group costs).
    """
    n = len(graph)
    unfusable = frozenset(cache.unfusable)
    cap = n if max_len is None else max(1, min(n, int(max_len)))
    best = [0] + [None] * n
    back = [0] * (n + 1)
    longest, capped = 1, False
    for i in range(n):
        if best[i] is None:  # no segment plan reaches op i (an op that cannot run at all)
            continue
        for j, seg_cost in _segment_costs(graph, cache, unfusable, i, min(n, i + cap)):
            if seg_cost is None:
                continue
            longest = max(longest, j - i + 1)
            capped = capped or (j - i + 1 == cap and j + 1 < n)
            if best[j + 1] is None or best[i] + seg_cost < best[j + 1]:
                best[j + 1], back[j + 1] = best[i] + seg_cost, i
    if best[n] is None:
        raise ValueError(f"no segment plan of {graph.name!r} runs: some op cannot run even "
                         "alone at this buffer")
    cuts = _cuts(back, n)
    return SegmentDP(segment_plan(graph, cuts), cuts, int(best[n]), longest, capped)


_PERSISTENT = frozenset({Failure.WEIGHTS_OVER_BUFFER, Failure.BRR_INCOMPATIBLE,
                         Failure.NOT_SINGLE_OP})
"""Failures every superset of a group keeps (docs/exact.md, "Pruning")."""


def _segment_costs(graph: ComputeGraph, cache: CostCache, unfusable: frozenset[int], i: int,
                   stop: int):
    """Yield (j, F_D of segment [i, j]) for j = i..stop-1, None where it cannot run; stop
    once no longer segment from i can run (see `segment_dp`)."""
    comp_of: dict[int, int] = {}
    comps: dict[int, tuple[Group, int]] = {}
    reach: dict[int, int] = {}  # component -> last op any of its ops feeds
    failing: set[int] = set()  # components that do not fit (yet)
    total = 0
    for j in range(i, stop):
        ids = sorted({comp_of[p] for p in graph.predecessors(j) if p >= i})
        ops = tuple(sorted([j, *(o for c in ids for o in comps[c][0])]))
        if len(ops) > 1 and any(o in unfusable for o in ops):
            return
        cost = cache.run(ops)
        if not cost.fits and cost.failure in _PERSISTENT:
            return
        total += cost.dram_bytes - sum(comps.pop(c)[1] for c in ids)
        failing.difference_update(ids)
        comps[j] = (ops, cost.dram_bytes)
        reach[j] = max([max(graph.successors(j), default=-1),
                        *(reach.pop(c) for c in ids)])
        for o in ops:
            comp_of[o] = j
        if not cost.fits:
            failing.add(j)
        if any(reach[c] <= j for c in failing):
            return
        yield j, None if failing else total


def _cuts(back: list[int], n: int) -> tuple[int, ...]:
    cuts, j = [], n
    while j > 0:
        j = back[j]
        if j > 0:
            cuts.append(j)
    return tuple(sorted(cuts))


# --- DNNFusion greedy ------------------------------------------------------------------------

_O2O, _O2M, _M2M, _REO, _SHU = (MappingType.ONE_TO_ONE, MappingType.ONE_TO_MANY,
                                MappingType.MANY_TO_MANY, MappingType.REORGANIZE,
                                MappingType.SHUFFLE)

MAPPING_RULES: dict[tuple[MappingType, MappingType], tuple[str, MappingType | None]] = {
    **{(_O2O, t): ("green", t) for t in MappingType},
    (_O2M, _O2O): ("green", _O2M), (_O2M, _O2M): ("red", None), (_O2M, _M2M): ("red", None),
    (_O2M, _REO): ("yellow", _O2M), (_O2M, _SHU): ("yellow", _O2M),
    (_M2M, _O2O): ("green", _M2M), (_M2M, _O2M): ("yellow", _M2M), (_M2M, _M2M): ("red", None),
    (_M2M, _REO): ("yellow", _M2M), (_M2M, _SHU): ("yellow", _M2M),
    (_REO, _O2O): ("green", _REO), (_REO, _O2M): ("yellow", _O2M),
    (_REO, _M2M): ("yellow", _M2M), (_REO, _REO): ("green", _REO),
    (_REO, _SHU): ("green", _REO),
    (_SHU, _O2O): ("green", _SHU), (_SHU, _O2M): ("yellow", _O2M),
    (_SHU, _M2M): ("yellow", _M2M), (_SHU, _REO): ("green", _REO),
    (_SHU, _SHU): ("green", _SHU),
}
"""DNNFusion Table 3: (first op, second op) -> (verdict, mapping type of the fused op).

Green fusions are taken, red ones never; yellow ones need profiling, here the cost model: they
are taken when they lower DRAM traffic. Our reading of the table: One-to-One fuses with
anything (the result takes the other's type); One-to-Many and Many-to-Many decide the fused
type and do not fuse with each other or themselves, except Many-to-Many followed by One-to-Many
(yellow); Reorganize and Shuffle fuse freely with each other and with One-to-One.
"""


def combine_mappings(first: MappingType, second: MappingType) -> tuple[str, MappingType | None]:
    """DNNFusion's verdict and fused mapping type for `first` feeding `second`."""
    return MAPPING_RULES[(first, second)]


@dataclass
class _Growth:
    """State of the greedy: a label per op (its group), and the ops already in a block."""

    graph: ComputeGraph
    cache: CostCache
    rules: bool
    unfusable: frozenset[int]
    label: list[int] = field(init=False)
    done: list[bool] = field(init=False)

    def __post_init__(self) -> None:
        self.label = list(range(len(self.graph)))
        self.done = [False] * len(self.graph)

    def acyclic(self) -> bool:
        return is_acyclic(self.graph, self.label)

    def grow(self, seed: int) -> list[int]:
        block, kind = [seed], self.graph[seed].mapping
        for forward in (True, False):
            block, kind = self._explore(block, kind, forward)
        for o in block:
            self.done[o] = True
        return block

    def _neighbours(self, o: int, forward: bool) -> tuple[int, ...]:
        return self.graph.successors(o) if forward else self.graph.predecessors(o)

    def _explore(self, block: list[int], kind: MappingType,
                 forward: bool) -> tuple[list[int], MappingType]:
        frontier = sorted({m for o in block for m in self._neighbours(o, forward)})
        tried: set[int] = set()
        while frontier:
            c = frontier.pop(0)
            if c in tried or c in block or self.done[c] or c in self.unfusable:
                continue
            tried.add(c)
            fused = self._try(block, kind, c, forward)
            if fused is not None:
                block, kind = sorted([*block, c]), fused
                frontier = sorted({*frontier, *self._neighbours(c, forward)})
        return block, kind

    def _try(self, block: list[int], kind: MappingType, c: int,
             forward: bool) -> MappingType | None:
        other = self.graph[c].mapping
        verdict, fused = combine_mappings(*((kind, other) if forward else (other, kind))) \
            if self.rules else ("yellow", kind)
        if verdict == "red":
            return None
        trial = tuple(sorted([*block, c]))
        cost = self.cache.group(trial)
        if not cost.fits:
            return None
        apart = self.cache.group(tuple(block)).dram_bytes + self.cache.group((c,)).dram_bytes
        if verdict == "yellow" and cost.dram_bytes >= apart:
            return None
        self.label[c] = self.label[block[0]]
        if not self.acyclic():
            self.label[c] = c
            return None
        return fused


def greedy_fusion(graph: ComputeGraph, cache: CostCache,
                  mapping_rules: bool = True) -> PartitionPlan:
    """DNNFusion's greedy fusion plan (Niu et al. 2021, §4.3, Listing 1), buffer-bounded.

    Seeds are taken in order: One-to-One ops first, smallest output first (the "minimum
    intermediate result"), then the remaining fuseable ops the same way, so every op ends in a
    block. From an unassigned seed the block grows along successors, then predecessors, one
    immediate neighbour at a time in id order; a neighbour joins when the mapping-type rules
    allow it (`MAPPING_RULES`; red stops that branch, yellow needs lower DRAM), the grown group
    fits the buffer and the graph of groups stays acyclic. Unfusable ops stay alone.

    Args:
        graph: The network.
        cache: Group costs of (graph, hardware, dataflow).
        mapping_rules: False treats every combination as yellow (fuse whenever it fits and
            lowers DRAM): a buffer-greedy plan without DNNFusion's operator-level rules.
    """
    growth = _Growth(graph, cache, mapping_rules, frozenset(cache.unfusable))
    seeds = sorted((o for o in range(len(graph)) if o not in growth.unfusable),
                   key=lambda o: (graph[o].mapping is not _O2O, graph[o].output_elems, o))
    for s in seeds:
        if not growth.done[s]:
            growth.grow(s)
    groups: dict[int, list[int]] = {}
    for o, lab in enumerate(growth.label):
        groups.setdefault(lab, []).append(o)
    return plan_of(groups.values())


# --- all references --------------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """A reference figure: a plan and its cost, or a bound without a plan.

    Attributes:
        name: ``lbl``, ``lower_bound``, ``segment_dp``, ``greedy`` or ``greedy_fit``.
        plan: The plan (None for the lower bound).
        dram_bytes: DRAM traffic, whole network.
        dram_bytes_fuseable: DRAM traffic over the fuseable ops (the paper's scope).
        mbu_bytes, cycles, energy_pj, groups: The plan's figures (None without a plan).
        info: Extra facts (the DP's longest segment, ...).
    """

    name: str
    plan: PartitionPlan | None
    dram_bytes: int
    dram_bytes_fuseable: int
    mbu_bytes: int | None = None
    cycles: int | None = None
    energy_pj: float | None = None
    groups: int | None = None
    info: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures (stable keys; the plan is left out)."""
        return {"dram_bytes": self.dram_bytes, "dram_bytes_fuseable": self.dram_bytes_fuseable,
                "mbu_bytes": self.mbu_bytes, "cycles": self.cycles,
                "energy_pj": self.energy_pj, "groups": self.groups, **self.info}


def _of_plan(name: str, graph: ComputeGraph, plan: PartitionPlan, hw: HardwareConfig,
             scheme: str | Scheme, cache: CostCache, **info: Any) -> Baseline:
    cost = evaluate_plan(graph, plan, hw, scheme, cache)
    if not cost.valid:
        raise RuntimeError(f"baseline {name} is invalid: {cost.violations[0]}")
    return Baseline(name, plan, cost.dram_bytes, cost.dram_bytes_fuseable, cost.mbu,
                    cost.cycles, cost.energy_pj, len(plan), info)


def reference_baselines(graph: ComputeGraph, hw: HardwareConfig, scheme: str | Scheme,
                        cache: CostCache | None = None) -> dict[str, Baseline]:
    """The reference baselines of a (network, hardware, dataflow), by name (module docs)."""
    cache = cache or CostCache(graph, hw, scheme)
    dp = segment_dp(graph, cache)
    refs = cache.references
    return {
        "lbl": _of_plan("lbl", graph, layer_by_layer(graph), hw, scheme, cache),
        "lower_bound": Baseline("lower_bound", None, refs["lower_bound"],
                                refs["lower_bound_fuseable"]),
        "segment_dp": _of_plan("segment_dp", graph, dp.plan, hw, scheme, cache,
                               longest_segment=dp.longest_segment, capped=dp.capped),
        "greedy": _of_plan("greedy", graph, greedy_fusion(graph, cache), hw, scheme, cache),
        "greedy_fit": _of_plan("greedy_fit", graph, greedy_fusion(graph, cache, False), hw,
                               scheme, cache),
    }
