"""Result types of the cost models and the cycle/energy arithmetic they share.

A cost model is a pure function ``group_cost(graph, ops, hw) -> GroupCost`` (see
`simulator.cost.COST_MODELS`). Cycles and energy are derived from a group's traffic and MACs the
same way for every dataflow (`timing`), so dataflows differ only in what they move and hold.
Why a group does not fit is a `Failure` kind, next to the human reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["Failure", "GroupCost", "GroupCostFn", "Timing", "roofline", "timing"]


class Failure(StrEnum):
    """Why a group cannot run under its dataflow (the kind; `GroupCost.reason` says it in
    words)."""

    OVER_BUFFER = "over_buffer"
    """F_beta exceeds the buffer."""
    WEIGHTS_OVER_BUFFER = "weights_over_buffer"
    """LBDF: the group's weights alone exceed the buffer."""
    BRR_INCOMPATIBLE = "brr_incompatible"
    """BRR cannot tile the group (a whole-map result broadcast onto a feature map)."""
    NOT_SINGLE_OP = "not_single_op"
    """Layer by layer runs one op per group."""
    TILE_OVER_BUFFER = "tile_over_buffer"
    """An op run on its own: not even its smallest tile fits the buffer (it cannot run)."""


@dataclass(frozen=True, slots=True)
class Timing:
    """Analytic cycles and energy of a group.

    Attributes:
        compute_cycles: ceil(MACs / MACs per cycle).
        dram_cycles: ceil(DRAM bytes / DRAM bandwidth) + one DRAM access latency.
        cycles: The time of the group's schedule (`simulator.cost.cycles`), never below the
            roofline max(compute, DRAM) (docs/cost-model.md, section 5).
        energy_dram_pj, energy_buffer_pj, energy_mac_pj: energy by component.
        energy_leak_pj: The on-chip buffers' leakage over the group's cycles
            (`simulator.hw.HardwareConfig.leakage_pj_per_cycle` x cycles).
    """

    compute_cycles: int
    dram_cycles: int
    cycles: int
    energy_dram_pj: float
    energy_buffer_pj: float
    energy_mac_pj: float
    energy_leak_pj: float = 0.0

    @property
    def bound(self) -> str:
        """"compute" or "dram": which side sets the group's cycles."""
        return "compute" if self.compute_cycles >= self.dram_cycles else "dram"

    @property
    def energy_pj(self) -> float:
        """Total energy."""
        return self.energy_dram_pj + self.energy_buffer_pj + self.energy_mac_pj \
            + self.energy_leak_pj


def roofline(dram_bytes: int, macs: int, hw: HardwareConfig) -> tuple[int, int]:
    """(compute cycles, DRAM cycles) of computing `macs` and moving `dram_bytes`: the cycles of
    `timing` are at least their maximum (the exact solver's cycles bound reads them alone)."""
    compute = math.ceil(macs / hw.macs_per_cycle)
    return compute, math.ceil(dram_bytes / hw.dram_bandwidth) + (hw.dram_latency if dram_bytes
                                                                else 0)


def timing(dram_bytes: int, buffer_traffic_bytes: int, macs: int, hw: HardwareConfig,
           schedule_cycles: int = 0, weight_traffic_bytes: int | None = None) -> Timing:
    """Cycles and energy of moving `dram_bytes`, touching the buffer and computing `macs`.

    `schedule_cycles` is the time of the group's schedule (`simulator.cost.cycles`: transfers
    overlap compute only as far as the dataflow lets them); the cycles are the larger of it and
    the roofline max(compute, DRAM), which therefore bounds them from below. 0: the roofline
    (a group that cannot run; the exact solver's lower bounds).

    Energy (docs/hardware.md): DRAM bytes x DRAM pJ/B + buffer accesses x the buffer's pJ/B
    (the SRAM model's at its capacity, or the YAML's) + MACs x pJ/MAC + the buffers' leakage
    power x the cycles. `weight_traffic_bytes` (the weights' share of the buffer accesses)
    prices split buffers each at its own pJ/B (`HardwareConfig.buffer_energy_pj`).
    """
    compute, dram = roofline(dram_bytes, macs, hw)
    cycles = max(compute, dram, schedule_cycles)
    return Timing(
        compute_cycles=compute,
        dram_cycles=dram,
        cycles=cycles,
        energy_dram_pj=dram_bytes * hw.energy_dram_pj_per_byte,
        energy_buffer_pj=hw.buffer_energy_pj(buffer_traffic_bytes, weight_traffic_bytes),
        energy_mac_pj=macs * hw.energy_mac_pj,
        energy_leak_pj=cycles * _leakage_pj_per_cycle(hw),
    )


_LEAKAGE: dict[int, tuple[HardwareConfig, float]] = {}
"""`HardwareConfig.leakage_pj_per_cycle` by the configuration's identity (a few configurations
per process; `timing` runs once per group costed and the property prices every buffer anew)."""


