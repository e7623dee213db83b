"""A second lower bound for the lazy search: chains of ops cut into intervals (docs/exact.md,
"Chain intervals").

The lazy search's closed-form heuristic (`search.exact.lazy._Heuristic`) counts a tensor's
traffic only where its producer and a reader can never share a group, and per op the weights
it streams at least. Neither sees that ops which may share a group two by two may not all fit
one: along a branch of convolutions the weights add up (LBDF: the weights and a line buffer
within the buffer; BRR: the weights that cannot stay resident re-read by every extra tile), so
the branch is cut somewhere, at a tensor's write and read, or pays its streaming.

A *chain cover* takes, for each fusable op, at most one fusable reader as its successor (the
edges between ops with the most weights first, then the largest tensors), so the fusable ops
fall into paths. The ops of a chain placed at a down-set are a prefix of it, and a group that
runs meets a chain in an interval (a convex set holds the path between two of its ops). A
tensor is the chain's own when its producer and every reader are on it. For an interval I of
a chain, cost(I) counts the reads of the chain's own tensors entering I, the writes of those
leaving it (not a network output's: the heuristic counts those), and what I re-reads at least
beyond its compulsory traffic:

* I *closed* (every neighbour of its ops lies on the chain) and of at most `CLOSED_OPS` ops:
  a group meeting the chain in I is I itself (it is connected), so its own F_D less its
  compulsory traffic, exactly; I does not run: no group meets the chain there;
* else, BRR: the least over the tile counts T at which every op of I may fit
  (`simulator.cost.brr.fit_arrays`) of max(0, W(I) + max act_T - buffer, W(I) - weight
  buffer) x (T - 1), the weights that cannot stay resident (superadditive over the chains a
  group meets, as every op fits at its T); none: I never runs; LBDF: 0. A multi-op interval
  that no group may hold (`_never`) is ruled out with every longer one.

D(i) = the least sum of cost over the cuts of the chain's suffix from position i into
intervals (a DP, each chain once). The bound at a down-set is the heuristic's own terms for
the tensors that are no chain's, the weights, network outputs and unfusable ops, plus D at
each chain's first unplaced position. It is consistent: a group G that runs meets each chain
in an interval [a, b] of the suffix, D(a) <= cost([a, b]) + D(b + 1), and G pays those reads,
writes and re-reads apart from every other term (the chains' intervals of G are disjoint,
their re-read floors add up to at most G's, and a closed interval is all of G). The lazy
search takes, at each down-set, the larger of the two bounds (a maximum of consistent
heuristics is consistent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost.brr import fit_arrays
from simulator.cost.traffic import compulsory_bytes
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from search.exact.candidates import _Growth

__all__ = ["CLOSED_OPS", "ChainBound", "chain_cover"]

CLOSED_OPS = 8
"""The most ops of a closed interval costed exactly (a longer one takes the floor of an open
one: every chain-like network would otherwise cost each of its intervals)."""

NEVER_SPAN = 16
"""The longest interval asked of `_never` (its convex hull costs a pass over the interval's
ops); a longer one is ruled out only by its weights and window floors
(`_Growth._over_weights`, LBDF) or, under BRR, by no tile count fitting every op: a weaker
floor, never a wrong one."""


def chain_cover(graph: ComputeGraph, fusable: list[bool], weights: list[int]) -> list[list[int]]:
    """Paths covering the fusable ops: each op's successor is one of its fusable readers, no
    op has two predecessors; edges taken greedily, the ops with the most weights first (an op
    whose weights force cuts has its neighbours on its chain), then the largest tensors, then
    ids. Chains are listed by their first op."""
    edges = [(p, r) for p in range(len(graph)) if fusable[p]
             for r in graph.successors(p) if fusable[r]]
    edges.sort(key=lambda e: (-max(weights[e[0]], weights[e[1]]), -graph.tensor_elems(e[0]),
                              e))
    nxt: dict[int, int] = {}
    prv: set[int] = set()
    for p, r in edges:
        if p not in nxt and r not in prv:
            nxt[p] = r
            prv.add(r)
    chains = []
    for o in range(len(graph)):
        if fusable[o] and o not in prv:
            chain = [o]
            while chain[-1] in nxt:
                chain.append(nxt[chain[-1]])
            chains.append(chain)
    return chains


class ChainBound:
    """The chains' part of the bound (module docs): `owned_refs` holds the chains' own tensors
    (by producer), and calling it with a down-set gives the sum of D over the chains.

    Args:
        graph: The network.
        growth: The lazy search's `_Growth` (its cost cache, dataflow, weights, unfusable ops).
        never: The lazy search's `_never`: True when no group of two or more ops that may run
            (at or below the incumbent) holds every op of a mask.
    """

    def __init__(self, graph: ComputeGraph, growth: _Growth,
                 never: Callable[[int], bool]) -> None:
        n = len(graph)
        hw, d = growth.hw, growth.hw.dtype_bytes
        fusable = [not growth.unfusable_mask >> o & 1 for o in range(n)]
        self.chains_ops = chain_cover(graph, fusable, growth.weights)
        chain_of = {o: k for k, chain in enumerate(self.chains_ops) for o in chain}
        self.owned_refs = frozenset(
            o for o in range(n) if fusable[o] and graph.successors(o)
            and all(fusable[r] and chain_of[r] == chain_of[o] for r in graph.successors(o)))
        tiled, holds = growth.scheme.tiled, growth.scheme.holds_weights
        limit = hw.buffer_bytes // d
        act, need = fit_arrays(graph, hw) if tiled else (np.zeros((n, 1), np.int64),) * 2
        fits = need <= limit
        self.costed = 0  # closed intervals costed through the cache (counted work)
        self.tables: list[tuple[int, int, list[int]]] = []
        steps = np.arange(act.shape[1], dtype=np.int64)  # T - 1
        wcap = hw.weight_capacity // d
        for chain in self.chains_ops:
            k = len(chain)
            pos = {o: i for i, o in enumerate(chain)}
            on = set(chain)
            size = [graph.tensor_elems(o) * d for o in chain]
            # the chain's own tensors, by position: the last position reading each (its
            # write counts while an interval ends before it), and what each op reads of them
            last = [max(pos[r] for r in graph.successors(o))
                    if o in self.owned_refs and o not in graph.output_set else -1 for o in chain]
            own_in = [sorted({pos[r] for r in graph[o].inputs if r in self.owned_refs
                              and r in pos}) for o in chain]
            shut = [all(r in on for r in graph.successors(o))
                    and all(r < 0 or r in on for r in graph[o].inputs) for o in chain]
            best = [0] * (k + 1)
            for i in range(k - 1, -1, -1):
                options = []
                mask, weights, closed = 0, 0, True
                reads, counted, writes = 0, set(), 0
                ending: dict[int, int] = {}  # writes that stop counting at a position
                top = np.zeros(act.shape[1], dtype=np.int64)
                ok = np.ones(act.shape[1], dtype=bool)
                for j in range(i, k):
                    o = chain[j]
                    mask |= 1 << o
                    weights += growth.weights[o]
                    closed = closed and shut[j]
                    for q in own_in[j]:
                        if q < i and q not in counted:
                            counted.add(q)
                            reads += size[q]
                    if last[j] > j:
                        writes += size[j]
                        ending[last[j]] = ending.get(last[j], 0) + size[j]
                    writes -= ending.pop(j, 0)
                    if j > i and (never(mask) if j - i < NEVER_SPAN else
                                  holds and growth._over_weights(mask, weights * d)):
                        break  # every longer interval holds these ops too
                    if tiled:
                        np.maximum(top, act[o], out=top)
                        ok &= fits[o]
                        if not ok.any():
                            break
                    if closed and j - i < CLOSED_OPS:
                        self.costed += 1
                        ops = chain[i:j + 1]
                        cost = growth.cache.run(tuple(ops))
                        if not cost.fits:
                            continue
                        extra = cost.dram_bytes - compulsory_bytes(graph, ops, d)
                    elif tiled:
                        over = np.maximum(weights + top - limit, 0)
                        if hw.is_split:
                            over = np.maximum(over, weights - wcap)
                        extra = int((over * steps)[ok].min()) * d
                    else:
                        extra = 0
                    options.append(reads + writes + extra + best[j + 1])
                best[i] = min(options, default=0)
            self.tables.append((sum(1 << o for o in chain), k, best))

    def __call__(self, placed: int) -> int:
        """The sum over the chains of D at their first unplaced position."""
        total = 0
        for mask, k, best in self.tables:
            left = mask & ~placed
            if left:
                total += best[k - left.bit_count()]
        return total
