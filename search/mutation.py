"""One-edit mutations of a partition plan (local search, Mills et al. §IV-B).

Each operator is a pure function of (graph, plan, fuseable ops, generator) returning the edited
groups, or None when the plan offers nothing to edit that way:

* `move_op`: move one op into a neighbouring group (its old group falls apart into its
  connected pieces if the op held it together);
* `merge_groups`: merge two groups joined by an edge;
* `split_group`: cut one group at a random position of its topological order (each side into
  its connected pieces).

Edited groups are connected but may close a cycle of groups or exceed the buffer; `mutate`
passes them through the repairer, which fixes both.
"""

from __future__ import annotations

from collections.abc import Callable, Set

import numpy as np

from search.repair import Repairer
from simulator.partition import Group, components
from simulator.plan import PartitionPlan
from simulator.workload.graph import ComputeGraph

__all__ = ["MUTATIONS", "merge_groups", "move_op", "mutate", "split_group"]

Mutation = Callable[[ComputeGraph, PartitionPlan, Set[int], np.random.Generator],
                    "list[Group] | None"]


def _groups(plan: PartitionPlan) -> list[Group]:
    return [g.ops for g in plan.groups]


def move_op(graph: ComputeGraph, plan: PartitionPlan, fuseable: Set[int],
            rng: np.random.Generator) -> list[Group] | None:
    """Move a random fuseable op into the group of one of its neighbours."""
    group_of = plan.group_of
    moves = sorted({(v, group_of[w]) for i, j in graph.edges() for v, w in ((i, j), (j, i))
                    if v in fuseable and w in fuseable and group_of[v] != group_of[w]})
    if not moves:
        return None
    v, target = moves[int(rng.integers(len(moves)))]
    source = group_of[v]
    groups = _groups(plan)
    out = [g for k, g in enumerate(groups) if k not in (source, target)]
    out.append(tuple(sorted((*groups[target], v))))
    out.extend(components(graph, [o for o in groups[source] if o != v]))
    return out


def merge_groups(graph: ComputeGraph, plan: PartitionPlan, fuseable: Set[int],
                 rng: np.random.Generator) -> list[Group] | None:
    """Merge two random groups of fuseable ops joined by an edge."""
    group_of = plan.group_of
    pairs = sorted({(group_of[i], group_of[j]) for i, j in graph.edges()
                    if i in fuseable and j in fuseable and group_of[i] != group_of[j]})
    if not pairs:
        return None
    a, b = pairs[int(rng.integers(len(pairs)))]
    groups = _groups(plan)
    out = [g for k, g in enumerate(groups) if k not in (a, b)]
    out.append(tuple(sorted((*groups[a], *groups[b]))))
    return out


def split_group(graph: ComputeGraph, plan: PartitionPlan, fuseable: Set[int],
                rng: np.random.Generator) -> list[Group] | None:
    """Cut a random group of two or more ops at a random topological position."""
    groups = _groups(plan)
    candidates = [k for k, g in enumerate(groups) if len(g) > 1]
    if not candidates:
        return None
    k = candidates[int(rng.integers(len(candidates)))]
    g = groups[k]
    cut = int(rng.integers(1, len(g)))
    return [h for m, h in enumerate(groups) if m != k] \
        + components(graph, g[:cut]) + components(graph, g[cut:])


MUTATIONS: tuple[Mutation, ...] = (move_op, merge_groups, split_group)


def mutate(repairer: Repairer, plan: PartitionPlan, fuseable: Set[int],
           rng: np.random.Generator, seen: Callable[[PartitionPlan], bool] = lambda p: False,
           tries: int = 8) -> PartitionPlan:
    """A repaired one-edit mutant of `plan`, new when one can be found.

    An operator is drawn uniformly per try; a try that has nothing to edit, whose repair gives
    the parent back (a merge the splitter undoes) or gives a plan already evaluated (`seen`:
    the budget counts proposals, so a known plan wastes one), is retried, up to `tries` times;
    the last mutant is returned if no try succeeds. Before a try is given up, the splitter's
    baseline repair of the same edit is tried (`Repairer.repair_new`; splitters without a
    baseline, like the random one, have no second chance).
    """
    child = plan
    for _ in range(tries):
        op = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
        groups = op(repairer.graph, plan, fuseable, rng)
        if groups is None:
            continue
        child = repairer.repair_new(groups, lambda p: p == plan or seen(p))
        if child != plan and not seen(child):
            return child
    return child
