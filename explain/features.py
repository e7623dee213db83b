"""Node-feature encoding of fusion groups for the validity GNN (feature schema, versioned).

A fusion group becomes a small graph: one node per op (in ascending op id), one directed edge
per internal producer -> consumer edge (`ComputeGraph.internal_edges`). Edges keep the
dataflow's direction so that an explainer's edge mask maps one to one onto the IR edges the
splitter may cut (Mills et al. §III-B, Eq. 4), and GraphConv's separate root and neighbour
weights see "what feeds me" rather than an undirected neighbourhood.

Every node carries `NUM_FEATURES` numbers (schema `FEATURE_SCHEMA_VERSION`, listed in
`FEATURE_SCHEMA` and docs/gnn.md), in three parts:

* static: op kind one-hot, the largest input's and the output's (channels, height, width),
  the input count, weight size, kernel, stride and dilation, all log-scaled where they are
  magnitudes; they depend on the op alone;
* context: how many of the op's inputs come from outside the group and whether its tensor
  leaves the group; they depend on the group;
* buffer: log2 of the buffer size, and five of the op's byte sizes (weights, line buffer,
  largest input tensor, output tensor, one output row) as fractions of the buffer, clipped.
  Sum pooling of these fractions approximates the group's F_beta / buffer, the quantity the
  label thresholds, which is why they are there.

The static and context parts are stored once per group (`GroupGraph`); the buffer part is
derived for any buffer size by `node_features`, so one stored group serves every buffer size.

Split buffers (a weight buffer and an activation buffer): each fraction is taken of the
capacity that holds it, the weights of the weight buffer, the four activation sizes of the
activation buffer, and the log2 feature is of the total (`capacities`). With one shared buffer
every capacity is that buffer, so the features (and the shipped checkpoints' inputs) are
exactly those of a shared buffer; the feature vector keeps its length and schema.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from simulator.cost.rows import height, row_elems
from simulator.errors import InputError
from simulator.workload.graph import ComputeGraph, Op, OpKind, Shape

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = [
    "BUFFER_REFERENCE_BYTES",
    "FEATURE_SCHEMA",
    "FEATURE_SCHEMA_VERSION",
    "KINDS",
    "KIND_ALIASES",
    "NUM_BASE",
    "NUM_FEATURES",
    "NUM_SIZES",
    "RATIO_CLIP",
    "GroupGraph",
    "content_digest",
    "encode_group",
    "capacities",
    "line_buffer_elems",
    "node_features",
    "static_features",
]

FEATURE_SCHEMA_VERSION = 1
"""Bump whenever a feature is added, removed, reordered or computed differently."""

KINDS: tuple[OpKind, ...] = (
    OpKind.CONV, OpKind.DWCONV, OpKind.POOL, OpKind.GLOBAL_POOL, OpKind.ELTWISE_UNARY,
    OpKind.ELTWISE_BINARY, OpKind.BATCHNORM, OpKind.CONCAT, OpKind.SLICE, OpKind.LINEAR,
    OpKind.RESIZE, OpKind.PAD, OpKind.RESHAPE, OpKind.TRANSPOSE, OpKind.SOFTMAX, OpKind.OPAQUE,
)
"""Op kinds in one-hot order (fixed here, not taken from the enum, so the schema is stable)."""

KIND_ALIASES: dict[OpKind, OpKind] = {
    OpKind.NORM: OpKind.BATCHNORM,
    OpKind.MATMUL: OpKind.LINEAR,
}
"""Kinds added after schema version 1, one-hot encoded in the slot of the `KINDS` kind closest
in cost behaviour, so that the shipped checkpoints read them without retraining: a
normalisation (LayerNorm, GroupNorm, RMSNorm) as a batchnorm (a per-channel affine map with
tiny weights; a group norm's whole-map statistics show in its line-buffer feature), a product
of two activations as a linear layer (a product over the last axis; no weights)."""

BUFFER_REFERENCE_BYTES = 128 * 1024
"""Buffer size whose log feature is 0 (the smallest buffer of the paper's sweep)."""

RATIO_CLIP = 4.0
"""Byte-to-buffer fractions are clipped here: anything above 1 already cannot fit."""

_LOG_MAGNITUDE = 16.0  # log2(1 + x) / 16 keeps tensor and weight magnitudes near [0, 2]

FEATURE_SCHEMA: tuple[tuple[str, str], ...] = (
    *((f"kind_{k.value}", f"1 if the op kind is {k.value}") for k in KINDS),
    ("in_channels", "largest input: log2(1 + elements / (H W)) / 16"),
    ("in_height", "largest input: log2(1 + H) / 16 (H = 1 for a tensor of rank other than 4)"),
    ("in_width", "largest input: log2(1 + W) / 16"),
    ("out_channels", "output: log2(1 + elements / (H W)) / 16"),
    ("out_height", "output: log2(1 + H) / 16"),
    ("out_width", "output: log2(1 + W) / 16"),
    ("n_inputs", "number of input tensors / 4"),
    ("weight_bytes", "log2(1 + weight bytes) / 16"),
    ("kernel_h", "log2(kernel height)"),
    ("kernel_w", "log2(kernel width)"),
    ("stride_h", "log2(stride height)"),
    ("stride_w", "log2(stride width)"),
    ("dilation", "log2(max dilation)"),
    ("inputs_from_outside", "inputs read from outside the group (DRAM) / 4"),
    ("leaves_group", "1 if the output is consumed outside the group or is a network output"),
    ("buffer", "log2(buffer bytes / 128 KiB)"),
    ("weight_frac", "weight bytes / buffer bytes, clipped to [0, 4]"),
    ("line_buffer_frac", "line-buffer bytes / buffer bytes, clipped to [0, 4]"),
    ("in_tensor_frac", "largest input tensor bytes / buffer bytes, clipped to [0, 4]"),
    ("out_tensor_frac", "output tensor bytes / buffer bytes, clipped to [0, 4]"),
    ("out_row_frac", "one output row's bytes / buffer bytes, clipped to [0, 4]"),
)
"""(name, definition) of every node feature, in column order."""

NUM_FEATURES = len(FEATURE_SCHEMA)
NUM_SIZES = 5
"""Byte sizes per op behind the buffer fractions (the last `NUM_SIZES` features)."""
NUM_BASE = NUM_FEATURES - 1 - NUM_SIZES
"""Static plus context features: everything that does not depend on the buffer size."""
_WINDOWED = (OpKind.CONV, OpKind.DWCONV, OpKind.POOL)
_WHOLE_INPUT = (OpKind.OPAQUE, OpKind.SOFTMAX, OpKind.LINEAR, OpKind.MATMUL)


@dataclass(frozen=True)
class GroupGraph:
    """A fusion group encoded independently of the buffer size.

    Attributes:
        base: (nodes, `NUM_BASE`) float32: static and context features, nodes in op-id order.
        sizes: (nodes, `NUM_SIZES`) float64 byte sizes behind the buffer fractions.
        edge_index: (2, edges) int64 local node indices, producer row 0, consumer row 1.
    """

    base: np.ndarray
    sizes: np.ndarray
    edge_index: np.ndarray

    @property
    def num_nodes(self) -> int:
        """Nodes (ops) of the group."""
        return int(self.base.shape[0])


def content_digest(group: GroupGraph) -> bytes:
    """A digest equal for groups with identical encodings (repeated blocks of a network)."""
    h = hashlib.blake2b(digest_size=16)
    for part in (group.base, group.sizes, group.edge_index):
        h.update(np.ascontiguousarray(part).tobytes())
    return h.digest()


def _chw(shape: Shape) -> tuple[int, int, int]:
    """(channels, height, width) in the row model of `simulator.cost.rows`."""
    h = height(shape)
    w = int(shape[3]) if len(shape) == 4 else 1
    return math.prod(shape) // (h * w), h, w


def _lg(x: float) -> float:
    return math.log2(1.0 + x) / _LOG_MAGNITUDE


def _largest_input(op: Op) -> Shape:
    return max(op.input_shapes, key=math.prod, default=op.output_shape)


def line_buffer_elems(op: Op) -> int:
    """Input elements the op holds to produce one output row, in the LBDF row model.

    A windowed op keeps d(k - 1) + 1 + stride rows of its input (DESIGN.md, LBDF); a global
    pooling folds rows in as they arrive (one row); an op that needs its whole input (linear,
    softmax, a product of two activations, a normalisation whose axes hold the rows, opaque,
    or any rank change) keeps all of it; every other op reads one row of each input.
    """
    if op.kind is OpKind.GLOBAL_POOL:
        return sum(row_elems(s) for s in op.input_shapes)
    if op.kind in _WHOLE_INPUT or len(op.output_shape) != 4 or (
            op.kind is OpKind.NORM and 2 in {a % 4 for a in op.attr("axes", (2,))}):
        return sum(math.prod(s) for s in op.input_shapes)
    total = 0
    for s in op.input_shapes:
        rows = 1
        if op.kind in _WINDOWED and not op.attr("adaptive", False):
            rows = op.dilation[0] * (op.kernel[0] - 1) + 1 + op.stride[0]
        total += row_elems(s) * min(rows, height(s)) if len(s) == 4 else math.prod(s)
    return total


def _static_row(op: Op, dtype_bytes: int) -> list[float]:
    kind = KIND_ALIASES.get(op.kind, op.kind)
    one_hot = [float(kind is k) for k in KINDS]
    ci, hi, wi = _chw(_largest_input(op))
    co, ho, wo = _chw(op.output_shape)
    return [
        *one_hot, _lg(ci), _lg(hi), _lg(wi), _lg(co), _lg(ho), _lg(wo),
        len(op.inputs) / 4.0, _lg(op.weight_elems * dtype_bytes),
        math.log2(max(op.kernel[0], 1)), math.log2(max(op.kernel[1], 1)),
        math.log2(max(op.stride[0], 1)), math.log2(max(op.stride[1], 1)),
        math.log2(max(max(op.dilation), 1)),
    ]


def _size_row(op: Op) -> list[float]:
    return [
        float(op.weight_elems), float(line_buffer_elems(op)),
        float(math.prod(_largest_input(op))), float(op.output_elems),
        float(row_elems(op.output_shape)),
    ]


@lru_cache(maxsize=32)
def static_features(graph: ComputeGraph, dtype_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-op static features and byte sizes of a whole graph (cached per graph, read-only).

    Returns:
        (ops, static features) float32 and (ops, `NUM_SIZES`) float64 byte sizes.
    """
    static = np.array([_static_row(op, dtype_bytes) for op in graph], dtype=np.float32)
    sizes = np.array([_size_row(op) for op in graph], dtype=np.float64) * dtype_bytes
    static.setflags(write=False)  # shared by every caller through the cache
    sizes.setflags(write=False)
    return static, sizes


def _context(graph: ComputeGraph, ops: Sequence[int]) -> np.ndarray:
    members = set(ops)
    outputs = graph.output_set
    rows = [
        (sum(r not in members for r in graph[o].inputs) / 4.0,
         float(o in outputs or any(c not in members for c in graph.successors(o))))
        for o in ops
    ]
    return np.array(rows, dtype=np.float32).reshape(len(ops), 2)


def encode_group(graph: ComputeGraph, ops: Sequence[int], dtype_bytes: int = 1) -> GroupGraph:
    """Encode the group `ops` of `graph` (any order; duplicates are an error).

    Args:
        graph: The network.
        ops: Op ids of the group.
        dtype_bytes: Bytes per tensor element (the hardware's ``dtype_bytes``).

    Raises:
        InputError: An empty group, a repeated op or an id outside the graph.
    """
    order = sorted(ops)
    if not order or len(set(order)) != len(order) or not 0 <= order[0] <= order[-1] < len(graph):
        raise InputError(f"cannot encode group {list(ops)[:8]} of {graph.name!r}: it must list "
                         f"distinct op ids in 0..{len(graph) - 1}")
    static, sizes = static_features(graph, dtype_bytes)
    index = np.asarray(order, dtype=np.int64)
    base = np.concatenate([static[index], _context(graph, order)], axis=1)
    local = {o: k for k, o in enumerate(order)}
    edges = [(local[i], local[j]) for i, j in graph.internal_edges(order)]
    edge_index = np.array(edges, dtype=np.int64).reshape(-1, 2).T.copy()
    return GroupGraph(base=base, sizes=sizes[index].copy(), edge_index=edge_index)


def capacities(hw: HardwareConfig) -> int | tuple[int, int, int]:
    """What `node_features` takes for `hw` (hashable, a memo key too): its buffer size, or
    with split buffers (total, weight buffer, activation buffer)."""
    if not hw.is_split:
        return hw.buffer_bytes
    return hw.buffer_bytes, hw.weight_capacity, hw.activation_capacity


def node_features(base: np.ndarray, sizes: np.ndarray,
                  buffer_bytes: float | np.ndarray | tuple[int, int, int]) -> np.ndarray:
    """The full node-feature matrix at a buffer size (one per node, or one for all).

    Args:
        base: (nodes, `NUM_BASE`) static and context features.
        sizes: (nodes, `NUM_SIZES`) byte sizes.
        buffer_bytes: The buffer size, a scalar or one value per node; or split buffers
            (`capacities`): a tuple (total, weight buffer, activation buffer), or an array
            with one such row per node.

    Returns:
        (nodes, `NUM_FEATURES`) float32.
    """
    n = base.shape[0]
    caps = np.asarray(buffer_bytes, dtype=np.float64)
    if isinstance(buffer_bytes, tuple) or caps.ndim == 2:
        caps = np.broadcast_to(caps.reshape(-1, 3), (n, 3))
        beta = caps[:, 0]
        per = np.concatenate([caps[:, 1:2], np.repeat(caps[:, 2:3], NUM_SIZES - 1, axis=1)],
                             axis=1)
    else:
        beta = np.broadcast_to(caps, (n,))
        per = beta[:, None]
    log_buffer = np.log2(beta / BUFFER_REFERENCE_BYTES)[:, None]
    fractions = np.clip(sizes / per, 0.0, RATIO_CLIP)
    return np.concatenate([base, log_buffer, fractions], axis=1).astype(np.float32)
