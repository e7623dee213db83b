"""Independent cross-check of the exact solver: a set-partition MILP solved by HiGHS.

Minimise sum_k F_D(k) x_k over the costed candidates (`search.exact.candidates`), x binary,
subject to every op being covered exactly once. Acyclicity of the graph of groups is enforced
lazily: solve, look for a cycle among the chosen groups, add the cut "not all of these groups
together" (sum of their x <= count - 1), and solve again until the chosen groups are acyclic.
Every cut removes only combinations that contain a cycle, so the final answer is the optimum
over valid plans. Used by tests and benchmarks only (it does not scale like the down-set DP);
scipy (`scipy.optimize.milp`) is imported when it is called.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from search.exact.candidates import Candidate
from simulator.plan import FusionGroup, PartitionPlan
from simulator.workload.graph import ComputeGraph

__all__ = ["MilpResult", "solve_milp"]


@dataclass(frozen=True)
class MilpResult:
    """The MILP optimum.

    Attributes:
        plan: An optimal plan.
        dram_bytes: Its DRAM traffic.
        cuts: Acyclicity cuts added.
        solves: MILPs solved (cuts + 1).
        seconds: Wall time.
    """

    plan: PartitionPlan
    dram_bytes: int
    cuts: int
    solves: int
    seconds: float


def solve_milp(graph: ComputeGraph, candidates: Sequence[Candidate], max_solves: int = 1000,
               time_limit: float | None = None) -> MilpResult:
    """The least-DRAM valid plan over `candidates` by MILP with lazy acyclicity cuts.

    Raises:
        RuntimeError: HiGHS reports no optimum, or `max_solves` is reached.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_array

    t = time.perf_counter()
    n, k = len(graph), len(candidates)
    rows = [o for c in candidates for o in c.ops]
    cols = [j for j, c in enumerate(candidates) for _ in c.ops]
    cover = csr_array((np.ones(len(rows)), (rows, cols)), shape=(n, k))
    cost = np.array([c.dram_bytes for c in candidates], dtype=float)
    constraints = [LinearConstraint(cover, 1, 1)]
    options = {} if time_limit is None else {"time_limit": time_limit}
    for solve in range(1, max_solves + 1):
        res = milp(cost, constraints=constraints, integrality=np.ones(k),
                   bounds=Bounds(0, 1), options=options)
        if res.x is None or res.status != 0:
            raise RuntimeError(f"HiGHS found no optimum: {res.message}")
        chosen = [j for j in range(k) if res.x[j] > 0.5]
        cycle = _cycle(graph, [candidates[j] for j in chosen])
        if not cycle:
            plan = PartitionPlan(tuple(sorted((FusionGroup(candidates[j].ops) for j in chosen),
                                              key=lambda g: g.ops[0])))
            return MilpResult(plan, int(sum(candidates[j].dram_bytes for j in chosen)),
                              solve - 1, solve, time.perf_counter() - t)
        row = np.zeros(k)
        row[[chosen[i] for i in cycle]] = 1
        constraints.append(LinearConstraint(row, -np.inf, len(cycle) - 1))
    raise RuntimeError(f"no acyclic optimum after {max_solves} MILP solves")


def _cycle(graph: ComputeGraph, groups: Sequence[Candidate]) -> list[int]:
    """Indices (into `groups`) of the groups on one cycle of the graph of groups, or []."""
    group_of = {o: i for i, c in enumerate(groups) for o in c.ops}
    quotient = nx.DiGraph()
    quotient.add_nodes_from(range(len(groups)))
    quotient.add_edges_from((group_of[i], group_of[j]) for i, j in graph.edges()
                            if group_of[i] != group_of[j])
    try:
        return [u for u, _ in nx.find_cycle(quotient)]
    except nx.NetworkXNoCycle:
        return []
