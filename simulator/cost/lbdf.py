"""Line-buffer depth-first (LBDF) execution of a fusion group (Shi et al. 2021).

The group streams rows. Rows of the tensors entering the group arrive from DRAM in order; every
op computes its output row `r` as soon as the input rows its window reads (`simulator.cost.rows`)
are on chip; all weights of the group stay resident. The schedule is evaluated exactly, without
stepping through it: each row gets a time (the fraction of its source tensor streamed when it
can be computed) and the rows are ordered by (time, position in their own tensor, op).
F_beta = weights + the peak of the activations the line buffers hold, at one of two
granularities (`HardwareConfig.lbdf_buffer`, docs/cost-model.md 4.1):

* ``row``: whole rows. A row is held from its production to the computation that last reads
  it, one row in flight ahead of use per entering tensor, and a row leaving the group until the
  next row of its tensor is produced (its DRAM write is in flight meanwhile).
* ``pixel`` (the default, the paper's Fig. 1 line buffer): rows stream pixel by pixel in raster
  order, and a tensor holds the contiguous pixel interval from the oldest pixel a reader still
  needs to the newest one produced: a k x k window over a stream of width W holds (k-1) rows +
  k pixels, not k rows; one pixel is in flight per entering tensor and one pixel being written
  per leaving tensor. The rows that stream together (same time and epoch, same wavefront step)
  form a *block*; in a block a tensor that produces a row while its oldest row is read out
  holds one row less plus the pixels its slowest reader's window spans. The group's
  requirement is the larger over blocks, or the whole-row peak if that is smaller (a pixel
  buffer can run the rows one after the other too).

Nothing is special-cased: line buffers, skips holding the rows their partner branch has not
consumed, and a squeeze-and-excitation multiply forcing its other input to be held whole all
follow from the row dependencies.

The schedule, both peaks, the boundary's figures and the cycles of a group are computed in one
compiled call (`simulator.cost._lbdf_kernels.schedule`, numba) over flat tables built once per
graph; this module checks the group, calls it and builds the results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost._lazy import LazyModule
from simulator.cost.rows import row_deps
from simulator.cost.traffic import weight_traffic_bytes
from simulator.cost.types import Failure, GroupCost, timing
from simulator.hw import LBDF_BUFFERS, HardwareConfigError
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph, OpKind

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["RowOrder", "group_cost", "line_buffer_elems", "peak_row_bytes", "row_order",
           "window_floors"]


_k = LazyModule("simulator.cost._lbdf_kernels")  # numba imported on first use


def group_cost(graph: ComputeGraph, ops: Sequence[int], hw: HardwareConfig) -> GroupCost:
    """F_beta, F_D, cycles and energy of `ops` run as one LBDF group on `hw`."""
    ops = tuple(sorted(ops))
    d = hw.dtype_bytes
    # The kernel times the group when its line buffers fit next to its weights in the whole
    # buffer (`buffer_bytes`, the two buffers' total when split: a necessary condition); the
    # cycles are kept only when the group fits.
    line, _, _, cycles, read_elems, write_elems, weight_elems, macs, traffic, *_ = _schedule(
        graph, ops, _granularity(hw.lbdf_buffer) == "pixel", 1, hw.buffer_bytes // d, d,
        hw.dram_bandwidth, hw.dram_latency, hw.macs_per_cycle)
    weight_bytes = weight_elems * d
    need = weight_bytes + line * d
    dram_act, dram_w, dram_write = read_elems * d, weight_bytes, write_elems * d
    dram = dram_act + dram_w + dram_write
    buf = traffic * d + dram
    failure, reason = _failure(weight_bytes, need, hw)
    fits = failure is None
    if not fits:
        cycles = -1
    return GroupCost(
        scheme=Scheme.LBDF, ops=ops, buffer_bytes=need, weight_buffer_bytes=weight_bytes,
        dram_act_read=dram_act, dram_weight_read=dram_w, dram_write=dram_write, macs=macs,
        fits=fits, reason=reason,
        timing=timing(dram, buf, macs, hw, cycles if cycles >= 0 else 0,
                      weight_traffic_bytes(graph, ops, hw, dram_w)),
        failure=failure,
    )


def _schedule(graph: ComputeGraph, ops: tuple[int, ...], pixel: bool, want: int,
              buffer_elems: int = 0, d: int = 1, bw: float = 1.0, lat: int = 0,
              mpc: int = 1) -> tuple:
    """`_lbdf_kernels.schedule` on the ascending op ids `ops` (ids of `graph`, each once:
    checked, GraphError or ValueError), with the graph's tables."""
    if ops and (ops[0] < 0 or ops[-1] >= len(graph)):
        graph.inputs_of(ops)  # raises GraphError, naming the ids
    return _k.schedule(np.array(ops, dtype=np.int64), pixel, want, buffer_elems,
                       *_k.lbdf_tables(graph).args, d, float(bw), lat, mpc)


def _failure(weight_bytes: int, need: int, hw: HardwareConfig) -> tuple[Failure | None, str]:
    if hw.is_split:
        return _split_failure(weight_bytes, need - weight_bytes, hw)
    if weight_bytes > hw.buffer_bytes:
        return Failure.WEIGHTS_OVER_BUFFER, (f"weights alone ({weight_bytes:,} B) exceed the "
                                             f"buffer ({hw.buffer_bytes:,} B)")
    if need > hw.buffer_bytes:
        return Failure.OVER_BUFFER, f"needs {need:,} B > buffer {hw.buffer_bytes:,} B"
    return None, ""


