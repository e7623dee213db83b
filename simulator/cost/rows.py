"""Row dependencies: which rows of each input an op needs to produce each of its output rows.

Both row-streaming (LBDF) and tiled (BRR) execution reason about tensors as stacks of rows.
Every tensor has a *row axis* (`RowAxes`, docs/cost-model.md section 3): the H of an N,C,H,W
feature map, the tokens L of an (N, L, D) sequence, carried op by op through transposes,
reshapes that keep it, linear layers on the last axis, norms and softmaxes over other axes and
the query side of a matmul; a tensor without one (a flattened vector, the output of a
reduction over its rows) is a single row. Its height H(t) is the row axis's extent and a row
holds the other elements. For op `o` and input slot `i`, ``lo[r]`` and ``hi[r]`` bound the input
rows that output row `r` reads; both arrays are non-decreasing. Ops whose output does not keep
the rows of their input (global pooling, a flatten across the rows, a linear layer or softmax
or norm over the row axis, the key/value side of a matmul, opaque ops) read the whole input
for each output row. For a network of N,C,H,W maps and vectors (every CNN) the axes are those
of the former rank-based rule (H of a rank-4 tensor, none otherwise), so its figures are
unchanged. The arrays depend on the graph alone, so they are computed once per graph and
shared.
"""

from __future__ import annotations

import functools
import math
from functools import lru_cache

import numpy as np

from simulator.workload.graph import ComputeGraph, Op, OpKind, Shape

__all__ = ["RowAxes", "RowDeps", "height", "image_row", "is_embedding", "reduced_axes",
           "row_axes", "row_deps", "row_elems", "slot_window", "token_id_inputs"]

_WINDOWED = {OpKind.CONV, OpKind.DWCONV, OpKind.POOL}
_SPATIAL = _WINDOWED | {OpKind.RESIZE, OpKind.PAD}
_ROWWISE = {OpKind.ELTWISE_UNARY, OpKind.ELTWISE_BINARY, OpKind.BATCHNORM}

# how output rows read an input slot (`RowAxes.mode`)
WHOLE = "whole"  # every output row reads the whole input
RATIO = "ratio"  # row r reads rows floor(r H_in / H_out) .. floor(((r+1) H_in - 1) / H_out)
SPATIAL = "spatial"  # a convolution / pooling window, padding, interpolation (H of N,C,H,W)
_DEFAULT = object()


def default_axis(shape: Shape) -> int | None:
    """The row axis a tensor has by its rank alone: H of an N,C,H,W map, the tokens of an
    (N, L, D) sequence, none otherwise."""
    return 2 if len(shape) == 4 else 1 if len(shape) == 3 else None


def height(shape: Shape, axis: int | None | object = _DEFAULT) -> int:
    """Rows of a tensor along its row `axis` (1 when it has none). Without `axis`, the
    rank-based rule of image networks: H of an N,C,H,W tensor, 1 for any other rank."""
    if axis is _DEFAULT:
        axis = 2 if len(shape) == 4 else None
    return 1 if axis is None else int(shape[axis])  # type: ignore[index]


def row_elems(shape: Shape, axis: int | None | object = _DEFAULT) -> int:
    """Elements of one row (`axis` as for `height`)."""
    return math.prod(shape) // max(1, height(shape, axis))


def image_row(shape: Shape, axis: int | None) -> bool:
    """Whether a tensor streams as image rows of W pixels (an N,C,H,W tensor by H): the LBDF
    pixel model's columns; any other tensor's row is one pixel."""
    return axis == 2 and len(shape) == 4


def is_embedding(op: Op) -> bool:
    """Whether `op` is an embedding: token ids reading rows of a table (its weights)."""
    return op.kind is OpKind.LINEAR and op.op_type == "embedding"


def token_id_inputs(graph: ComputeGraph) -> frozenset[int]:
    """The network inputs that are token ids: (N, L) tensors read by embeddings only. Their
    row axis is the tokens L (axis 1), as the (N, L, D) sequence an embedding makes of them."""
    readers: dict[int, list[Op]] = {}
    for op in graph:
        for ref in op.inputs:
            if ref < 0:
                readers.setdefault(-ref - 1, []).append(op)
    return frozenset(k for k, ops in readers.items()
                     if len(graph.input_shapes[k]) == 2 and all(map(is_embedding, ops)))


