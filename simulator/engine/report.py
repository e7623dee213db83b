"""What a simulation reports: per-group timing, traffic and occupancy, and run totals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.engine.machine import Transfer
from simulator.scheme import Scheme

__all__ = ["GroupSim", "SimReport"]


@dataclass(frozen=True)
class GroupSim:
    """One group as simulated.

    Attributes:
        index: Position of the group in the plan.
        ops: Op ids.
        mode: How it ran: the plan's dataflow, or LBL (unfusable ops and LBL plans).
        start, end: First and last cycle.
        compute_cycles: Cycles the PE array was busy.
        stall_cycles: Cycles the PE array waited for DRAM data or write-backs.
        dram_read, dram_write: Bytes per tensor (weights as ``<op>.weights``).
        peak_buffer_bytes: Highest buffer occupancy while the group ran.
        macs: MACs executed (BRR recomputes halo rows).
        events: Simulated events (transfers, row or tile computations, allocations, frees).
        buffer_traffic_bytes: Bytes written into and read out of the buffer.
        tiles: BRR tile count, or the tiles of a tiled layer (1 otherwise);
            weights_streamed: BRR weight streaming.
        tiling: How an op on its own ran (LBL mode): its rows streamed, or its tiling in
            words (`simulator.cost.lbl.LayerTiling.describe`); "" otherwise.
        peak_by_buffer: With split buffers, the highest occupancy of each buffer as (role,
            bytes) (`simulator.hw.HardwareConfig.buffers`); empty with one shared buffer,
            whose peak is `peak_buffer_bytes`.
    """

    index: int
    ops: tuple[int, ...]
    mode: Scheme
    start: int
    end: int
    compute_cycles: int
    stall_cycles: int
    dram_read: dict[str, int]
    dram_write: dict[str, int]
    peak_buffer_bytes: int
    macs: int
    events: int
    buffer_traffic_bytes: int
    tiles: int = 1
    weights_streamed: bool = False
    tiling: str = ""
    peak_by_buffer: tuple[tuple[str, int], ...] = ()

    @property
    def cycles(self) -> int:
        """Duration of the group."""
        return self.end - self.start

    @property
    def dram_bytes(self) -> int:
        """All DRAM bytes moved by the group."""
        return sum(self.dram_read.values()) + sum(self.dram_write.values())

    @property
    def bound(self) -> str:
        """"compute" when the PE array was busy at least as long as it stalled, else "dram"."""
        return "compute" if self.compute_cycles >= self.stall_cycles else "dram"

    def to_dict(self, names: list[str]) -> dict[str, Any]:
        """JSON-ready dict (stable keys, documented in the README)."""
        return {
            "index": self.index, "ops": [names[o] for o in self.ops], "mode": self.mode,
            "start": self.start, "end": self.end, "cycles": self.cycles,
            "compute_cycles": self.compute_cycles, "stall_cycles": self.stall_cycles,
            "bound": self.bound, "dram_bytes": self.dram_bytes,
            "dram_read": dict(self.dram_read), "dram_write": dict(self.dram_write),
            "peak_buffer_bytes": self.peak_buffer_bytes, "macs": self.macs,
            "tiles": self.tiles, "weights_streamed": self.weights_streamed,
            "tiling": self.tiling,
            **({"peak_by_buffer": dict(self.peak_by_buffer)} if self.peak_by_buffer else {}),
        }


@dataclass(frozen=True)
class SimReport:
    """A whole plan as simulated.

    Attributes:
        scheme: The dataflow.
        groups: Per group, in execution order.
        cycles: Total cycles (groups run one after another).
        clock_hz: To turn cycles into time.
        macs_per_cycle: PE array throughput (for utilisation).
        energy_dram_pj, energy_buffer_pj, energy_mac_pj: Energy by component.
        events: Simulated events in total.
        occupancy: (cycle, bytes) at every change of buffer occupancy.
        transfers: Every DRAM transfer.
        energy_leak_pj: The on-chip buffers' leakage power x the simulated cycles.
        area_mm2: The on-chip buffers' area (`simulator.hw.HardwareConfig.area_mm2`).
    """

    scheme: Scheme
    groups: tuple[GroupSim, ...]
    cycles: int
    clock_hz: float
    macs_per_cycle: int
    energy_dram_pj: float
    energy_buffer_pj: float
    energy_mac_pj: float
    events: int
    occupancy: tuple[tuple[int, int], ...]
    transfers: tuple[Transfer, ...]
    energy_leak_pj: float = 0.0
    area_mm2: float = 0.0

    @property
    def dram_bytes(self) -> int:
        """DRAM bytes over all groups."""
        return sum(g.dram_bytes for g in self.groups)

    @property
    def macs(self) -> int:
        """MACs over all groups."""
        return sum(g.macs for g in self.groups)

    @property
    def pe_utilisation(self) -> float:
        """MACs done / MACs the PE array could have done in the run's cycles."""
        return self.macs / (self.cycles * self.macs_per_cycle) if self.cycles else 0.0

    @property
    def energy_pj(self) -> float:
        """Total energy."""
        return self.energy_dram_pj + self.energy_buffer_pj + self.energy_mac_pj \
            + self.energy_leak_pj

    @property
    def peak_buffer_bytes(self) -> int:
        """Highest occupancy over the run."""
        return max((g.peak_buffer_bytes for g in self.groups), default=0)

    @property
    def peak_by_buffer(self) -> dict[str, int]:
        """With split buffers, the highest occupancy of each buffer over the run (empty with
        one shared buffer)."""
        peaks: dict[str, int] = {}
        for g in self.groups:
            for role, peak in g.peak_by_buffer:
                peaks[role] = max(peaks.get(role, 0), peak)
        return peaks

    def totals(self) -> dict[str, Any]:
        """Run-level figures as a JSON-ready dict (stable keys)."""
        return {
            "scheme": self.scheme, "groups": len(self.groups), "cycles": self.cycles,
            "time_ms": self.cycles / self.clock_hz * 1e3, "dram_bytes": self.dram_bytes,
            "peak_buffer_bytes": self.peak_buffer_bytes, "macs": self.macs,
            "pe_utilisation": self.pe_utilisation, "energy_pj": self.energy_pj,
            "energy_dram_pj": self.energy_dram_pj, "energy_buffer_pj": self.energy_buffer_pj,
            "energy_mac_pj": self.energy_mac_pj, "energy_leak_pj": self.energy_leak_pj,
            "area_mm2": self.area_mm2, "events": self.events,
        }