def _split_failure(weight_bytes: int, line_bytes: int,
                   hw: HardwareConfig) -> tuple[Failure | None, str]:
    """With split buffers: the weights against the weight buffer, the line buffers against
    the activation buffer."""
    if weight_bytes > hw.weight_capacity:
        return Failure.WEIGHTS_OVER_BUFFER, (f"weights ({weight_bytes:,} B) exceed the weight "
                                             f"buffer ({hw.weight_capacity:,} B)")
    if line_bytes > hw.activation_capacity:
        return Failure.OVER_BUFFER, (f"line buffers need {line_bytes:,} B > activation buffer "
                                     f"{hw.activation_capacity:,} B")
    return None, ""


@dataclass(frozen=True)
class RowOrder:
    """The LBDF schedule of a group as a sequence of row events (what the simulator runs).

    Attributes:
        refs: Tensors of the group: the entering ones (references), then the group's ops.
        heights: Rows of each tensor.
        n_entering: How many of `refs` (the first ones) enter the group from DRAM.
        tensor: For each event in schedule order, the index into `refs` of the tensor whose
            row is produced (an entering row arriving, or an op computing a row).
        row: For each event, that row.
        block: Pixel granularity, wavefront schedule: for each event, its block
            (non-decreasing), the rows streamed together pixel by pixel; None when the group
            streams whole rows.
        levels: Pixel granularity, wavefront schedule: per block, the activation elements its
            line buffers hold (at most; their maximum is `line_buffer_elems`); None when the
            group streams whole rows (at pixel granularity too, where that holds no more).
    """

    refs: tuple[int, ...]
    heights: tuple[int, ...]
    n_entering: int
    tensor: np.ndarray
    row: np.ndarray
    block: np.ndarray | None = None
    levels: np.ndarray | None = None


def row_order(graph: ComputeGraph, ops: Sequence[int], granularity: str = "row") -> RowOrder:
    """The order in which an LBDF group streams and computes rows.

    With ``granularity="pixel"`` the events are ordered block by block (each block's rows in
    row order), and the block of each event and each block's line-buffer level come with them,
    unless the whole-row schedule holds no more (narrow maps deep in a group): then it is
    returned, as for ``"row"``.
    """
    pixel = _granularity(granularity) == "pixel"
    *_, n_ent, packed = _schedule(graph, tuple(sorted(ops)), pixel, 2)
    nt, n, nl = packed[:3].tolist()
    nodes, tensor, row, block, levels = np.split(packed[3:], np.cumsum((nt, n, n, nl and n)))
    tables = _k.lbdf_tables(graph)
    refs = tuple((nodes - tables.n_in).tolist())
    heights = tuple(tables.node[nodes, 0].tolist())
    if nl:
        return RowOrder(refs, heights, n_ent, tensor, row, block, levels)
    return RowOrder(refs, heights, n_ent, tensor, row)


def peak_row_bytes(graph: ComputeGraph, ops: Sequence[int]) -> int:
    """Peak elements of live activation rows when `ops` run as one LBDF group (whole rows)."""
    return int(_schedule(graph, tuple(sorted(ops)), False, 0)[0])


def line_buffer_elems(graph: ComputeGraph, ops: Sequence[int], granularity: str = "pixel") -> int:
    """Peak activation elements the line buffers of an LBDF group hold (F_beta less weights).

    Args:
        graph: The workload.
        ops: The group.
        granularity: ``"pixel"`` (the paper's line buffer) or ``"row"`` (whole rows).

    Raises:
        HardwareConfigError: An unknown granularity.
    """
    pixel = _granularity(granularity) == "pixel"
    return int(_schedule(graph, tuple(sorted(ops)), pixel, 0)[0])


@lru_cache(maxsize=64)
def window_floors(graph: ComputeGraph) -> tuple[int, ...]:
    """Per op, activation elements that every LBDF group holding it holds at once: a floor of
    F_beta less the weights, at both granularities, that does not depend on the rest of the
    group (docs/cost-model.md 4.1, "Window floors").

    For op o (not a global pooling, which folds its input rows in as they arrive) and each
    output row r: the sum, over o's distinct input tensors t, of (rows o's window reads of t
    for row r, less one) x the elements of a row of t; the floor is the largest such sum.

    Why: every op of an LBDF group computes all its rows. When o computes row r, the rows of
    t its window reads are produced (every event comes after the rows it reads) and none is
    released (each lives to the last row of an in-group reader that reads it, o's row r or
    later). Whole rows: the peak is at least those rows. Pixels: in the block of o's row r
    those rows are live; a tensor produces at most one row in a block, so a steady tensor's
    U - 1 whole rows plus pixels, and the rows live at the block's start or end (the trade),
    keep at least all but one of them; P(G) is the smaller of the two peaks, each at least the
    floor.
    """
    deps = row_deps(graph)
    out = []
    for op in graph:
        spans: dict[int, np.ndarray] = {}
        if op.kind is not OpKind.GLOBAL_POOL:
            for slot, ref in enumerate(op.inputs):
                span = np.asarray(deps.hi[op.id][slot]) - np.asarray(deps.lo[op.id][slot])
                spans[ref] = span if ref not in spans else np.maximum(spans[ref], span)
        held = sum((span * deps.row_elems_of[ref] for ref, span in spans.items()),
                   np.zeros(1, np.int64))
        out.append(max(int(held.max()), 0))
    return tuple(out)


def _peaks(graph: ComputeGraph, ops: Sequence[int]) -> tuple[int, int]:
    """(the whole-row peak, the pixel wavefront's peak) of a group at pixel granularity, in
    elements: `line_buffer_elems` is the smaller."""
    out = _schedule(graph, tuple(sorted(ops)), True, 0)
    return int(out[1]), int(out[2])


def _granularity(value: str) -> str:
    if value not in LBDF_BUFFERS:
        raise HardwareConfigError(f"lbdf_buffer = {value!r}: must be 'pixel' or 'row'")
    return value
