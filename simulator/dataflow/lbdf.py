"""LBDF, line-buffer depth-first (`simulator.cost.lbdf`; docs/cost-model.md 4.1): every group
streams its rows with all its weights resident; the simulator runs it row by row
(`simulator.engine.lbdf`)."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from simulator.cost import lbdf
from simulator.cost.types import GroupCost
from simulator.dataflow.base import DataflowBase, GroupRun
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.engine.machine import Machine
    from simulator.hw import HardwareConfig

__all__ = ["LBDF"]


class _Lbdf(DataflowBase):
    scheme = Scheme.LBDF
    training_groups = MappingProxyType({
        "vgg16": 600, "squeezenet1_0": 1200, "squeezenet1_1": 1200, "mobilenet_v2": 1500,
        "mobilenet_v3_small": 1000, "mobilenet_v3_large": 1200, "resnet18": 1000,
        "resnet101": 1800, "efficientnet_b0": 1400, "efficientnet_b3": 1600,
    })

    def cost(self, graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig) -> GroupCost:
        return lbdf.group_cost(graph, ops, hw)

    def run(self, m: Machine, graph: ComputeGraph, cost: GroupCost, hw: HardwareConfig,
            label: str) -> GroupRun:
        from simulator.engine.lbdf import run_lbdf_group

        return GroupRun(lambda: run_lbdf_group(m, graph, cost.ops))


LBDF = _Lbdf()
"""The LBDF dataflow."""
