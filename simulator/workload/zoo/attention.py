"""Multi-head self-attention written as its primitives, shared by the zoo's transformers.

The block computes ``softmax(Q K^T / sqrt(d)) V`` per head with separate Q, K and V
projections, in the order in which the torch importer decomposes ``nn.MultiheadAttention``
(``simulator.workload.torch_import.decompose_attention``): each projection followed by its
split into heads, then ``K^T``, the scores, the scaling, the softmax over the keys, the
context, the merge of the heads and the output projection. A zoo transformer therefore
imports to the same graph as the same network written with ``nn.MultiheadAttention``
(torchvision's ViT, ``nn.TransformerEncoderLayer``), and its parameters are those of
``nn.MultiheadAttention`` (``in_proj_weight`` split in three).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["MultiHeadSelfAttention", "load_multihead_attention"]


class MultiHeadSelfAttention(nn.Module):
    """Self-attention over a batch-first token tensor ``(N, L, E)``, without masking.

    Args:
        embed_dim: Token width E.
        num_heads: Heads h; E must be a multiple of h (head width d = E / h).
    """

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not a multiple of num_heads {num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scale = 1 / math.sqrt(self.head_dim)  # as nn.MultiheadAttention computes it
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _heads(self, x: Tensor, n: int, length: int) -> Tensor:
        """(N, L, E) -> (N, h, L, d)."""
        return x.reshape(n, length, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: Tensor) -> Tensor:
        """Attends every token to every token.

        Args:
            x: Tokens ``(N, L, E)``.

        Returns:
            The attention output ``(N, L, E)``.
        """
        n, length, _ = x.shape
        q = self._heads(self.q_proj(x), n, length)
        k = self._heads(self.k_proj(x), n, length)
        v = self._heads(self.v_proj(x), n, length)
        scores = torch.matmul(q, torch.transpose(k, -2, -1)) * self.scale
        context = torch.matmul(torch.softmax(scores, -1), v)
        merged = context.permute(0, 2, 1, 3).reshape(n, length, self.embed_dim)
        return self.out_proj(merged)


def load_multihead_attention(target: MultiHeadSelfAttention, source: nn.MultiheadAttention) -> None:
    """Copy the parameters of a batch-first ``nn.MultiheadAttention`` (packed input
    projection, with biases) into `target`, so that both compute the same function.

    Raises:
        ValueError: The two differ in width or heads, or `source` has separate projection
            weights, no biases or bias_k/bias_v.
    """
    e = target.embed_dim
    if source.embed_dim != e or source.num_heads != target.num_heads \
            or not source._qkv_same_embed_dim or source.in_proj_bias is None \
            or source.bias_k is not None:
        raise ValueError("nn.MultiheadAttention of another shape or kind")
    with torch.no_grad():
        for k, proj in enumerate((target.q_proj, target.k_proj, target.v_proj)):
            proj.weight.copy_(source.in_proj_weight[k * e:(k + 1) * e])
            proj.bias.copy_(source.in_proj_bias[k * e:(k + 1) * e])
        target.out_proj.weight.copy_(source.out_proj.weight)
        target.out_proj.bias.copy_(source.out_proj.bias)
