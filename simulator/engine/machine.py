"""The simulated machine: a simpy clock, a DRAM channel, a PE array and the on-chip buffer.

* DRAM channel: one transfer at a time in issue order; a transfer of b bytes occupies the
  channel for ceil(b / bandwidth) cycles and its data is usable `dram_latency` cycles after
  the channel finishes it (latency is pipelined: the next transfer may start meanwhile).
* PE array: executes one row (or one tile of an op) at a time, ceil(MACs / MACs-per-cycle)
  cycles; ops without MACs (activations, pooling, elementwise) are applied on the fly as data
  passes through and take no cycles, as in the analytic model.
* Buffer: a simpy Container per on-chip buffer of the hardware (`HardwareConfig.buffers`: one
  shared, or a weight and an activation buffer), each enforced for every group (fused, layer by
  layer, tiled): occupancy never exceeds its capacity. Every allocation names its role
  (weights or activations); with one shared buffer both roles take from it. Allocation
  blocks while its buffer is full; the only process that frees is the one that allocates,
  so a blocked allocation is a deadlock. simpy ends such a run silently:
  `Machine.run_group` detects it and raises `SimulationError` naming the group and buffer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import simpy

from simulator.errors import InputError

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["Machine", "SimulationError", "Transfer"]


class SimulationError(InputError):
    """A plan the simulated machine cannot execute: a group that never fits the buffer, an
    op whose smallest tile does not, a group its dataflow cannot run."""


@dataclass(frozen=True, slots=True)
class Transfer:
    """One DRAM transfer: channel busy [start, end), data usable at `ready`."""

    start: int
    end: int
    ready: int
    nbytes: int
    write: bool
    tensor: str


@dataclass
class _Counters:
    events: int = 0
    pe_busy: int = 0
    stall: int = 0
    macs: int = 0
    buffer_bytes: int = 0  # written into the buffer plus read out of it
    read_bytes: dict[str, int] = field(default_factory=dict)
    write_bytes: dict[str, int] = field(default_factory=dict)


class Machine:
    """Shared state of one simulation run."""

    def __init__(self, hw: HardwareConfig, record: bool = True) -> None:
        self.hw = hw
        self.env = simpy.Environment()
        self.buffers = {role: simpy.Container(self.env, capacity=size, init=0)
                        for role, size in hw.buffers}
        self.capacity = dict(hw.buffers)
        self.level = 0  # bytes held, all buffers together
        self.peak = 0
        self.levels = dict.fromkeys(self.buffers, 0)  # bytes held per buffer
        self.peaks = dict.fromkeys(self.buffers, 0)
        self.channel_free = 0
        self.record = record
        self.occupancy: list[tuple[int, int]] = [(0, 0)]
        self.transfers: list[Transfer] = []
        self.counters = _Counters()
        self._waiting_for: str = ""
        self._waiting_in: str = "shared"

    @property
    def now(self) -> int:
        """Current cycle."""
        return int(self.env.now)

    def reset_group_counters(self) -> _Counters:
        """Start counting a new group; returns the finished group's counters."""
        done, self.counters = self.counters, _Counters()
        self.peak = self.level
        self.peaks = dict(self.levels)
        return done

    def buffer_of(self, role: str) -> str:
        """The buffer holding data of `role` (``weights`` or ``activations``)."""
        return role if role in self.buffers else "shared"

    # --- DRAM -------------------------------------------------------------------------------

    def transfer(self, nbytes: int, tensor: str, write: bool = False) -> int:
        """Queue a DRAM transfer now; returns the cycle its data is usable (or written)."""
        start = max(self.now, self.channel_free)
        end = start + math.ceil(nbytes / self.hw.dram_bandwidth)
        self.channel_free = end
        ready = end + self.hw.dram_latency
        self.counters.events += 1
        book = self.counters.write_bytes if write else self.counters.read_bytes
        book[tensor] = book.get(tensor, 0) + nbytes
        if write:
            self.counters.buffer_bytes += nbytes
        if self.record:
            self.transfers.append(Transfer(start, end, ready, nbytes, write, tensor))
        return ready

    def wait_until(self, cycle: int) -> Generator[Any, Any, None]:
        """Stall until `cycle` (counted as stall time: the PE array waits for data)."""
        if cycle > self.now:
            self.counters.stall += cycle - self.now
            yield self.env.timeout(cycle - self.now)

    # --- PE array ---------------------------------------------------------------------------

    def compute(self, macs: int, reads: int = 0) -> Generator[Any, Any, None]:
        """Occupy the PE array for the cycles `macs` take, reading `reads` buffer bytes."""
        cycles = math.ceil(macs / self.hw.macs_per_cycle)
        self.counters.events += 1
        self.counters.macs += macs
        self.counters.buffer_bytes += reads
        if cycles:
            self.counters.pe_busy += cycles
            yield self.env.timeout(cycles)

    # --- buffer -----------------------------------------------------------------------------

    def alloc(self, nbytes: int, what: str,
              role: str = "activations") -> Generator[Any, Any, None]:
        """Take `nbytes` of the buffer holding `role` (``weights`` or ``activations``),
        waiting (possibly forever) while it is full."""
        if nbytes <= 0:
            return
        self.counters.events += 1
        self.counters.buffer_bytes += nbytes
        buffer = self.buffer_of(role)
        self._waiting_for = what
        self._waiting_in = buffer
        yield self.buffers[buffer].put(nbytes)
        self._waiting_for = ""
        self._set_level(buffer, nbytes)

    def free(self, nbytes: int, role: str = "activations") -> Generator[Any, Any, None]:
        """Return `nbytes` to the buffer holding `role`."""
        if nbytes <= 0:
            return
        self.counters.events += 1
        buffer = self.buffer_of(role)
        yield self.buffers[buffer].get(nbytes)
        self._set_level(buffer, -nbytes)

    def free_both(self, act_bytes: int, weight_bytes: int) -> Generator[Any, Any, None]:
        """Return `act_bytes` of activations and `weight_bytes` of weights at once (one
        release of a shared buffer, one per buffer when split)."""
        if self.buffer_of("weights") == self.buffer_of("activations"):
            yield from self.free(act_bytes + weight_bytes)
        else:
            yield from self.free(act_bytes)
            yield from self.free(weight_bytes, "weights")

    def _set_level(self, buffer: str, change: int) -> None:
        self.levels[buffer] += change
        self.peaks[buffer] = max(self.peaks[buffer], self.levels[buffer])
        level = self.level = self.level + change
        self.peak = max(self.peak, level)
        if self.record:
            if self.occupancy[-1][0] == self.now:
                self.occupancy[-1] = (self.now, level)
            else:
                self.occupancy.append((self.now, level))

    # --- running ----------------------------------------------------------------------------

    def run_group(self, body: Callable[[], Generator[Any, Any, None]], label: str) -> None:
        """Run one group to completion within the buffer; raise `SimulationError` if it
        deadlocks (an allocation the buffer can never grant)."""
        finished = []

        def wrapper() -> Generator[Any, Any, None]:
            yield from body()
            finished.append(True)

        self.env.process(wrapper())
        self.env.run()
        if not finished:
            buffer = self._waiting_in
            name = "buffer" if buffer == "shared" else f"{buffer[:-1]} buffer"
            raise SimulationError(
                f"group {label} cannot run: allocating {self._waiting_for} would exceed the "
                f"{name} ({self.levels[buffer]:,} B held of {self.capacity[buffer]:,} B) and "
                f"nothing can be freed before it (the plan does not fit this {name})"
            )
