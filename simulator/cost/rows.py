"""Row dependencies: which rows of each input an op needs to produce each of its output rows.

Both row-streaming (LBDF) and tiled (BRR) execution reason about tensors as stacks of rows
(height H; a row is N x C x W elements). A tensor of rank other than 4 is a single row. For op
`o` and input slot `i`, ``lo[r]`` and ``hi[r]`` bound the input rows that output row `r` reads;
both arrays are non-decreasing. Ops whose output does not keep the rows of their input
(global pooling, flatten, linear on a feature map, softmax, a matmul of two activations, opaque
ops) read the whole input for their single output row. A normalisation (`OpKind.NORM`) reads
its input row by row unless its ``axes`` include the rows (a group norm, whose statistics span
the map): a LayerNorm over the channels of an N,C,H,W tensor is per pixel, like an elementwise
op. The arrays depend on the op alone, so they are computed once per
graph and shared.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from simulator.workload.graph import ComputeGraph, Op, OpKind, Shape

__all__ = ["RowDeps", "height", "row_deps", "row_elems", "slot_window"]

_WINDOWED = {OpKind.CONV, OpKind.DWCONV, OpKind.POOL}
_WHOLE_INPUT = {OpKind.GLOBAL_POOL, OpKind.OPAQUE, OpKind.SOFTMAX, OpKind.LINEAR,
                OpKind.MATMUL}
_PER_POSITION = {OpKind.NORM}  # reductions over attr `axes`: rowwise unless the axes hold rows


def height(shape: Shape) -> int:
    """Rows of a tensor: H of an N,C,H,W tensor, 1 for any other rank."""
    return int(shape[2]) if len(shape) == 4 else 1


def row_elems(shape: Shape) -> int:
    """Elements of one row."""
    return math.prod(shape) // height(shape)


class RowDeps:
    """Per-op, per-input-slot row dependency arrays of one graph."""

    def __init__(self, graph: ComputeGraph) -> None:
        self.graph = graph
        self.lo: list[tuple[np.ndarray, ...]] = []
        self.hi: list[tuple[np.ndarray, ...]] = []
        for op in graph:
            pairs = [slot_window(op, k) for k in range(len(op.inputs))]
            self.lo.append(tuple(p[0] for p in pairs))
            self.hi.append(tuple(p[1] for p in pairs))
        self.heights = np.array([height(op.output_shape) for op in graph], dtype=np.int64)
        self.row_elems = np.array([row_elems(op.output_shape) for op in graph], dtype=np.int64)
        # the same, as Python ints, plus what the LBDF schedule asks of every op (hot path)
        self.height_of = {op.id: height(op.output_shape) for op in graph}
        self.height_of.update({-(k + 1): height(s) for k, s in enumerate(graph.input_shapes)})
        self.row_elems_of = {op.id: row_elems(op.output_shape) for op in graph}
        self.row_elems_of.update({-(k + 1): row_elems(s)
                                  for k, s in enumerate(graph.input_shapes)})
        self.frac = {ref: np.arange(h, dtype=np.float64) / h for ref, h in self.height_of.items()}
        self.last = [tuple(_last_reader(lo, height(s)) for lo, s in zip(los, op.input_shapes,
                                                                        strict=True))
                     for los, op in zip(self.lo, graph, strict=True)]
        # lo/hi with a sentinel appended: lo_pad[H_out] = H_in and hi_pad[-1] = -1
        self.lo_pad = [tuple(np.append(lo, height(s)) for lo, s in zip(los, op.input_shapes,
                                                                       strict=True))
                       for los, op in zip(self.lo, graph, strict=True)]
        self.hi_pad = [tuple(np.append(hi, -1) for hi in his) for his in self.hi]
        self.identity = [tuple(len(hi) == height(s) and bool((hi == np.arange(len(hi))).all())
                               for hi, s in zip(his, op.input_shapes, strict=True))
                         for his, op in zip(self.hi, graph, strict=True)]


@lru_cache(maxsize=64)
def row_deps(graph: ComputeGraph) -> RowDeps:
    """The (cached) row dependencies of `graph`."""
    return RowDeps(graph)


def _last_reader(lo: np.ndarray, h_in: int) -> np.ndarray:
    """For each input row, the last output row whose window starts at or before it."""
    return np.maximum(np.searchsorted(lo, np.arange(h_in), side="right") - 1, 0)


def slot_window(op: Op, k: int, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """For each output row (axis 0) or column (axis 1) of `op`, the first and last row (column)
    of its input slot `k` it reads, clipped (the table of docs/cost-model.md section 3; the
    LBDF pixel model reads it along the width)."""
    dim = 2 + axis  # H or W of an N,C,H,W tensor; any other rank is one row of one pixel
    n_in = int(op.input_shapes[k][dim]) if len(op.input_shapes[k]) == 4 else 1
    n_out = int(op.output_shape[dim]) if len(op.output_shape) == 4 else 1
    r = np.arange(n_out, dtype=np.int64)
    if len(op.output_shape) != 4 or len(op.input_shapes[k]) != 4 or op.kind in _WHOLE_INPUT \
            or op.kind in _PER_POSITION and dim in _as_axes(op.attr("axes"), 4):
        lo, hi = np.zeros_like(r), np.full_like(r, n_in - 1)
    elif op.kind in _WINDOWED and not op.attr("adaptive", False):
        lo = r * op.stride[axis] - op.padding[axis]
        hi = lo + op.dilation[axis] * (op.kernel[axis] - 1)
    elif op.kind is OpKind.PAD:
        lo = hi = r - op.padding[axis]
    elif op.kind is OpKind.RESIZE:
        lo = (r * n_in) // n_out - 1  # covers nearest and (bi)linear interpolation
        hi = ((r + 1) * n_in - 1) // n_out + 1
    else:  # elementwise, concat, slice, adaptive pooling, same-rank transposes
        lo = (r * n_in) // n_out
        hi = ((r + 1) * n_in - 1) // n_out
    return np.clip(lo, 0, n_in - 1), np.clip(hi, 0, n_in - 1)


def _as_axes(axes: object, rank: int) -> set[int]:
    """The non-negative axes an ``axes`` attribute names (all of them when it is missing)."""
    if axes is None:
        return set(range(rank))
    return {int(a) % rank for a in (axes if isinstance(axes, tuple) else (axes,))}
