"""Hybrid plans: every group runs under the dataflow that costs it least.

A hybrid plan is a partition like any other; each of its groups chooses its own dataflow among
the members of `Scheme.HYBRID` (LBDF, BRR and, for an op on its own, layer by layer): the one
that runs it (fits the buffer) with the least DRAM traffic, ties broken by fewer cycles, then
by a smaller F_beta, then by the order of the members. Every objective list starts with DRAM
(`search.problem.OBJECTIVES`), and a plan's DRAM and cycles are sums over its groups, so the
per-group choice gives every partition its least (DRAM, cycles) over all assignments of
dataflows to its groups: the exact solver's optimum over hybrid group costs is the hybrid
optimum (docs/cost-model.md, "Hybrid plans").

The chosen cost is the member's own `GroupCost`, unchanged (its ``scheme`` says which dataflow
the group runs under), so totals, the simulator (the member's runner) and plan files read it as
they read any group. A group no member runs keeps the first fused member's figures, with every
member's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from simulator.cost.types import Failure, GroupCost
from simulator.dataflow.base import DataflowBase, GroupRun
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.engine.machine import Machine
    from simulator.hw import HardwareConfig

__all__ = ["HYBRID", "choose"]


def choose(costs: Sequence[GroupCost]) -> GroupCost:
    """The cost a hybrid group runs at among its members' `costs` (in member order): the least
    (DRAM, cycles, F_beta) of those that fit; when none fits, the first that is not refused for
    holding several ops, its reason naming every member's."""
    fitting = [c for c in costs if c.fits]
    if fitting:
        return min(fitting, key=lambda c: (c.dram_bytes, c.timing.cycles, c.buffer_bytes))
    shown = [c for c in costs if c.failure is not Failure.NOT_SINGLE_OP] or list(costs)
    reason = "no dataflow runs it: " + "; ".join(f"{c.scheme}: {c.reason}" for c in shown)
    return replace(shown[0], reason=reason)


class _Hybrid(DataflowBase):
    scheme = Scheme.HYBRID

    def cost(self, graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig) -> GroupCost:
        """The cost of running `ops` as one group of a hybrid plan (module docs): layer by
        layer is a choice only for an op on its own."""
        from simulator.dataflow import dataflow

        members = self.scheme.members if len(ops) == 1 else self.scheme.fused
        return choose([dataflow(s).cost(graph, ops, hw) for s in members])

    def run(self, m: Machine, graph: ComputeGraph, cost: GroupCost, hw: HardwareConfig,
            label: str) -> GroupRun:
        """The chosen member's runner (a hybrid group's cost is its member's)."""
        from simulator.dataflow import dataflow

        return dataflow(cost.scheme).run(m, graph, cost, hw, label)


HYBRID = _Hybrid()
"""The hybrid of LBDF, BRR and layer by layer."""
