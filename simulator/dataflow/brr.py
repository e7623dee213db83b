"""BRR, weight streaming in row tiles (`simulator.cost.brr`; docs/cost-model.md 4.2): a group
runs in T tiles, each op's weights resident or streamed in channel slices. The cost records the
configuration it chose (tiles, which weights stay resident, the slices of the others); the
simulator replays exactly that configuration (`simulator.engine.brr`), without searching
again."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from simulator.cost import brr
from simulator.cost.types import Failure, GroupCost
from simulator.dataflow.base import DataflowBase, GroupRun
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.engine.machine import Machine
    from simulator.hw import HardwareConfig

__all__ = ["BRR", "replayed_tiling"]


def replayed_tiling(graph: ComputeGraph, cost: GroupCost, hw: HardwareConfig) -> brr.TileCost:
    """The configuration `cost` chose, rebuilt from what it records (its tile count and which
    ops keep their weights resident): the same `TileCost` as the cost model's search, without
    the search (`tests/simulator/engine/test_dataflows.py`)."""
    streamed = {op for op, _, _ in cost.weight_slices}
    resident = [o for o in cost.ops if graph[o].weight_reads and o not in streamed]
    return brr.tile_cost(graph, cost.ops, cost.tiles, hw, resident)


class _Brr(DataflowBase):
    scheme = Scheme.BRR
    training_groups = MappingProxyType({
        "vgg16": 600, "squeezenet1_0": 2300, "squeezenet1_1": 2300, "mobilenet_v2": 2300,
        "resnet18": 1150, "resnet101": 2800,
    })

    def cost(self, graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig) -> GroupCost:
        return brr.group_cost(graph, ops, hw)

    def run(self, m: Machine, graph: ComputeGraph, cost: GroupCost, hw: HardwareConfig,
            label: str) -> GroupRun:
        from simulator.engine.brr import run_brr_group
        from simulator.engine.machine import SimulationError

        if cost.failure is Failure.BRR_INCOMPATIBLE:
            raise SimulationError(f"group {label} cannot run under BRR: {cost.reason}")
        tiling = replayed_tiling(graph, cost, hw)
        return GroupRun(lambda: run_brr_group(m, graph, cost.ops, tiling), tiling.tiles,
                        tiling.streamed)

    def group_fields(self, cost: GroupCost, graph: ComputeGraph | None) -> dict[str, Any]:
        return {"tiles": cost.tiles, "weights_streamed": cost.weights_streamed,
                "resident_weight_bytes": cost.resident_weight_bytes,
                "weight_slices": [[graph[o].name if graph is not None else o, split, n]
                                  for o, split, n in cost.weight_slices]}


BRR = _Brr()
"""The BRR dataflow."""
