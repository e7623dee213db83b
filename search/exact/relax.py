"""A proven lower bound of the LBDF optimum from a MILP relaxation (HiGHS), and its plan.

Where the lazy search stops at a work cap (wide graphs whose groups are limited by their
weights: HRNet's branches at large buffers), its frontier bounds the optimum from below but
settles too few states to close the gap. Under LBDF a group that runs costs exactly its
compulsory traffic (weights once, every entering tensor once, every leaving tensor once) and
holds all its weights on chip, so the plan problem relaxes to a *labelling*: give every fusable
op a label in 0..K-1, non-decreasing along every edge (through unfusable ops too), the weights
of each label within the weight buffer, and charge a tensor one write when a reader has a
later label than its producer (or it must be written anyway) and one read per label other
than its producer's holding a reader. `labelling_bound` minimises that with
`scipy.optimize.milp`.

Where that labelling's pieces are not a valid plan (line buffers are not in the relaxation),
a second model looks for one: it adds a variable per edge, "cut" (its ends in different
groups: always across labels, possibly within one), so the groups are the pieces the uncut
edges join, and it cuts off, round after round, each group of the last solution that no valid
plan holds (over the buffer, not convex, on a cycle of groups): "not this set as a group",
sum of its inner edges' cuts + sum of (1 - cut) over its boundary edges >= 1. P's own
labelling (cuts where P's groups meet) satisfies each, so every round's dual bound is a
bound too; its first valid solution is the relaxation's plan.

**Why it bounds every plan** (docs/exact.md, "The labelling relaxation"). Take a valid plan P,
its fusable groups in a topological order of its graph of groups, and pack them into labels
*next fit*: a group joins the current label while the label's weights stay within the weight
buffer, else it opens the next label. Each group fits alone (its weights are within the buffer
under LBDF), every edge goes from a group to the same or a later one, so labels never
decrease along an edge; and two consecutive labels hold more than the buffer together, so P
needs at most K = 2 ceil(W / buffer) - 1 labels for fusable weights W. A tensor written by P
is charged at most its write, and each label holding a reader outside the producer's holds a
group of P that reads it: the labelling costs at most P's DRAM. So the MILP's optimum, and
HiGHS's dual bound when its node cap stops it, is at most the optimum. When the labels'
connected pieces form a valid plan that runs and costs the bound, that plan is optimal.

The caps count work (`RELAXATION_NODES` branch-and-bound nodes), never time, and HiGHS is
deterministic: the same inputs give the same bound and plan on any machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

import numpy as np

from search.exact.candidates import _Closure
from simulator.cost import CostCache
from simulator.plan import FusionGroup, PartitionPlan
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

__all__ = ["RELAXATION_LABELS", "RELAXATION_NODES", "RELAXATION_ROUNDS", "Relaxation",
           "labelling_bound"]

RELAXATION_NODES = 1_000
"""Branch-and-bound nodes HiGHS may explore in the first MILP, and again in all the cut
model's rounds together (work caps: a bound reached within them is proven)."""

RELAXATION_ROUNDS = 8
"""MILPs solved at most: the labelling, then (where its groups are not a valid plan) the cut
model once per solution whose groups cannot all run."""

RELAXATION_LABELS = 7
"""The most labels the relaxation is built with (beyond, HiGHS needs minutes per hundred
nodes: hrnet_w18_small at 256 KiB has 15); `labelling_bound` returns None above it."""

_SLACK = 0.25
"""Bytes the bound gives up to HiGHS's floating point before it is rounded up (the objective
is an integer count of bytes, a multiple of the coefficients' gcd)."""


@dataclass(frozen=True)
class Relaxation:
    """What the labelling relaxation proved.

    Attributes:
        bound_bytes: A proven lower bound of the least DRAM of any valid plan.
        plan: A valid plan whose groups all run (the first labelling's, or the cut model's
            first valid solution), or None when none was found within the rounds.
        labels: K, the labels the relaxation had.
        optimal: HiGHS proved the first labelling optimal (else its node cap stopped it).
        nodes: Branch-and-bound nodes HiGHS explored, over every round.
        rounds: MILPs solved (the labelling, then the cut model's rounds).
    """

    bound_bytes: int
    plan: PartitionPlan | None
    labels: int
    optimal: bool
    nodes: int
    rounds: int = 1


