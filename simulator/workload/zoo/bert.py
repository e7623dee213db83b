"""BERT-base encoder (Devlin et al. 2019) on the embedded token sequence.

The network input is the embedded sequence ``(N, L, 768)``: the sum of the word, position and
segment embeddings, which are table lookups (gathers, no arithmetic) done before the encoder.
The model starts with the embedding LayerNorm and runs 12 post-norm layers: self-attention,
residual add, LayerNorm; feed-forward 768 -> 3072 -> 768 with GELU, residual add, LayerNorm
(``LayerNorm(x + sublayer(x))``, eps 1e-12). The output is the last layer's tokens
``(N, L, 768)``; the pooler and task heads are not part of the encoder. No attention mask: one
unpadded sequence.

Nothing in the encoder depends on L, so the model takes any sequence length (``bert_base@512``,
or L symbolic in `simulator.workload.rdp`), also beyond BERT's 512 position embeddings. A layer
computes what ``nn.TransformerEncoderLayer(768, 12, 3072, activation="gelu",
batch_first=True, norm_first=False, layer_norm_eps=1e-12)`` computes, with the attention
written as its primitives (`MultiHeadSelfAttention`); `load_encoder_layer` copies such a
layer's parameters in.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .attention import MultiHeadSelfAttention, load_multihead_attention

__all__ = ["BertEncoder", "BertLayer", "bert_base", "load_encoder_layer"]

_EPS = 1e-12  # BERT's LayerNorm epsilon


class BertLayer(nn.Module):
    """A post-norm encoder layer.

    Args:
        hidden: Token width.
        heads: Attention heads.
        intermediate: Width of the feed-forward hidden layer.
        eps: LayerNorm epsilon.
    """

    def __init__(self, hidden: int, heads: int, intermediate: int, eps: float = _EPS) -> None:
        super().__init__()
        self.attention = MultiHeadSelfAttention(hidden, heads)
        self.attention_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.activation = nn.GELU()
        self.output = nn.Linear(intermediate, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: Tensor) -> Tensor:
        """Applies the layer to tokens ``(N, L, hidden)``."""
        x = self.attention_norm(x + self.attention(x))
        return self.output_norm(x + self.output(self.activation(self.intermediate(x))))


class BertEncoder(nn.Module):
    """The embedding LayerNorm and a stack of `BertLayer`.

    Args:
        num_layers: Encoder layers.
        hidden: Token width.
        heads: Attention heads.
        intermediate: Width of the feed-forward hidden layer.
        eps: LayerNorm epsilon.
    """

    def __init__(self, num_layers: int = 12, hidden: int = 768, heads: int = 12,
                 intermediate: int = 3072, eps: float = _EPS) -> None:
        super().__init__()
        self.hidden = hidden
        self.embedding_norm = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.Sequential(*(BertLayer(hidden, heads, intermediate, eps)
                                      for _ in range(num_layers)))

    def forward(self, x: Tensor) -> Tensor:
        """Encodes embedded tokens ``(N, L, hidden)`` into ``(N, L, hidden)``."""
        return self.layers(self.embedding_norm(x))


def bert_base() -> BertEncoder:
    """BERT-base's encoder: 12 layers, width 768, 12 heads, feed-forward 3072, GELU;
    85,056,000 parameters (BERT-base's 109,482,240 less the embedding tables and the
    pooler)."""
    return BertEncoder(12, 768, 12, 3072)


def load_encoder_layer(target: BertLayer, source: nn.TransformerEncoderLayer) -> BertLayer:
    """Copy a post-norm, batch-first ``nn.TransformerEncoderLayer``'s parameters into
    `target`, so that both compute the same function; returns `target`.

    Raises:
        ValueError: The layers differ in shape, or `source` normalises first.
    """
    if source.norm_first or not source.self_attn.batch_first \
            or source.linear1.weight.shape != target.intermediate.weight.shape:
        raise ValueError("nn.TransformerEncoderLayer of another shape or kind")
    load_multihead_attention(target.attention, source.self_attn)
    pairs = ((target.attention_norm, source.norm1), (target.intermediate, source.linear1),
             (target.output, source.linear2), (target.output_norm, source.norm2))
    with torch.no_grad():
        for mine, theirs in pairs:
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
    return target
