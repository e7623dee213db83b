"""Cycles of a group as its schedule runs them (docs/cost-model.md, section 5).

The roofline, max(compute, DRAM), assumes every transfer overlaps compute. The machine the
cost models describe (and `simulator.engine` executes) overlaps less, and how much less follows
from the dataflow's own schedule:

* **LBDF** (`lbdf_cycles`): weights first, then one row in flight per entering tensor (the row
  after j is requested when row j arrives) and one write in flight per leaving tensor (row j
  of a leaving tensor waits until the write of row j-1 has landed); the PE array computes the
  op rows in the schedule's order (`simulator.cost.lbdf.row_order`). The time is the
  recurrence of that schedule over its rows: now = max(now, when the data is there) at an
  arriving row, now += ceil(MACs of the row / MACs per cycle) at an op row, every transfer
  queued on one first-in-first-out channel at ceil(bytes / bandwidth) cycles and usable
  `dram_latency` after it. It is evaluated row by row, in integers, with no event queue,
  compiled (`simulator.cost._lbdf_kernels.order_cycles`): a few nanoseconds a row.
* **BRR** (`brr_cycles`) and **a tiled layer** (`layer_cycles`): synchronous, every load and
  write-back is waited for before the PE array goes on, so nothing overlaps and the time is a
  closed-form sum: the PE cycles of every computation, plus the channel cycles of every
  transfer, plus one `dram_latency` per wait.

A group's cycles are the larger of this and the roofline (`types.timing`), so the roofline
stays a lower bound. A group that cannot run (over the buffer) keeps the roofline: it has no
schedule to time.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost.rows import row_deps
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.cost.brr import TileCost
    from simulator.cost.lbdf import RowOrder
    from simulator.cost.lbl import Layer, LayerTiling
    from simulator.hw import HardwareConfig

__all__ = ["brr_cycles", "layer_cycles", "lbdf_cycles"]


def lbdf_cycles(graph: ComputeGraph, ops: tuple[int, ...], order: RowOrder,
                hw: HardwareConfig) -> int:
    """Cycles of an LBDF group (or an op streaming its rows on its own) run in `order`.
    Computed by `simulator.cost._lbdf_kernels.order_cycles` (compiled), which
    `simulator.cost.lbdf.group_cost` runs on the group's schedule directly."""
    from simulator.cost._lbdf_kernels import order_cycles

    d, leaving = hw.dtype_bytes, set(graph.outputs_of(ops))
    deps = row_deps(graph)
    n_in = order.n_entering
    ops_of = [graph[r] for r in order.refs[n_in:]]
    heights = np.array(order.heights, dtype=np.int64)
    comp = np.zeros(len(order.refs), dtype=np.int64)
    weights = np.zeros(len(order.refs), dtype=np.int64)
    comp[n_in:] = [-(-(op.macs // h) // hw.macs_per_cycle)
                   for op, h in zip(ops_of, order.heights[n_in:], strict=True)]
    weights[n_in:] = [op.weight_reads for op in ops_of]
    return int(order_cycles(
        np.asarray(order.tensor, dtype=np.int64), np.asarray(order.row, dtype=np.int64),
        heights, np.array([deps.row_elems_of[r] for r in order.refs], dtype=np.int64), n_in,
        np.array([r in leaving for r in order.refs], dtype=np.bool_), comp, weights, d,
        float(hw.dram_bandwidth), hw.dram_latency))


class _Serial:
    """Time of a synchronous schedule: PE cycles + channel cycles + a latency per wait, less
    the PE cycles spent while the channel carries a transfer nothing waits for yet (rows read
    and dropped, queued before a computation)."""

    def __init__(self, hw: HardwareConfig) -> None:
        self.bw, self.lat, self.mpc = hw.dram_bandwidth, hw.dram_latency, hw.macs_per_cycle
        self.pe = 0
        self.channel = 0
        self.waits = 0
        self.overlap = 0
        self.pending = False
        self.queued = 0  # channel cycles queued and not waited for

    def read(self, nbytes: int) -> None:
        """Queue a transfer (read or write) that a later `wait` waits for."""
        if nbytes > 0:
            n = math.ceil(nbytes / self.bw)
            self.channel += n
            self.queued += n
            self.pending = True

    def drop(self, nbytes: int) -> None:
        """Queue a transfer nothing waits for (rows read and dropped)."""
        if nbytes > 0:
            n = math.ceil(nbytes / self.bw)
            self.channel += n
            self.queued += n

    def wait(self) -> None:
        """Wait for every transfer queued so far."""
        if self.pending:
            self.waits += 1
            self.pending = False
        self.queued = 0

    def write(self, nbytes: int) -> None:
        """Write back and wait for it."""
        if nbytes > 0:
            self.read(nbytes)
            self.wait()

    def compute(self, macs: int) -> None:
        c = -(-macs // self.mpc)
        self.pe += c
        hidden = min(c, self.queued)
        self.overlap += hidden
        self.queued -= hidden

    @property
    def cycles(self) -> int:
        return self.pe + self.channel + self.lat * self.waits - self.overlap


def brr_cycles(graph: ComputeGraph, ops: tuple[int, ...], tiling: TileCost,
               hw: HardwareConfig) -> int:
    """Cycles of a BRR group at its configuration `tiling` (`simulator.engine.brr`): every
    region load, weight slice and band write-back is waited for, so the tiles before the last
    add up in closed form; the last tile, which also reads and drops the rows of entering
    tensors no tile needs, runs as a `_Serial` schedule in op order. Computed by
    `simulator.cost.brr.schedule_cycles` (compiled) on the group's tile regions."""
    from simulator.cost.brr import schedule_cycles

    return schedule_cycles(graph, ops, tiling, hw)


def layer_cycles(layer: Layer, tiling: LayerTiling, hw: HardwareConfig) -> int:
    """Cycles of an op tiled on its own (`simulator.engine.layer`): tiles are synchronous,
    so the loop nest's PE cycles, channel cycles and one latency per wait add up."""
    from simulator.cost.lbl import ACC_BYTES, LoopOrder

    s = _Serial(hw)
    L, t, d = layer, tiling, layer.d
    done = [0, 0]  # work and MACs computed so far: the MACs split exactly, as the simulator

    def compute(work: int, total: int) -> None:
        done[0] += work
        macs = L.op.macs * done[0] // total - done[1]
        done[1] += macs
        s.compute(macs)

    def write(nbytes: int) -> None:
        if L.writes:
            s.write(nbytes)

    s.read(d * L.shared)
    order = t.order
    if order is LoopOrder.CHUNKS:
        outs, ins = L.chunk_split(t.bands)
        for k in range(t.bands):
            for sizes in ins:
                s.read(d * int(sizes[k]))
            s.wait()
            compute(int(outs[k]), L.out_elems)
            write(d * int(outs[k]))
    elif order is LoopOrder.HEADS:
        for _ in range(L.heads):
            s.read(d * L.k * L.n)
            for r0 in range(0, L.m_rows, t.band_rows):
                rows = min(t.band_rows, L.m_rows - r0)
                s.read(d * rows * L.k)
                s.wait()
                compute(rows, L.heads * L.m_rows)
                write(d * rows * L.n)
    elif order is LoopOrder.WHOLE:
        for r in L.refs:
            s.read(d * L.graph.tensor_elems(r))
        s.wait()
        compute(1, 1)
        write(d * L.out_elems)
    elif order is LoopOrder.CHANNELS:
        _channels(L, t, s, compute, write)
    else:
        _matrix(L, t, s, compute, write, ACC_BYTES, LoopOrder)
    return s.cycles


def _ranges(n: int, size: int) -> list[int]:
    return [min(size, n - a) for a in range(0, n, size)]


def _matrix(L: Layer, t: LayerTiling, s: _Serial, compute, write, acc_bytes: int,
            loop_order) -> None:
    """Matrix ops: output-channel blocks, row bands and input-channel blocks."""
    d = L.d
    bands = L.band_list(t.band_rows)
    unread = max(0, L.h_in - sum(b.in_rows(0) for b in bands)) * L.in_row * L.c_in
    total = L.c_out * L.h_out * L.c_in
    oc, ic = _ranges(L.c_out, t.out_block), _ranges(L.c_in, t.in_block)

    def weight_block(c_o: int, k: int, c_i: int) -> int:
        return d * c_o * (c_i * L.q + (L.bias if k == 0 else 0))

    if t.order is loop_order.ROWS_OUTER:
        for n, band in enumerate(bands):
            s.read(L.in_row * L.c_in * band.in_rows(0))
            if n == len(bands) - 1:
                s.drop(unread)
            for c_o in oc:
                for k, c_i in enumerate(ic):
                    s.read(weight_block(c_o, k, c_i))
                    s.wait()
                    compute(c_o * band.out_rows * c_i, total)
                write(d * c_o * L.out_row * band.out_rows)
        return
    for c_o in oc:  # weights outer, blocks
        held = d * c_o * L.per_oc if t.order is loop_order.WEIGHTS_OUTER else 0
        s.read(held)
        for n, band in enumerate(bands):
            for k, c_i in enumerate(ic):
                s.read(L.in_row * c_i * band.in_rows(0))
                s.read(0 if held else weight_block(c_o, k, c_i))
                s.wait()
                compute(c_o * band.out_rows * c_i, total)
            if n == len(bands) - 1:
                s.drop(unread)
            write(d * c_o * L.out_row * band.out_rows)


def _channels(L: Layer, t: LayerTiling, s: _Serial, compute, write) -> None:
    """Channel-separable ops: channel blocks, then row bands."""
    d = L.d
    reduce = L.form == "reduce"
    for r in L.held_whole:
        s.read(d * L.graph.tensor_elems(r))
    bands = L.band_list(t.band_rows)
    unread = [max(0, b.height - sum(band.in_rows(k) for band in bands)) * b.unit_row
              for k, b in enumerate(L.banded)]
    total = L.units * (L.h_in if reduce else L.h_out)
    for u0 in range(0, L.units, t.out_block):
        u = min(t.out_block, L.units - u0)
        s.read(d * u * L.w_unit)
        for _, per_unit in L.held_block:
            s.read(u * per_unit)
        for n, band in enumerate(bands):
            for k, b in enumerate(L.banded):
                per = b.unit_row * band.in_rows(k)
                if L.form == "concat":
                    for _, first, chans in L.pieces:
                        m = min(u0 + u, first + chans) - max(u0, first)
                        if m > 0:
                            s.read(m * per)
                else:
                    s.read(u * per)
            s.wait()
            compute(u * band.out_rows if not reduce else u * band.in_rows(0), total)
            write(0 if reduce else u * L.out_unit_row * band.out_rows)
            if n == len(bands) - 1:
                for k in range(len(L.banded)):
                    s.drop(u * unread[k])
        if reduce:
            write(d * u * L.acc_unit)
