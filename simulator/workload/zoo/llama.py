"""A Llama-style decoder (Touvron et al. 2023) in its two inference phases: prefill and decode.

Token ids ``(N, L)`` read rows of an embedding table; pre-norm layers follow (RMSNorm,
grouped-query self-attention with rotary position embeddings, residual add; RMSNorm, SwiGLU MLP
``down(silu(gate(x)) * up(x))``, residual add), then a final RMSNorm and the LM head on the last
token. No biases (Llama's). Grouped-query attention: a K/V head serves ``heads / kv_heads``
query heads, which are stacked as the rows of one product with it (K and V never repeated);
causal in prefill.

The two phases an accelerator is sized for (docs/cost-model.md, section 9.8):

* **prefill** (`LlamaDecoder` called with token ids only): the prompt's L tokens at positions
  0 .. L-1 under a causal mask; outputs the last token's logits ``(N, vocab)`` and every
  layer's K and V ``(N, kv_heads, L, head_dim)``, the KV cache written to DRAM.
* **decode** (called with token ids ``(N, 1)`` and every layer's cached K and V ``(N,
  kv_heads, C, head_dim)``, the KV cache read from DRAM): one new token at position C attends to
  the C cached tokens and itself; outputs its logits and every layer's new K and V ``(N,
  kv_heads, 1, head_dim)``, appended to the cache in DRAM.

Rotary tables, the position ids and the causal mask depend on the shapes only, so an import
has them as constants (the tables as constant operands, the mask as a ``causal_mask`` op).
`example_inputs` gives a phase's inputs for a zoo input shape: ``(N, L)`` for prefill, ``(N, 1,
C)`` for decode (one new token, C cached).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["LLAMA_TINY", "LlamaConfig", "LlamaDecoder", "causal_mask", "example_inputs",
           "llama_tiny"]


@dataclass(frozen=True)
class LlamaConfig:
    """The shape of a Llama-style decoder.

    Attributes:
        layers: Decoder layers.
        hidden: Token width D.
        heads: Query heads (head width D / heads).
        kv_heads: K and V heads (grouped-query attention; ``heads`` a multiple of it).
        intermediate: Width of the SwiGLU MLP.
        vocab: Token ids (embedding rows and logits).
        rope_theta: Rotary embedding base.
        eps: RMSNorm epsilon.
    """

    layers: int = 2
    hidden: int = 256
    heads: int = 8
    kv_heads: int = 2
    intermediate: int = 688
    vocab: int = 4096
    rope_theta: float = 10000.0
    eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        """Width of one head."""
        return self.hidden // self.heads


LLAMA_TINY = LlamaConfig()
"""The zoo's decoder: 2 layers, width 256, 8 query heads and 2 K/V heads of 32, SwiGLU MLP 688,
4,096 token ids; 3,482,880 parameters."""


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@torch.library.custom_op("fusion_dse::causal_mask", mutates_args=())
def causal_mask(scores: Tensor, group: int, offset: int) -> Tensor:
    """Scores ``(..., R, S)`` whose row r is query ``r // group`` (a group of query heads
    sharing one K/V head, token-major) at position ``r // group + offset``: key j kept iff
    j <= that position, -inf elsewhere. One IR op (``causal_mask``, no weights) where an
    additive mask would be a constant of R x S elements."""
    rows, cols = scores.shape[-2:]
    pos = torch.arange(rows, device=scores.device) // group + offset
    keep = torch.arange(cols, device=scores.device)[None, :] <= pos[:, None]
    return scores.masked_fill(~keep, float("-inf"))


@causal_mask.register_fake
def _causal_mask_fake(scores: Tensor, group: int, offset: int) -> Tensor:
    return torch.empty_like(scores)


class Attention(nn.Module):
    """Grouped-query self-attention with rotary embeddings and a K/V cache.

    The ``heads / kv_heads`` query heads sharing a K/V head are stacked as rows of one
    product with it (token-major: row ``t g + i`` is head i of the group at token t), so K and V
    are read once per K/V head and never repeated; the result equals
    ``F.scaled_dot_product_attention(..., enable_gqa=True)``.
    """

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        if cfg.hidden % cfg.heads or cfg.heads % cfg.kv_heads:
            raise ValueError(f"hidden {cfg.hidden}, heads {cfg.heads} and kv_heads "
                             f"{cfg.kv_heads} do not divide")
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, cfg.head_dim
        self.group = cfg.heads // cfg.kv_heads
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, past_k: Tensor | None = None,
                past_v: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Attends tokens ``(N, L, D)`` causally (prefill) or one token to the cache and
        itself (decode); returns the output and this step's K and V ``(N, kv_heads, L,
        head_dim)`` (K rotated)."""
        n, length, _ = x.shape
        kvh, g, hd = self.kv_heads, self.group, self.head_dim
        q = self.q_proj(x).reshape(n, length, self.heads, hd)
        k = self.k_proj(x).reshape(n, length, kvh, hd)
        q = q * cos + _rotate_half(q) * sin
        k = (k * cos + _rotate_half(k) * sin).transpose(1, 2)
        v = self.v_proj(x).reshape(n, length, kvh, hd).transpose(1, 2)
        new_k, new_v = k, v
        if past_k is not None and past_v is not None:
            k, v = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        q = q.reshape(n, length, kvh, g, hd).permute(0, 2, 1, 3, 4).reshape(
            n, kvh, length * g, hd)
        scores = torch.matmul(q, k.transpose(2, 3)) * hd ** -0.5
        if length > 1:
            scores = causal_mask(scores, g, k.shape[2] - length)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        out = out.reshape(n, kvh, length, g, hd).permute(0, 2, 1, 3, 4).reshape(
            n, length, self.heads * hd)
        return self.o_proj(out), new_k, new_v


