"""Layer by layer (`simulator.cost.lbl`; docs/cost-model.md 4.3): one op on its own, its rows
streamed as a single-op LBDF group when that fits, else tiled to the buffer; the cost carries
the tiling (`LayerTiling`) the simulator replays (`simulator.engine.layer`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simulator.cost import lbl
from simulator.cost.types import GroupCost
from simulator.dataflow.base import DataflowBase, GroupRun
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.engine.machine import Machine
    from simulator.hw import HardwareConfig

__all__ = ["LBL"]


class _Lbl(DataflowBase):
    scheme = Scheme.LBL

    def cost(self, graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig) -> GroupCost:
        return lbl.group_cost(graph, ops, hw)

    def run(self, m: Machine, graph: ComputeGraph, cost: GroupCost, hw: HardwareConfig,
            label: str) -> GroupRun:
        from simulator.engine.layer import run_layer
        from simulator.engine.lbdf import run_lbdf_group
        from simulator.engine.machine import SimulationError

        if not cost.fits:
            raise SimulationError(f"group {label} cannot run: {cost.reason}")
        layer = cost.schedule
        assert isinstance(layer, lbl.LayerTiling), "an op alone carries its tiling"
        if layer.streamed:
            return GroupRun(lambda: run_lbdf_group(m, graph, cost.ops), layer.tiles,
                            tiling=layer.describe())
        return GroupRun(lambda: run_layer(m, graph, cost.ops[0], layer), layer.tiles,
                        tiling=layer.describe())

    def group_fields(self, cost: GroupCost, graph: ComputeGraph | None) -> dict[str, Any]:
        return {"tiling": cost.tiling, "tiles": cost.tiles,
                "reread_act_bytes": cost.reread_act_bytes,
                "reread_weight_bytes": cost.reread_weight_bytes}


LBL = _Lbl()
"""The layer-by-layer dataflow."""