class RowAxes:
    """The row axis of every tensor of a graph and how each op's output rows read its inputs.

    Attributes:
        of: Row axis per tensor reference (op id, or -(k+1) for network input k); None: one row.
        mode: Per op, per input slot: ``"whole"``, ``"ratio"``, ``"spatial"``, or
            ``("offset", o)`` (concatenation along the rows: row r reads row r - o) or
            ``("slice", start, step)`` (row r reads row start + r step; a slice that drops the
            row axis reads rows start .. start + step (stop - start) of one output row).
    """

    def __init__(self, graph: ComputeGraph) -> None:
        ids = token_id_inputs(graph)
        self.of: dict[int, int | None] = {-(k + 1): 1 if k in ids else default_axis(s)
                                          for k, s in enumerate(graph.input_shapes)}
        self.mode: list[tuple[object, ...]] = []
        for op in graph:
            axis, modes = _propagate(op, [self.of[r] for r in op.inputs])
            self.of[op.id] = axis
            self.mode.append(modes)

    def height(self, graph: ComputeGraph, ref: int) -> int:
        """Rows of tensor `ref`."""
        return height(graph.tensor_shape(ref), self.of[ref])


@lru_cache(maxsize=64)
def row_axes(graph: ComputeGraph) -> RowAxes:
    """The (cached) row axes of `graph`."""
    return RowAxes(graph)


def _propagate(op: Op, axes: list[int | None]) -> tuple[int | None, tuple[object, ...]]:
    """The row axis of `op`'s output and the mode of each input slot, from its inputs' axes."""
    out = op.output_shape
    rank = len(out)
    whole = (WHOLE,) * len(op.inputs)
    a, s = (axes[0], op.input_shapes[0]) if op.inputs else (None, ())
    kind = op.kind
    if kind in _SPATIAL:  # N,C,H,W windows; anything else is read whole
        if rank == 4 and all(x == 2 and len(t) == 4 for x, t in
                             zip(axes, op.input_shapes, strict=True)) \
                and not (kind is OpKind.POOL and op.attr("adaptive", False)):
            return 2, (SPATIAL,) * len(op.inputs)
        if rank == 4 and kind is OpKind.POOL and a == 2 and len(s) == 4:  # adaptive
            return 2, (RATIO,)
        return _fallback(out), whole
    if kind in _ROWWISE:  # aligned for broadcasting, from the first input with rows
        axis = next((x + rank - len(t) for x, t in zip(axes, op.input_shapes, strict=True)
                     if x is not None), None)
        if axis is None:
            return _fallback(out), whole
        return axis, tuple(RATIO if x is not None and x + rank - len(t) == axis else WHOLE
                           for x, t in zip(axes, op.input_shapes, strict=True))
    if is_embedding(op):  # token row t reads id t and its table row
        return (a, (RATIO,)) if a is not None else (_fallback(out), whole)
    if a is None:
        return _fallback(out), whole
    if kind is OpKind.NORM and a not in _as_axes(op.attr("axes"), len(s)) \
            or kind is OpKind.SOFTMAX and a != int(op.attr("axis", -1)) % len(s) \
            or kind is OpKind.LINEAR and a != len(s) - 1 and len(s) == rank:
        return a, (RATIO,)
    if kind is OpKind.MATMUL and a != len(s) - 1 and len(s) == rank:
        return a, (RATIO, *whole[1:])  # the other operand (all keys) is read whole
    if kind is OpKind.TRANSPOSE and op.attr("perm") is not None:
        return tuple(op.attr("perm")).index(a), (RATIO,)
    if kind is OpKind.RESHAPE and tuple(s[:a]) == tuple(out[:a]) and a < rank \
            and _regroups(s[a:], out[a:]):
        return a, (RATIO,)
    if kind is OpKind.CONCAT:
        return _concat(op, axes)
    if kind is OpKind.SLICE:
        return _slice(op, a)
    return _fallback(out), whole


def _fallback(out: Shape) -> int | None:
    """An output whose rows are not its input's: an N,C,H,W map streams its H rows anew (the
    rank-based rule), any other tensor is one row."""
    return 2 if len(out) == 4 else None


def _regroups(src: Shape, dst: Shape) -> bool:
    """Whether the leading dimension of `dst` is that of `src`, a product of `src`'s leading
    dimensions (rows merged: a flatten of H, W into tokens) or one of whose leading products
    is `src`'s leading dimension (rows split)."""
    if src[0] == dst[0]:
        return True
    big, small = (dst, src) if dst[0] > src[0] else (src, dst)
    prod = 1
    for d in small:
        prod *= d
        if prod >= big[0]:
            return prod == big[0]
    return False


def _concat(op: Op, axes: list[int | None]) -> tuple[int | None, tuple[object, ...]]:
    rank = len(op.output_shape)
    cat = int(op.attr("axis", 1)) % rank
    a = axes[0]
    if any(x != a or len(t) != rank for x, t in zip(axes, op.input_shapes, strict=True)):
        return _fallback(op.output_shape), (WHOLE,) * len(op.inputs)
    if cat != a:
        return a, (RATIO,) * len(op.inputs)
    # along the rows: constant operands (attr const_at / const_shapes) and inputs in order
    consts = dict(zip(op.attr("const_at", ()), op.attr("const_shapes", ()), strict=True))
    modes, at, k = [], 0, 0
    while len(modes) < len(op.inputs):
        if at + k in consts:  # (positions count the inputs and constants together)
            at += int(consts.pop(at + k)[cat])
            k += 1
            continue
        modes.append(("offset", at))
        at += int(op.input_shapes[len(modes) - 1][cat])
        k += 1
    return a, tuple(modes)


