"""The cost of a graph for the substitution search: the DRAM of its best segment plan.

OCGGS (`graph-substitution-ocggs.txt`, §2.1) takes any cost ``cost: G -> R+``; here it is the
DRAM traffic (bytes, whole network) of the optimal *segment plan* of the graph on the machine
and dataflow at hand: `search.baselines.segment_dp(graph, cache).dram_bytes`. The segment DP is
exact over segment plans and fast, so it stands in for "the DRAM of the graph's best plan"
while the search compares thousands of graphs; the final graph then goes to the partition
search.

`GraphCost` is that cost as a callable (graph -> float), memoised by graph. The searches take any
such callable, so tests can use a toy cost.

Costing many graphs that differ in a few ops: a rewrite leaves most fusion groups of the graph
as they were, only renumbered. Under LBDF (and LBL) a group's cost depends on its ops (every
field but id and name), the edges among them, the order of the tensors entering it and which of
its ops' tensors leave it -- nothing else of the graph. `SharedCostCache` keys group costs by
exactly that (`group_key`), so one memo serves every graph the search meets: a group costed in
one graph is not costed again in the next. BRR's group costs also read graph-wide facts (the
ops a network output is reachable from, the readers of a tensor), so under BRR every graph gets
a plain `CostCache` of its own (exact, slower).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING

from search.baselines import segment_dp
from simulator.cost import CostCache, GroupCost, lbl
from simulator.cost.evaluate import _Context
from simulator.cost.traffic import compulsory_bytes
from simulator.memo import Memo
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph, Op

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["GraphCost", "GraphCostFn", "GroupKey", "SharedCostCache", "group_key", "own_fields"]

GraphCostFn = Callable[[ComputeGraph], float]
"""A graph cost: any callable from a graph to a number (lower is better)."""

GroupKey = tuple
"""What a group's cost depends on (`group_key`)."""

_OWN_FIELDS = tuple(f.name for f in fields(Op) if f.name not in ("id", "name", "inputs"))
"""Every field of an op that is its own (not where it sits in a graph)."""

_OWN = attrgetter(*_OWN_FIELDS)

def group_key(graph: ComputeGraph, ops: tuple[int, ...],
              own: tuple[int, ...] | None = None) -> GroupKey:
    """What the LBDF/LBL cost of the group `ops` (ascending ids) of `graph` depends on.

    Per op, in id order: its own fields (all but id, name and inputs; or `own[o]`, a number
    standing for them), its inputs as positions (an op of the group: its rank in `ops`; a
    tensor entering the group: ``-1 - k`` for the k-th of `graph.inputs_of(ops)`), and whether
    its tensor leaves the group (a network output or read outside). Two groups with equal keys,
    in any graphs, have equal costs.
    """
    pos = {o: k for k, o in enumerate(ops)}
    entering = {r: -1 - k for k, r in enumerate(sorted(
        {r for o in ops for r in graph[o].inputs if r not in pos}))}  # = graph.inputs_of(ops)
    outputs = graph.output_set
    parts = []
    for o in ops:
        op = graph[o]
        local = tuple(pos[r] if r in pos else entering[r] for r in op.inputs)
        leaves = o in outputs or not pos.keys() >= set(graph.successors(o))
        parts.append((own_fields(op) if own is None else own[o], local, leaves))
    return tuple(parts)


def own_fields(op: Op) -> tuple:
    """Every field of `op` that is its own: all but id, name and inputs."""
    return _OWN(op)


class SharedCostCache(CostCache):
    """A `CostCache` whose group costs come from a memo shared by many graphs (`group_key`).

    Only for dataflows whose group costs are local (LBDF, LBL); the costs it returns are those
    `CostCache` computes, with this graph's op ids.
    """

    def __init__(self, graph: ComputeGraph, hw: HardwareConfig, scheme: str | Scheme,
                 shared: Memo[GroupKey, GroupCost], interned: dict[tuple, int]) -> None:
        """Bind a (graph, hardware, dataflow) to the shared group costs `shared`; `interned`
        numbers the distinct `own_fields` of ops (shared too: it makes keys cheap to hash)."""
        super().__init__(graph, hw, scheme)
        if not self.scheme.capabilities.local:
            raise ValueError(f"group costs of {self.scheme} are not local to the group")
        self._shared_costs = shared
        self._own = tuple(interned.setdefault(own_fields(op), len(interned)) for op in graph)

    def _compute(self, key: tuple[int, ...]) -> GroupCost:
        cost = self._shared_costs.get(group_key(self.graph, key, self._own),
                                      lambda _: self._fn(self.graph, key, self.hw))
        return cost if cost.ops == key else replace(cost, ops=key)

    def _lbl(self, o: int) -> GroupCost:
        key = (o,)
        cost = self._shared_costs.get(("lbl", group_key(self.graph, key, self._own)),
                                      lambda _: lbl.group_cost(self.graph, key, self.hw))
        return cost if cost.ops == key else replace(cost, ops=key)

    @cached_property
    def _shared(self) -> _Context:
        """What `CostCache` computes once per graph (`simulator.cost.evaluate._context`: the
        unfusable ops, how they run, the references), with every single-op cost taken from the
        shared memo instead of computed again for each graph."""
        graph, n = self.graph, len(self.graph)
        lbl_costs = [self._lbl(o) for o in range(n)]
        unfusable = tuple(o for o in range(n)
                          if self.scheme.searchable and not self.group((o,)).fits)
        fuseable = sorted(set(range(n)) - set(unfusable))
        d = self.hw.dtype_bytes
        references = {
            "lower_bound": compulsory_bytes(graph, range(n), d),
            "lower_bound_fuseable": compulsory_bytes(graph, fuseable, d) if fuseable else 0,
            "lbl_dram": sum(c.dram_bytes for c in lbl_costs),
            "lbl_dram_fuseable": sum(lbl_costs[o].dram_bytes for o in fuseable),
        }
        alone = {o: replace(lbl_costs[o], runs_alone=True) for o in unfusable}
        return _Context(unfusable, alone, references)


class GraphCost:
    """DRAM bytes (whole network) of the graph's optimal segment plan on `hw` under `scheme`,
    memoised by graph: ``segment_dp(graph, cache).dram_bytes``.

    Attributes:
        hw, scheme: The machine and the dataflow.
        graphs: The memo of graph costs (its misses are the graphs costed).
        groups: The memo of group costs shared by every graph (LBDF, LBL; None under BRR).
    """

    def __init__(self, hw: HardwareConfig, scheme: str | Scheme) -> None:
        self.hw, self.scheme = hw, Scheme.parse(scheme)
        self.graphs: Memo[ComputeGraph, float] = Memo()
        self.groups: Memo[GroupKey, GroupCost] | None = \
            Memo() if self.scheme.capabilities.local else None
        self._interned: dict[tuple, int] = {}

    def cache(self, graph: ComputeGraph) -> CostCache:
        """A cost cache of `graph` on this machine (sharing group costs where exact)."""
        if self.groups is None:
            return CostCache(graph, self.hw, self.scheme)
        return SharedCostCache(graph, self.hw, self.scheme, self.groups, self._interned)

    def _compute(self, graph: ComputeGraph) -> float:
        return float(segment_dp(graph, self.cache(graph)).dram_bytes)

    def __call__(self, graph: ComputeGraph) -> float:
        return self.graphs.get(graph, self._compute)

    def __repr__(self) -> str:
        return (f"GraphCost({self.scheme}, buffer {self.hw.buffer_bytes:,} B; "
                f"{self.graphs.misses} graphs costed)")