def _leakage_pj_per_cycle(hw: HardwareConfig) -> float:
    entry = _LEAKAGE.get(id(hw))
    if entry is None or entry[0] is not hw:
        if len(_LEAKAGE) >= 64:
            _LEAKAGE.clear()
        entry = _LEAKAGE[id(hw)] = (hw, hw.leakage_pj_per_cycle)
    return entry[1]


@dataclass(frozen=True, slots=True)
class GroupCost:
    """F_beta, F_D, cycles and energy of one fusion group under one dataflow.

    Attributes:
        scheme: The dataflow the group runs under (LBL for an op that runs alone).
        ops: The group's op ids, ascending.
        buffer_bytes: F_beta, the on-chip buffer the group needs.
        weight_buffer_bytes: Part of F_beta holding weights.
        dram_act_read: Activation bytes read from DRAM (tensors entering the group; BRR
            re-reads halo rows).
        dram_weight_read: Weight bytes read from DRAM (BRR streaming reads them once per tile).
        dram_write: Bytes written to DRAM (tensors leaving the group or network outputs).
        macs: MACs executed (BRR recomputes halo rows of intermediate tensors).
        fits: True if F_beta <= buffer and the dataflow can run the group.
        reason: Why the group does not fit ("" when it does).
        timing: Cycles and energy.
        tiles: Row tiles (BRR); the tiles of a tiled layer (LBL); 1 otherwise.
        weights_streamed: BRR streams some op's weights per tile instead of keeping them
            resident.
        failure: The kind of `reason` (None when the group fits).
        runs_alone: An unfusable op run layer by layer on its own, outside the fusion
            (`simulator.cost.CostCache.run`): left out of the fuseable totals.
        tiling: How an op run on its own (LBL) executes, in words: its rows streamed, or
            the loop nest it is tiled with (`simulator.cost.lbl.LayerTiling`); "" otherwise.
        reread_act_bytes: Part of `dram_act_read` above reading every input once (the halo
            rows and input re-reads of a tiled layer).
        reread_weight_bytes: Part of `dram_weight_read` above reading the weights once (the
            weight re-reads of a tiled layer).
        resident_weight_bytes: BRR: the weights resident for the whole group.
        weight_slices: BRR: (op id, "out" | "in", slices) of every op streaming its weights,
            in output- or input-channel slices (docs/cost-model.md, section 4.2).
        schedule: What the simulator replays that the figures above do not already say (an
            op on its own: its `simulator.cost.lbl.LayerTiling`; None otherwise: BRR's
            configuration is its tiles and residency, LBDF's row order follows from the
            group); not compared.
    """

    scheme: Scheme
    ops: tuple[int, ...]
    buffer_bytes: int
    weight_buffer_bytes: int
    dram_act_read: int
    dram_weight_read: int
    dram_write: int
    macs: int
    fits: bool
    reason: str
    timing: Timing
    tiles: int = 1
    weights_streamed: bool = False
    failure: Failure | None = None
    runs_alone: bool = False
    tiling: str = ""
    reread_act_bytes: int = 0
    reread_weight_bytes: int = 0
    resident_weight_bytes: int = 0
    weight_slices: tuple[tuple[int, str, int], ...] = ()
    schedule: Any = field(default=None, compare=False, repr=False)

    @property
    def dram_bytes(self) -> int:
        """F_D: all DRAM traffic of the group."""
        return self.dram_act_read + self.dram_weight_read + self.dram_write

    @property
    def dram_read(self) -> int:
        """DRAM bytes read (activations and weights)."""
        return self.dram_act_read + self.dram_weight_read

    def to_dict(self, graph: ComputeGraph | None = None) -> dict[str, Any]:
        """JSON-ready dict (stable keys, documented in the README)."""
        d: dict[str, Any] = {
            "ops": [graph[o].name for o in self.ops] if graph is not None else list(self.ops),
            "buffer_bytes": self.buffer_bytes,
            "weight_buffer_bytes": self.weight_buffer_bytes,
            "dram_bytes": self.dram_bytes,
            "dram_act_read": self.dram_act_read,
            "dram_weight_read": self.dram_weight_read,
            "dram_write": self.dram_write,
            "macs": self.macs,
            "cycles": self.timing.cycles,
            "bound": self.timing.bound,
            "energy_pj": self.timing.energy_pj,
            "fits": self.fits,
            "reason": self.reason,
        }
        from simulator.dataflow import dataflow

        d.update(dataflow(self.scheme).group_fields(self, graph))
        return d


class GroupCostFn(Protocol):
    """A cost model: the cost of running `ops` of `graph` as one group on `hw`."""

    def __call__(self, graph: ComputeGraph, ops: tuple[int, ...],
                 hw: HardwareConfig) -> GroupCost: ...