def _slice(op: Op, a: int) -> tuple[int | None, tuple[object, ...]]:
    s, out = op.input_shapes[0], op.output_shape
    axis = op.attr("axis")
    if axis is None or int(axis) % len(s) != a:
        if len(out) == len(s):
            return a, (RATIO,)
        return _fallback(out), (WHOLE,)
    start, step = int(op.attr("start", 0)), int(op.attr("step", 1))
    start = start + s[a] if start < 0 else start
    if len(out) == len(s):
        return a, (("slice", start, step),)
    if step > 0 and len(out) == len(s) - 1:  # the row axis dropped: one row, from the rows kept
        return None, (("slice", start, step),)
    return _fallback(out), (WHOLE,)


class RowDeps:
    """Per-op, per-input-slot row dependency arrays of one graph."""

    def __init__(self, graph: ComputeGraph) -> None:
        self.graph = graph
        self.axes = axes = row_axes(graph)
        self.lo: list[tuple[np.ndarray, ...]] = []
        self.hi: list[tuple[np.ndarray, ...]] = []
        for op in graph:
            pairs = [slot_window(op, k, axes=axes) for k in range(len(op.inputs))]
            self.lo.append(tuple(p[0] for p in pairs))
            self.hi.append(tuple(p[1] for p in pairs))
        shapes = {op.id: op.output_shape for op in graph}
        shapes.update({-(k + 1): s for k, s in enumerate(graph.input_shapes)})
        # per tensor, as Python ints, plus what the LBDF schedule asks of every op (hot path)
        self.height_of = {r: height(s, axes.of[r]) for r, s in shapes.items()}
        self.row_elems_of = {r: row_elems(s, axes.of[r]) for r, s in shapes.items()}
        self.heights = np.array([self.height_of[op.id] for op in graph], dtype=np.int64)
        self.row_elems = np.array([self.row_elems_of[op.id] for op in graph], dtype=np.int64)
        self.frac = {ref: np.arange(h, dtype=np.float64) / h for ref, h in self.height_of.items()}
        h_in = [tuple(self.height_of[r] for r in op.inputs) for op in graph]
        self.last = [tuple(_last_reader(lo, h) for lo, h in zip(los, hs, strict=True))
                     for los, hs in zip(self.lo, h_in, strict=True)]
        # lo/hi with a sentinel appended: lo_pad[H_out] = H_in and hi_pad[-1] = -1
        self.lo_pad = [tuple(np.append(lo, h) for lo, h in zip(los, hs, strict=True))
                       for los, hs in zip(self.lo, h_in, strict=True)]
        self.hi_pad = [tuple(np.append(hi, -1) for hi in his) for his in self.hi]
        self.identity = [tuple(len(hi) == h and bool((hi == np.arange(len(hi))).all())
                               for hi, h in zip(his, hs, strict=True))
                         for his, hs in zip(self.hi, h_in, strict=True)]

    @functools.cached_property
    def drops_rows(self) -> tuple[bool, ...]:
        """Per op, whether it leaves rows of an input unread (ViT's class-token slice, a
        strided 1x1 convolution). Only upstream of such a reader may a group compute fewer
        rows of an op than the whole layer (BRR's tile regions hold the rows in-group readers
        need; a tensor leaving the group is computed whole): an op of a group with no such
        reader downstream of it in the group spends its whole MACs."""
        return tuple(not all(_covers(lo, hi, self.height_of[ref])
                             for lo, hi, ref in zip(self.lo[o], self.hi[o], op.inputs,
                                                    strict=True))
                     for o, op in enumerate(self.graph))

    @functools.cached_property
    def computed_whole(self) -> tuple[bool, ...]:
        """Per op, whether every group holding it computes all its output rows: a network
        output, or read over all its rows by an op itself computed whole (down such a chain of
        reads a tensor leaves the group, computed whole, and each read needs every row of the
        one before). Every op of the zoo's CNNs and of BERT; not the ViT encoder, whose only
        way out is the class-token slice."""
        graph, out = self.graph, [False] * len(self.graph)
        for o in reversed(range(len(graph))):  # ids are topological
            out[o] = o in graph.output_set or any(
                out[r] and _covers(self.lo[r][k], self.hi[r][k], self.height_of[o])
                for r in graph.successors(o)
                for k, ref in enumerate(graph[r].inputs) if ref == o)
        return tuple(out)

    def whole_from_rows(self, o: int) -> bool:
        """Whether op `o` makes one row of inputs of several (its rows start anew: a global
        pooling, a flatten). A slice keeping one row of its input (ViT's class token) does
        not: its row is computed with the row it keeps, and the other rows have no reader."""
        return self.height_of[o] == 1 and any(
            self.height_of[r] > 1 and not isinstance(m, tuple)
            for r, m in zip(self.graph[o].inputs, self.axes.mode[o], strict=True))


