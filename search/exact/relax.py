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

from simulator.cost import CostCache
from simulator.plan import FusionGroup, PartitionPlan
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

__all__ = ["RELAXATION_LABELS", "RELAXATION_NODES", "Relaxation", "labelling_bound"]

RELAXATION_NODES = 1_000
"""Branch-and-bound nodes HiGHS may explore (a work cap: the bound it reaches is proven)."""

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
        plan: The plan of the best labelling found (its labels' connected pieces and the
            unfusable ops alone), or None when HiGHS found none; it may not run (line buffers
            are not in the relaxation) or be invalid: cost it before using it.
        labels: K, the labels the relaxation had.
        optimal: HiGHS proved its labelling optimal (else its node cap stopped it).
        nodes: Branch-and-bound nodes HiGHS explored.
    """

    bound_bytes: int
    plan: PartitionPlan | None
    labels: int
    optimal: bool
    nodes: int


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

    def var(self, cost: float = 0.0, binary: bool = False) -> int:
        self.cost.append(cost)
        self.binary.append(int(binary))
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
                    max_labels: int | None = RELAXATION_LABELS) -> Relaxation | None:
    """The labelling relaxation of the LBDF plan problem of `cache` (module docstring).

    None for a dataflow whose groups need not hold their weights (`Scheme.holds_weights`:
    BRR streams them, so weights bound nothing there), when every op must run alone, or when
    it needs more than `max_labels` labels (None: any).
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix

    scheme = Scheme.parse(cache.scheme)
    if not scheme.holds_weights or scheme.mixed or not scheme.searchable:
        return None  # every group's weights within the buffer is what the labels rely on
    hw, d = cache.hw, cache.hw.dtype_bytes
    n = len(graph)
    unfusable = set(cache.unfusable)
    fusable = [v for v in range(n) if v not in unfusable]
    if not fusable:
        return None
    cap = hw.weight_capacity if hw.is_split else hw.buffer_bytes
    weights = {v: graph[v].weight_reads * d for v in fusable}
    k_labels = max(1, 2 * math.ceil(sum(weights.values()) / cap) - 1)
    if max_labels is not None and k_labels > max_labels:
        return None
    outputs = set(graph.output_set)
    readers: dict[int, list[int]] = {}
    for op in graph:
        for ref in dict.fromkeys(op.inputs):
            readers.setdefault(ref, []).append(op.id)

    # the fixed part: the unfusable ops at their own cost, every fusable op's weights, and the
    # writes every plan pays (network outputs, tensors an unfusable op reads)
    fixed = sum(int(cache.run((v,)).dram_bytes) for v in unfusable)
    fixed += sum(weights.values())
    m = _Model()
    # z[v][k] = [label(v) <= k], k < K - 1 (z[v][K-1] = 1): non-decreasing in k
    z = {v: [m.var(binary=True) for _ in range(k_labels - 1)] for v in fusable}

    def x(v: int, k: int) -> tuple[dict[int, float], int]:
        """[label(v) == k] as (terms, constant)."""
        terms: dict[int, float] = {}
        const = 0
        if k == k_labels - 1:
            const += 1
        else:
            terms[z[v][k]] = 1.0
        if k > 0:
            terms[z[v][k - 1]] = terms.get(z[v][k - 1], 0.0) - 1.0
        return terms, const

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
                terms[key] = terms.get(key, 0.0) + weights[v] * val
            const += weights[v] * c
        m.row(terms, -np.inf, cap - const)
    # tensors: a write when a reader has a later label, a read per other label holding a reader
    for ref, rs in readers.items():
        inner = [r for r in rs if r not in unfusable]
        size = graph.tensor_elems(ref) * d
        produced = ref >= 0 and ref not in unfusable
        forced = produced and (ref in outputs or len(inner) < len(rs))
        if forced:
            fixed += size  # written in every plan
        if not inner:
            continue
        if produced and len(inner) == 1:
            # one reader: it is read exactly when it is written for it (a later label)
            later = m.var(size if forced else 2 * size)
            for k in range(k_labels - 1):
                m.row({later: 1.0, z[ref][k]: -1.0, z[inner[0]][k]: 1.0}, 0.0, np.inf)
            continue
        if produced and not forced:
            w = m.var(size)
            for r in inner:
                for k in range(k_labels - 1):
                    m.row({w: 1.0, z[ref][k]: -1.0, z[r][k]: 1.0}, 0.0, np.inf)
        for k in range(k_labels):
            p = m.var(size)
            own, own_c = x(ref, k) if produced else ({}, 0)
            for r in inner:
                t, c = x(r, k)
                terms = {p: 1.0}
                for key, val in t.items():
                    terms[key] = terms.get(key, 0.0) - val
                for key, val in own.items():
                    terms[key] = terms.get(key, 0.0) + val
                m.row(terms, c - own_c, np.inf)
    for v in fusable:  # a fusable network output no other op reads is still written
        if v in outputs and v not in readers:
            fixed += graph[v].output_elems * d

    scale = reduce(math.gcd, (int(c) for c in m.cost if c), 0) or 1
    a = csr_matrix((m.vals, (m.rows, m.cols)), shape=(len(m.lo), m.n))
    res = milp(np.array(m.cost) / scale,
               constraints=LinearConstraint(a, np.array(m.lo), np.array(m.hi)),
               integrality=np.array(m.binary), bounds=Bounds(0.0, 1.0),
               options={"node_limit": max_nodes, "mip_rel_gap": 0.0, "presolve": True})
    if res.status == 2:  # a valid plan always exists (every fusable op alone) and labels it
        raise RuntimeError(f"the labelling relaxation of {graph.name!r} is infeasible with "
                           f"{k_labels} labels: a bug (every valid plan has a labelling)")
    dual = getattr(res, "mip_dual_bound", None)
    if dual is None or not np.isfinite(dual):
        dual = 0.0
    bound = fixed + scale * max(0, math.ceil(dual - _SLACK / scale))
    plan = None
    if res.x is not None:
        plan = _plan(graph, fusable, unfusable, z, res.x, k_labels)
    return Relaxation(bound_bytes=int(bound), plan=plan, labels=k_labels,
                      optimal=res.status == 0, nodes=int(getattr(res, "mip_node_count", 0) or 0))


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


def _plan(graph: ComputeGraph, fusable: list[int], unfusable: set[int],
          z: dict[int, list[int]], values: np.ndarray, k_labels: int) -> PartitionPlan:
    """The connected pieces of each label (edges between ops of one label), and every
    unfusable op alone."""
    label = {v: next((k for k, i in enumerate(z[v]) if values[i] > 0.5), k_labels - 1)
             for v in fusable}
    parent = {v: v for v in fusable}

    def find(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for v in fusable:
        for u in graph[v].inputs:
            if u >= 0 and u not in unfusable and label[u] == label[v]:
                parent[find(u)] = find(v)
    pieces: dict[int, list[int]] = {}
    for v in fusable:
        pieces.setdefault(find(v), []).append(v)
    groups = [tuple(sorted(p)) for p in pieces.values()] + [(v,) for v in sorted(unfusable)]
    return PartitionPlan(tuple(FusionGroup(g) for g in sorted(groups)))
