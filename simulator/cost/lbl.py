"""Layer-by-layer (LBL) execution: every op is its own group; the no-fusion reference.

An LBL group reads each of its op's inputs and weights from DRAM once and writes its output
once: the accelerator's layer-wise tiling is assumed to reach that ideal, so an LBL group is
valid by definition. Its `buffer_bytes` reports, for reference, what streaming the op's rows
with resident weights would hold (the LBDF figure of the single op).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from simulator.cost.lbdf import peak_row_bytes
from simulator.cost.traffic import boundary, buffer_traffic_elems
from simulator.cost.types import Failure, GroupCost, timing
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["group_cost"]


def group_cost(graph: ComputeGraph, ops: Sequence[int], hw: HardwareConfig) -> GroupCost:
    """F_D, cycles and energy of one op run on its own (valid by definition)."""
    ops = tuple(sorted(ops))
    b = boundary(graph, ops)
    d = hw.dtype_bytes
    weights = b.weight_elems * d
    rows = peak_row_bytes(graph, ops) * d
    dram = (b.read_elems + b.write_elems) * d + weights
    macs = sum(graph[o].macs for o in ops)
    fits = len(ops) == 1
    return GroupCost(
        scheme=Scheme.LBL, ops=ops, buffer_bytes=weights + rows, weight_buffer_bytes=weights,
        dram_act_read=b.read_elems * d, dram_weight_read=weights, dram_write=b.write_elems * d,
        macs=macs, fits=fits, reason="" if fits else "layer-by-layer runs one op per group",
        timing=timing(dram, buffer_traffic_elems(graph, ops) * d + dram, macs, hw),
        failure=None if fits else Failure.NOT_SINGLE_OP,
    )