class _Model:
    """Sparse rows lo <= A x <= hi over named variables."""

    def __init__(self) -> None:
        self.n = 0
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.cost: list[float] = []
        self.binary: list[int] = []
        self.upper: list[float] = []

    def var(self, cost: float = 0.0, binary: bool = False, upper: float = 1.0) -> int:
        self.cost.append(cost)
        self.binary.append(int(binary))
        self.upper.append(upper)
        self.n += 1
        return self.n - 1

    def row(self, terms: dict[int, float], lo: float, hi: float) -> None:
        r = len(self.lo)
        for c, v in terms.items():
            if v:
                self.rows.append(r)
                self.cols.append(c)
                self.vals.append(v)
        self.lo.append(lo)
        self.hi.append(hi)


def labelling_bound(graph: ComputeGraph, cache: CostCache, *,
                    max_nodes: int = RELAXATION_NODES,
                    max_labels: int | None = RELAXATION_LABELS,
                    max_rounds: int = RELAXATION_ROUNDS) -> Relaxation | None:
    """The labelling relaxation of the LBDF plan problem of `cache` (module docstring).

    None for a dataflow whose groups need not hold their weights (`Scheme.holds_weights`:
    BRR streams them, so weights bound nothing there), when every op must run alone, or when
    it needs more than `max_labels` labels (None: any).
    """
    scheme = Scheme.parse(cache.scheme)
    if not scheme.holds_weights or scheme.mixed or not scheme.searchable:
        return None  # every group's weights within the buffer is what the labels rely on
    problem = _Problem(graph, cache)
    if not problem.fusable or (max_labels is not None and problem.k_labels > max_labels):
        return None
    model = problem.model(edges=False)
    res = model.solve(max_nodes)
    if res.status == 2:  # a valid plan always exists (every fusable op alone) and is labelled
        raise RuntimeError(f"the labelling relaxation of {graph.name!r} is infeasible with "
                           f"{problem.k_labels} labels: a bug (every valid plan has one)")
    bound, nodes, rounds = model.bound(res), model.nodes(res), 1
    plan = None
    if res.x is not None:
        groups, bad = problem.groups(model, res.x)
        if not bad:
            plan = _partition(groups)
    if plan is None and rounds < max_rounds:
        model = problem.model(edges=True)
        left = max_nodes  # the cut model's rounds share one more budget of nodes
        while rounds < max_rounds and left > 0:
            rounds += 1
            again = model.solve(left)
            used = max(1, model.nodes(again))
            nodes, left = nodes + used, left - used
            bound = max(bound, model.bound(again))
            if again.x is None:
                break
            groups, bad = problem.groups(model, again.x)
            if not bad:
                plan = _partition(groups)
                break
            for group_set in bad:  # no valid plan holds all of them as groups
                model.forbid(group_set)
    return Relaxation(bound_bytes=int(bound), plan=plan, labels=problem.k_labels,
                      optimal=res.status == 0, nodes=nodes, rounds=rounds)


def _partition(groups: list[tuple[int, ...]]) -> PartitionPlan:
    return PartitionPlan(tuple(FusionGroup(g) for g in sorted(groups)))


