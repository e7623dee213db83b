"""The `Dataflow` protocol: everything a dataflow owns, behind one object.

A dataflow is one module of `simulator.dataflow` holding one object registered by its name
(`simulator.dataflow.register`): its name and capabilities (`simulator.scheme.Scheme`,
`Capabilities`: what the search, the exact solver's pruning and bounds, the repairs and the
substitution search ask), its group cost (a `GroupCost` carrying what the simulator replays),
its simulator runner, the per-group figures it adds to reports, and the networks its validity
GNN trains on. No other room branches on a dataflow's name.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from simulator.cost.types import GroupCost
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.engine.machine import Machine
    from simulator.hw import HardwareConfig

__all__ = ["Dataflow", "DataflowBase", "GroupRun"]


@dataclass(frozen=True)
class GroupRun:
    """How the simulator runs one group: its simpy process body and what the report records.

    Attributes:
        body: A generator function (no arguments) the machine runs as the group's process.
        tiles: Tiles the group runs in (1 when it runs whole).
        weights_streamed: Some op streams its weights per tile.
        tiling: How an op on its own is tiled, in words ("" otherwise).
    """

    body: Callable[[], Generator[Any, Any, None]]
    tiles: int = 1
    weights_streamed: bool = False
    tiling: str = ""


@runtime_checkable
class Dataflow(Protocol):
    """One dataflow (module docs).

    Attributes:
        scheme: Its name, declared with its capabilities.
        training_groups: The networks its validity GNN trains on, with the distinct groups
            wanted of each (empty: no GNN; `explain.dataset`).
    """

    scheme: Scheme
    training_groups: Mapping[str, int]

    def cost(self, graph: ComputeGraph, ops: tuple[int, ...], hw: HardwareConfig) -> GroupCost:
        """F_beta, F_D, cycles and energy of `ops` (ascending) as one group, with the schedule
        the simulator replays."""
        ...

    def run(self, m: Machine, graph: ComputeGraph, cost: GroupCost, hw: HardwareConfig,
            label: str) -> GroupRun:
        """How the simulator runs the group `cost` describes (`SimulationError`, naming the
        group by `label`, when it cannot)."""
        ...

    def group_fields(self, cost: GroupCost, graph: ComputeGraph | None) -> dict[str, Any]:
        """The dataflow's own figures of a group, for `GroupCost.to_dict`."""
        ...


class DataflowBase:
    """The defaults of a `Dataflow`: no figures of its own, no validity GNN."""

    training_groups: Mapping[str, int] = MappingProxyType({})

    def group_fields(self, cost: GroupCost, graph: ComputeGraph | None) -> dict[str, Any]:
        """None of its own."""
        return {}