@lru_cache(maxsize=64)
def row_deps(graph: ComputeGraph) -> RowDeps:
    """The (cached) row dependencies of `graph`."""
    return RowDeps(graph)


def _covers(lo: np.ndarray, hi: np.ndarray, h_in: int) -> bool:
    """Whether the windows [lo[r], hi[r]] (both non-decreasing) read every one of h_in rows."""
    return bool(lo[0] == 0 and hi[-1] == h_in - 1 and (lo[1:] <= hi[:-1] + 1).all())


def _last_reader(lo: np.ndarray, h_in: int) -> np.ndarray:
    """For each input row, the last output row whose window starts at or before it."""
    return np.maximum(np.searchsorted(lo, np.arange(h_in), side="right") - 1, 0)


def slot_window(op: Op, k: int, axis: int = 0,
                axes: RowAxes | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each output row (axis 0) or column (axis 1) of `op`, the first and last row (column)
    of its input slot `k` it reads, clipped (the table of docs/cost-model.md section 3; the
    LBDF pixel model reads it along the width, the columns of image rows). `axes`: the graph's
    row axes (without: those of `op` alone with its inputs' rank-based axes)."""
    if axes is None:
        a_in = default_axis(op.input_shapes[k]) if len(op.input_shapes[k]) == 4 else None
        a_out, modes = _propagate(op, [default_axis(s) if len(s) == 4 else None
                                       for s in op.input_shapes])
        mode = modes[k]
    else:
        a_in, a_out, mode = axes.of[op.inputs[k]], axes.of[op.id], axes.mode[op.id][k]
    s_in, s_out = op.input_shapes[k], op.output_shape
    if axis == 1:  # the columns of image rows; any other row is one pixel
        img_in, img_out = image_row(s_in, a_in), image_row(s_out, a_out)
        n_in, n_out = (int(s_in[3]) if img_in else 1), (int(s_out[3]) if img_out else 1)
        if not (img_in and img_out) or mode not in (SPATIAL, RATIO) or \
                op.kind is OpKind.TRANSPOSE and tuple(op.attr("perm"))[3] != 3 or \
                op.kind in (OpKind.NORM, OpKind.SOFTMAX, OpKind.LINEAR, OpKind.MATMUL) and \
                3 in reduced_axes(op, len(s_in)):
            mode = WHOLE
    else:
        n_in, n_out = height(s_in, a_in), height(s_out, a_out)
    r = np.arange(n_out, dtype=np.int64)
    if mode == WHOLE:
        lo, hi = np.zeros_like(r), np.full_like(r, n_in - 1)
    elif mode == SPATIAL and op.kind in _WINDOWED:
        lo = r * op.stride[axis] - op.padding[axis]
        hi = lo + op.dilation[axis] * (op.kernel[axis] - 1)
    elif mode == SPATIAL and op.kind is OpKind.PAD:
        lo = hi = r - op.padding[axis]
    elif mode == SPATIAL and op.kind is OpKind.RESIZE:
        lo = (r * n_in) // n_out - 1  # covers nearest and (bi)linear interpolation
        hi = ((r + 1) * n_in - 1) // n_out + 1
    elif isinstance(mode, tuple) and mode[0] == "offset":
        lo = hi = r - mode[1]
    elif isinstance(mode, tuple):  # a slice along the rows
        lo = hi = mode[1] + r * mode[2]
    else:  # elementwise, concat, slice, adaptive pooling, row-keeping transposes and reshapes
        lo = (r * n_in) // n_out
        hi = ((r + 1) * n_in - 1) // n_out
    return np.clip(lo, 0, n_in - 1), np.clip(hi, 0, n_in - 1)


def reduced_axes(op: Op, rank: int) -> set[int]:
    """The axes an op reduces or contracts over (norm: attr axes; softmax: attr axis; linear,
    matmul: the last)."""
    if op.kind is OpKind.NORM:
        return _as_axes(op.attr("axes"), rank)
    if op.kind is OpKind.SOFTMAX:
        return {int(op.attr("axis", -1)) % rank}
    return {rank - 1}


def _as_axes(axes: object, rank: int) -> set[int]:
    """The non-negative axes an ``axes`` attribute names (all of them when it is missing)."""
    if axes is None:
        return set(range(rank))
    return {int(a) % rank for a in (axes if isinstance(axes, tuple) else (axes,))}