class _Problem:
    """What both models share: the fusable ops, their weights, the readers of every tensor,
    the fixed traffic, and the reachability that convexity is checked with."""

    def __init__(self, graph: ComputeGraph, cache: CostCache) -> None:
        self.graph, self.cache = graph, cache
        hw, d = cache.hw, cache.hw.dtype_bytes
        self.d = d
        self.unfusable = set(cache.unfusable)
        self.fusable = [v for v in range(len(graph)) if v not in self.unfusable]
        self.cap = hw.weight_capacity if hw.is_split else hw.buffer_bytes
        self.weights = {v: graph[v].weight_reads * d for v in self.fusable}
        self.k_labels = max(1, 2 * math.ceil(sum(self.weights.values()) / self.cap) - 1)
        self.outputs = set(graph.output_set)
        self.readers: dict[int, list[int]] = {}
        for op in graph:
            for ref in dict.fromkeys(op.inputs):
                self.readers.setdefault(ref, []).append(op.id)
        self.edges = [(u, r) for r in self.fusable for u in dict.fromkeys(graph[r].inputs)
                      if u >= 0 and u not in self.unfusable]
        closure = _Closure.of(graph)  # reflexive ancestors and descendants, as bitmasks
        self.anc, self.desc = closure.anc, closure.desc

    def model(self, edges: bool) -> _Labels:
        """The labelling MILP (`edges`: with a cut variable per edge, the second model)."""
        graph, d, k_labels, fusable = self.graph, self.d, self.k_labels, self.fusable
        unfusable = self.unfusable
        m = _Labels(k_labels)
        # the fixed part: the unfusable ops at their own cost, every fusable op's weights, and
        # the writes every plan pays (network outputs, tensors an unfusable op reads)
        m.fixed = sum(int(self.cache.run((v,)).dram_bytes) for v in unfusable)
        m.fixed += sum(self.weights.values())
        # z[v][k] = [label(v) <= k], k < K - 1 (z[v][K-1] = 1): non-decreasing in k
        z = m.z = {v: [m.var(binary=True) for _ in range(k_labels - 1)] for v in fusable}
        x = m.x
        for v in fusable:
            for k in range(k_labels - 2):
                m.row({z[v][k]: 1.0, z[v][k + 1]: -1.0}, -np.inf, 0.0)
        # labels never decrease along an edge, through unfusable ops too
        above = _fusable_producers(graph, unfusable)
        for r in fusable:
            for u in above[r]:
                for k in range(k_labels - 1):
                    m.row({z[r][k]: 1.0, z[u][k]: -1.0}, -np.inf, 0.0)
        # each label's weights within the weight buffer
        for k in range(k_labels):
            terms: dict[int, float] = {}
            const = 0
            for v in fusable:
                t, c = x(v, k)
                for key, val in t.items():
                    terms[key] = terms.get(key, 0.0) + self.weights[v] * val
                const += self.weights[v] * c
            m.row(terms, -np.inf, self.cap - const)
        # an edge is cut when its reader has a later label (the second model: or when it
        # joins two groups of one label; the first: never within a label)
        for u, r in self.edges:
            e = m.cut[(u, r)] = m.var()
            for k in range(k_labels - 1):
                m.row({e: 1.0, z[u][k]: -1.0, z[r][k]: 1.0}, 0.0, np.inf)
        # tensors: a write when an edge from it is cut, a read per other label holding a
        # reader (the second model: and at least one when an edge from it is cut)
        for ref, rs in self.readers.items():
            inner = [r for r in rs if r not in unfusable]
            size = graph.tensor_elems(ref) * d
            produced = ref >= 0 and ref not in unfusable
            forced = produced and (ref in self.outputs or len(inner) < len(rs))
            if forced:
                m.fixed += size  # written in every plan
            if not inner:
                continue
            if produced and len(inner) == 1:
                # one reader: it is read exactly when it is written for it
                m.cost[m.cut[(ref, inner[0])]] = size if forced else 2 * size
                continue
            if produced and not forced:
                w = m.var(size)
                for r in inner:
                    m.row({w: 1.0, m.cut[(ref, r)]: -1.0}, 0.0, np.inf)
            reads = m.var(size, upper=np.inf)  # one per label: up to K
            total = {reads: 1.0}
            for k in range(k_labels):
                p = m.var()
                total[p] = -1.0
                own, own_c = x(ref, k) if produced else ({}, 0)
                for r in inner:
                    t, c = x(r, k)
                    terms = {p: 1.0}
                    for key, val in t.items():
                        terms[key] = terms.get(key, 0.0) - val
                    for key, val in own.items():
                        terms[key] = terms.get(key, 0.0) + val
                    m.row(terms, c - own_c, np.inf)
            m.row(total, 0.0, np.inf)
            if produced and edges:
                for r in inner:
                    m.row({reads: 1.0, m.cut[(ref, r)]: -1.0}, 0.0, np.inf)
        for v in fusable:  # a fusable network output no other op reads is still written
            if v in self.outputs and v not in self.readers:
                m.fixed += graph[v].output_elems * d
        if not edges:  # the first model: one label, one group (no edge cut within a label):
            # cut <= label(r) - label(u) = sum over k of z[u][k] - z[r][k]
            for (u, r), e in m.cut.items():
                terms = {e: 1.0}
                for k in range(k_labels - 1):
                    terms[z[u][k]] = terms.get(z[u][k], 0.0) - 1.0
                    terms[z[r][k]] = terms.get(z[r][k], 0.0) + 1.0
                m.row(terms, -np.inf, 0.0)
        m.edges = edges
        return m

    def groups(self, m: _Labels,
               values: np.ndarray) -> tuple[list[tuple[int, ...]], list[list[tuple[int, ...]]]]:
        """(the groups of a solution, the unfusable ops alone too; the sets of groups no valid
        plan holds together: a group over the buffer or not convex, the groups of a cycle)."""
        parent = {v: v for v in self.fusable}

        def find(v: int) -> int:
            while parent[v] != v:
                parent[v] = parent[parent[v]]
                v = parent[v]
            return v

        for (u, r), e in m.cut.items():
            if values[e] < 0.5:
                parent[find(u)] = find(r)
        found: dict[int, list[int]] = {}
        for v in self.fusable:
            found.setdefault(find(v), []).append(v)
        groups = [tuple(g) for g in found.values()]
        bad = []
        for g in groups:
            mask = sum(1 << v for v in g)
            below = above = 0
            for v in g:
                below |= self.desc[v]
                above |= self.anc[v]
            if below & above != mask or (len(g) > 1 and not self.cache.group(g).fits):
                bad.append([g])
        groups += [(v,) for v in sorted(self.unfusable)]
        if not bad:
            bad = self._cycles(groups)
        return groups, bad

    def _cycles(self, groups: list[tuple[int, ...]]) -> list[list[tuple[int, ...]]]:
        """The fusable groups of each cycle of the graph of groups."""
        import networkx as nx

        of = {v: i for i, g in enumerate(groups) for v in g}
        dag = nx.DiGraph()
        dag.add_nodes_from(range(len(groups)))
        for op in self.graph:
            for u in op.inputs:
                if u >= 0 and of[u] != of[op.id]:
                    dag.add_edge(of[u], of[op.id])
        return [[groups[i] for i in sorted(part) if groups[i][0] not in self.unfusable]
                for part in nx.strongly_connected_components(dag) if len(part) > 1]


