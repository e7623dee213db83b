"""A toy dataflow, the whole of it: one module, registered by one call
(``simulator.dataflow.register(TOY)``).

"Short LBDF": a group streams as under LBDF but holds at most three ops (a larger group does
not run: the searches and the exact solver must split it). Its simulator runner is LBDF's, so
the simulator's DRAM and peak agree with its cost as they do for LBDF.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from simulator.cost import lbdf
from simulator.cost.types import Failure, GroupCost
from simulator.dataflow import DataflowBase, GroupRun
from simulator.scheme import Capabilities, Scheme

MOST_OPS = 3


class ShortLbdf(DataflowBase):
    """LBDF with groups of at most `MOST_OPS` ops."""

    scheme = Scheme.declare("short", Capabilities(holds_weights=True))

    def cost(self, graph, ops, hw) -> GroupCost:  # noqa: ANN001 - the protocol's types
        cost = replace(lbdf.group_cost(graph, ops, hw), scheme=self.scheme)
        if len(ops) <= MOST_OPS:
            return cost
        return replace(cost, fits=False, failure=Failure.OVER_BUFFER,
                       reason=f"a short group holds at most {MOST_OPS} ops")

    def run(self, m, graph, cost, hw, label) -> GroupRun:  # noqa: ANN001
        from simulator.engine.lbdf import run_lbdf_group

        return GroupRun(lambda: run_lbdf_group(m, graph, cost.ops))

    def group_fields(self, cost: GroupCost, graph: Any) -> dict[str, Any]:  # noqa: ANN401
        return {"short": len(cost.ops) <= MOST_OPS}


TOY = ShortLbdf()