class MLP(nn.Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """Applies the MLP to tokens ``(N, L, D)``."""
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """A pre-norm decoder layer."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.input_layernorm = nn.RMSNorm(cfg.hidden, eps=cfg.eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = nn.RMSNorm(cfg.hidden, eps=cfg.eps)
        self.mlp = MLP(cfg)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, past_k: Tensor | None = None,
                past_v: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """The layer's output tokens and its K and V for the cache."""
        a, k, v = self.self_attn(self.input_layernorm(x), cos, sin, past_k, past_v)
        x = x + a
        return x + self.mlp(self.post_attention_layernorm(x)), k, v


class LlamaDecoder(nn.Module):
    """Embedding, `DecoderLayer` stack, final RMSNorm and LM head (Hugging Face's
    ``LlamaForCausalLM`` layout, without tied embeddings).

    Args:
        cfg: The decoder's shape.
    """

    def __init__(self, cfg: LlamaConfig = LLAMA_TINY) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.hidden, eps=cfg.eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        half = cfg.head_dim // 2
        inv = 1.0 / cfg.rope_theta ** (torch.arange(half, dtype=torch.float32) / half)
        self.register_buffer("inv_freq", inv, persistent=False)

    def _rotary(self, start: int, length: int) -> tuple[Tensor, Tensor]:
        """cos and sin ``(1, length, 1, head_dim)`` of positions start .. start + length - 1."""
        pos = torch.arange(start, start + length, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)[None, :, None]
        return emb.cos(), emb.sin()

    def forward(self, ids: Tensor, *cache: Tensor) -> tuple[Tensor, ...]:
        """Prefill (`ids` alone) or decode (`ids` ``(N, 1)`` and each layer's cached K and V,
        in layer order: ``k_0, v_0, k_1, v_1, ...``).

        Returns:
            The last token's logits ``(N, vocab)``, then each layer's K and V of this step.
        """
        if cache and len(cache) != 2 * len(self.layers):
            raise ValueError(f"decode takes {2 * len(self.layers)} cache tensors (K and V per "
                             f"layer), not {len(cache)}")
        past = cache[0].shape[2] if cache else 0
        cos, sin = self._rotary(past, ids.shape[1])
        x = self.embed_tokens(ids)
        kv: list[Tensor] = []
        for i, layer in enumerate(self.layers):
            pk, pv = (cache[2 * i], cache[2 * i + 1]) if cache else (None, None)
            x, k, v = layer(x, cos, sin, pk, pv)
            kv += (k, v)
        return (self.lm_head(self.norm(x[:, -1])), *kv)


def llama_tiny() -> LlamaDecoder:
    """The zoo's Llama-style decoder (`LLAMA_TINY`)."""
    return LlamaDecoder(LLAMA_TINY)


def example_inputs(cfg: LlamaConfig, phase: str, shape: tuple[int, ...],
                   seed: int = 0) -> list[Tensor]:
    """A phase's inputs for a zoo input shape: token ids ``(N, L)`` for ``"prefill"``;
    token ids ``(N, 1)`` and each layer's cached K and V ``(N, kv_heads, C, head_dim)`` for
    ``"decode"`` at ``(N, 1, C)``.

    Raises:
        ValueError: A shape of another rank, a decode step of more than one token, or a
            sequence of no tokens.
    """
    gen = torch.Generator().manual_seed(seed)
    if phase == "prefill":
        if len(shape) != 2 or min(shape) < 1:
            raise ValueError(f"prefill takes token ids (N, L), not {shape}")
        return [torch.randint(0, cfg.vocab, shape, generator=gen)]
    if len(shape) != 3 or shape[1] != 1 or min(shape) < 1:
        raise ValueError(f"decode takes (N, 1, C): one new token against C cached ones, not "
                         f"{shape}")
    n, _, ctx = shape
    ids = torch.randint(0, cfg.vocab, (n, 1), generator=gen)
    kv = [torch.randn(n, cfg.kv_heads, ctx, cfg.head_dim, generator=gen)
          for _ in range(2 * cfg.layers)]
    return [ids, *kv]