class _Labels(_Model):
    """A labelling MILP: z (labels), the edges' cut variables, the fixed bytes."""

    def __init__(self, k_labels: int) -> None:
        super().__init__()
        self.k_labels = k_labels
        self.fixed = 0
        self.z: dict[int, list[int]] = {}
        self.cut: dict[tuple[int, int], int] = {}
        self.edges = False
        self.scale = 1

    def x(self, v: int, k: int) -> tuple[dict[int, float], int]:
        """[label(v) == k] as (terms, constant)."""
        terms: dict[int, float] = {}
        const = 0
        if k == self.k_labels - 1:
            const += 1
        else:
            terms[self.z[v][k]] = 1.0
        if k > 0:
            terms[self.z[v][k - 1]] = terms.get(self.z[v][k - 1], 0.0) - 1.0
        return terms, const

    def solve(self, max_nodes: int):  # noqa: ANN201 - scipy's OptimizeResult
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import csr_matrix

        self.scale = reduce(math.gcd, (int(c) for c in self.cost if c), 0) or 1
        a = csr_matrix((self.vals, (self.rows, self.cols)), shape=(len(self.lo), self.n))
        return milp(np.array(self.cost) / self.scale,
                    constraints=LinearConstraint(a, np.array(self.lo), np.array(self.hi)),
                    integrality=np.array(self.binary), bounds=Bounds(0.0, np.array(self.upper)),
                    options={"node_limit": max_nodes, "mip_rel_gap": 0.0, "presolve": True})

    def bound(self, res) -> int:  # noqa: ANN001 - scipy's OptimizeResult
        """The proven bound of a solve: its dual bound, rounded up, plus the fixed bytes."""
        dual = getattr(res, "mip_dual_bound", None)
        if dual is None or not np.isfinite(dual):
            return self.fixed
        return self.fixed + self.scale * max(0, math.ceil(dual - _SLACK / self.scale))

    @staticmethod
    def nodes(res) -> int:  # noqa: ANN001 - scipy's OptimizeResult
        return int(getattr(res, "mip_node_count", 0) or 0)

    def forbid(self, group_set: list[tuple[int, ...]]) -> None:
        """Not all of these sets as groups at once: some inner edge cut or some boundary
        edge uncut."""
        terms: dict[int, float] = {}
        const = 0
        for group in group_set:
            ops = set(group)
            for (u, r), e in self.cut.items():
                if u in ops and r in ops:
                    terms[e] = terms.get(e, 0.0) + 1.0
                elif (u in ops) != (r in ops):
                    terms[e] = terms.get(e, 0.0) - 1.0
                    const += 1
        self.row(terms, 1.0 - const, np.inf)


def _fusable_producers(graph: ComputeGraph, unfusable: set[int]) -> dict[int, set[int]]:
    """For each op, the fusable ops that feed it directly or through unfusable ops only."""
    out: dict[int, set[int]] = {}
    for op in graph:
        found: set[int] = set()
        for u in op.inputs:
            if u < 0:
                continue
            if u in unfusable:
                found |= out[u]
            else:
                found.add(u)
        out[op.id] = found
    return out
