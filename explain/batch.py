"""Many encoded groups packed into flat arrays, and mini-batches cut from them.

PyG's `DataLoader` collates one `Data` object per graph in Python, which dominates the time of
training a small GNN on tens of thousands of tiny graphs on a CPU. `PackedGraphs` keeps all
groups in a few concatenated arrays instead; `collate` builds the (x, edge_index, batch) of any
list of (group, buffer size) samples with a handful of vectorised gathers. The result is exactly
what ``torch_geometric.data.Batch.from_data_list`` would give for the same graphs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from explain.features import NUM_BASE, NUM_SIZES, GroupGraph, content_digest, node_features

__all__ = ["GraphBatch", "PackedGraphs", "content_ids"]


@dataclass(frozen=True)
class GraphBatch:
    """A mini-batch in PyG's layout.

    Attributes:
        x: (nodes, features) float32 node features.
        edge_index: (2, edges) int64, indices into the batch's nodes.
        batch: (nodes,) int64 graph index of every node.
        num_graphs: Graphs in the batch.
    """

    x: torch.Tensor
    edge_index: torch.Tensor
    batch: torch.Tensor
    num_graphs: int


def _ranges(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ranges [start, start + count) and each range's offset in the result."""
    offsets = np.cumsum(counts) - counts
    rows = np.repeat(starts - offsets, counts) + np.arange(int(counts.sum()), dtype=np.int64)
    return rows, offsets


@dataclass(frozen=True)
class PackedGraphs:
    """Encoded groups in flat arrays; group g owns node rows node_ptr[g]:node_ptr[g + 1].

    Attributes:
        base: (nodes, `NUM_BASE`) float32 static and context features.
        sizes: (nodes, `NUM_SIZES`) float64 byte sizes.
        edges: (2, edges) int64 local node indices of each group's edges.
        node_ptr: (groups + 1,) int64 node offsets.
        edge_ptr: (groups + 1,) int64 edge offsets.
    """

    base: np.ndarray
    sizes: np.ndarray
    edges: np.ndarray
    node_ptr: np.ndarray
    edge_ptr: np.ndarray

    @classmethod
    def pack(cls, groups: Sequence[GroupGraph]) -> PackedGraphs:
        """Concatenate encoded groups."""
        node_counts = [g.num_nodes for g in groups]
        edge_counts = [g.edge_index.shape[1] for g in groups]
        return cls(
            base=np.concatenate([g.base for g in groups]) if groups
            else np.zeros((0, NUM_BASE), np.float32),
            sizes=np.concatenate([g.sizes for g in groups]) if groups
            else np.zeros((0, NUM_SIZES)),
            edges=np.concatenate([g.edge_index for g in groups], axis=1) if groups
            else np.zeros((2, 0), np.int64),
            node_ptr=np.concatenate(([0], np.cumsum(node_counts))).astype(np.int64),
            edge_ptr=np.concatenate(([0], np.cumsum(edge_counts))).astype(np.int64),
        )

    def __len__(self) -> int:
        return len(self.node_ptr) - 1

    def num_nodes(self) -> np.ndarray:
        """Nodes of every group."""
        return np.diff(self.node_ptr)

    def group(self, g: int) -> GroupGraph:
        """Group `g` as a `GroupGraph`."""
        a, b = self.node_ptr[g], self.node_ptr[g + 1]
        e0, e1 = self.edge_ptr[g], self.edge_ptr[g + 1]
        return GroupGraph(self.base[a:b], self.sizes[a:b], self.edges[:, e0:e1])

    def collate(self, groups: np.ndarray, buffer_bytes: np.ndarray) -> GraphBatch:
        """The batch of samples (groups[i] at buffer_bytes[i]: a size, or a row of split
        capacities, `explain.features.capacities`)."""
        groups = np.asarray(groups, dtype=np.int64)
        counts = self.node_ptr[groups + 1] - self.node_ptr[groups]
        rows, offsets = _ranges(self.node_ptr[groups], counts)
        edge_counts = self.edge_ptr[groups + 1] - self.edge_ptr[groups]
        edge_rows, _ = _ranges(self.edge_ptr[groups], edge_counts)
        edge_index = self.edges[:, edge_rows] + np.repeat(offsets, edge_counts)
        beta = np.repeat(np.asarray(buffer_bytes, dtype=np.float64), counts, axis=0)
        x = node_features(self.base[rows], self.sizes[rows], beta)
        return GraphBatch(
            x=torch.from_numpy(x),
            edge_index=torch.from_numpy(np.ascontiguousarray(edge_index)),
            batch=torch.from_numpy(np.repeat(np.arange(len(groups), dtype=np.int64), counts)),
            num_graphs=len(groups),
        )


def content_ids(packed: PackedGraphs) -> np.ndarray:
    """A dense id per group; groups with identical encodings (features and edges) share it."""
    ids: dict[bytes, int] = {}
    out = np.empty(len(packed), dtype=np.int64)
    for g in range(len(packed)):
        out[g] = ids.setdefault(content_digest(packed.group(g)), len(ids))
    return out
