"""The validity GNN: graph classification of fusion groups (Mills et al. §III-B, §IV-A).

Four k-GNN layers (Morris et al., "Weisfeiler and Leman Go Neural", AAAI 2019; PyG's
`GraphConv`: h_i' = W1 h_i + W2 sum_{j -> i} h_j) of width 128 with ReLU and sum aggregation,
a sum-pooled graph embedding (the paper's footnote 2) and a small MLP head giving one logit per
graph: positive means "fits the buffer". The output has shape [num_graphs, 1], the shape PyG's
explainers (`GNNExplainer`, `PGExplainer`) expect of a binary graph classifier with
``return_type="raw"``.

The first layer's weights on the op-kind one-hot columns start at zero, so a kind that never
occurs in the training data (resize, say) adds nothing to a prediction instead of a random
initial weight: with no gradient reaching them, Adam leaves them at zero.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn
from torch_geometric.nn import GraphConv, global_add_pool, global_max_pool, global_mean_pool

from explain.features import KINDS, NUM_FEATURES
from simulator.errors import InputError

__all__ = ["GnnSpec", "ValidityGNN"]

_POOLING = {"add": global_add_pool, "mean": global_mean_pool, "max": global_max_pool}
_AGGREGATIONS = ("add", "mean", "max")


@dataclass(frozen=True)
class GnnSpec:
    """The architecture; stored in every checkpoint and compared on loading.

    Attributes:
        in_channels: Node features (`explain.features.NUM_FEATURES`).
        hidden: Width of every GraphConv layer and of the head.
        layers: GraphConv layers.
        aggr: Neighbour aggregation of GraphConv.
        pooling: Graph readout.
        head: Layers of the MLP on the graph embedding.
    """

    in_channels: int = NUM_FEATURES
    hidden: int = 128
    layers: int = 4
    aggr: str = "add"
    pooling: str = "add"
    head: int = 2

    def __post_init__(self) -> None:
        if min(self.in_channels, self.hidden, self.layers, self.head) < 1:
            raise InputError(f"GNN sizes must be positive, got {self}")
        if self.aggr not in _AGGREGATIONS or self.pooling not in _POOLING:
            raise InputError(f"GNN aggregation and pooling must be one of "
                             f"{', '.join(_AGGREGATIONS)}, got {self.aggr!r}, {self.pooling!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (with the class name, so another architecture never matches)."""
        return {"model": "ValidityGNN", **asdict(self)}


class ValidityGNN(nn.Module):
    """GraphConv x `layers` -> sum pooling -> MLP -> one logit per graph."""

    def __init__(self, spec: GnnSpec | None = None) -> None:
        super().__init__()
        self.spec = spec or GnnSpec()
        s = self.spec
        widths = [s.in_channels] + [s.hidden] * s.layers
        self.convs = nn.ModuleList(GraphConv(a, b, aggr=s.aggr)
                                   for a, b in zip(widths, widths[1:], strict=False))
        head: list[nn.Module] = []
        for _ in range(s.head - 1):
            head += [nn.Linear(s.hidden, s.hidden), nn.ReLU()]
        self.head = nn.Sequential(*head, nn.Linear(s.hidden, 1))
        self._zero_kind_weights()

    def _zero_kind_weights(self) -> None:
        first = self.convs[0]
        with torch.no_grad():
            first.lin_rel.weight[:, :len(KINDS)] = 0.0
            first.lin_root.weight[:, :len(KINDS)] = 0.0

    def embed(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Node embeddings after the last GraphConv layer."""
        for conv in self.convs:
            x = torch.relu(conv(x, edge_index))
        return x

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor,
                batch: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of shape [num_graphs, 1] (one graph when `batch` is None)."""
        h = self.embed(x, edge_index)
        if batch is None:
            batch = torch.zeros(h.shape[0], dtype=torch.long, device=h.device)
        return self.head(_POOLING[self.spec.pooling](h, batch))
