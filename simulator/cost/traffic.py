"""DRAM accounting shared by every dataflow (DESIGN.md, "DRAM traffic F_D").

Every tensor a group consumes from outside is read once; every tensor it produces that is used
outside or is a network output is written once; weights are read once (BRR may read them once
per tile). Intermediate tensors never touch DRAM.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["Boundary", "boundary", "buffer_traffic_elems", "compulsory_bytes"]


@dataclass(frozen=True, slots=True)
class Boundary:
    """What crosses a group's edge, in elements.

    Attributes:
        entering: References of tensors read from outside (negative = network input).
        leaving: Ids of ops whose tensor is written to DRAM.
        read_elems: Elements of the entering tensors.
        write_elems: Elements of the leaving tensors.
        weight_elems: Weight elements of the group's ops.
    """

    entering: tuple[int, ...]
    leaving: tuple[int, ...]
    read_elems: int
    write_elems: int
    weight_elems: int


def boundary(graph: ComputeGraph, ops: Iterable[int]) -> Boundary:
    """The tensors and weights crossing the edge of the node set `ops`."""
    ops = tuple(ops)
    entering = graph.inputs_of(ops)
    leaving = graph.outputs_of(ops)
    return Boundary(
        entering=entering,
        leaving=leaving,
        read_elems=sum(graph.tensor_elems(r) for r in entering),
        write_elems=sum(graph[o].output_elems for o in leaving),
        weight_elems=sum(graph[o].weight_reads for o in ops),
    )


def compulsory_bytes(graph: ComputeGraph, ops: Iterable[int], dtype_bytes: int) -> int:
    """Traffic no plan of the node set avoids: its inputs and outputs once, its weights once.

    Over the whole graph this is the lower bound of DESIGN.md (network inputs + outputs + all
    weights); over the fuseable ops it is the lower bound within the paper's scope.
    """
    b = boundary(graph, ops)
    return (b.read_elems + b.write_elems + b.weight_elems) * dtype_bytes


def buffer_traffic_elems(graph: ComputeGraph, ops: Iterable[int]) -> int:
    """First-order on-chip buffer accesses: each op reads its inputs and weights, writes its
    output (used for buffer energy; the PE array's register-level reuse is not modelled)."""
    total = 0
    for o in ops:
        op = graph[o]
        total += sum(graph.tensor_elems(r) for r in op.inputs) + op.weight_reads \
            + op.output_elems
    return total


def weight_traffic_elems(graph: ComputeGraph, ops: Iterable[int]) -> int:
    """The weights' share of `buffer_traffic_elems`: each op reads its weights once (an
    embedding the rows its ids select)."""
    return sum(graph[o].weight_reads for o in ops)


def weight_traffic_bytes(graph: ComputeGraph, ops: Iterable[int], hw: HardwareConfig,
                         dram_weight_bytes: int) -> int | None:
    """Bytes of weight accesses a group's buffer sees (`weight_traffic_elems` and the weights
    loaded from DRAM), for pricing split buffers each at its own energy (`simulator.cost.types.
    timing`); None with one shared buffer, where every access costs the same."""
    if not hw.is_split:
        return None
    return weight_traffic_elems(graph, ops) * hw.dtype_bytes + dram_weight_bytes
