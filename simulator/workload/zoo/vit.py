"""Vision Transformers: ViT-B/16 and DeiT-S/16 (torchvision's ``VisionTransformer`` layout).

The image is cut into p x p patches by a stride-p convolution, flattened into tokens
``(N, L, D)``, a class token is prepended and a learned position embedding added; pre-norm
encoder blocks (LayerNorm, multi-head self-attention, residual; LayerNorm, MLP with GELU,
residual) follow, then a final LayerNorm, and the class token's features go through a linear
head. The module and parameter layout is torchvision's, with the attention written as its
primitives (`MultiHeadSelfAttention`), so the zoo graph equals torchvision's model imported
through ``from_torch`` op for op (tests/simulator/workload/test_zoo_transformers.py).

The position embedding has one entry per patch, so the model is built for its image size:
``vit_b_16(image_size=384)`` is ViT-B/16 at 384 px (577 tokens), as torchvision builds it for
its 384 px weights; ``load("vit_b_16@384")`` builds it so.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import Tensor, nn

from .attention import MultiHeadSelfAttention, load_multihead_attention

__all__ = ["EncoderBlock", "VisionTransformer", "deit_s", "load_torchvision_vit", "vit_b_16"]

_EPS = 1e-6  # torchvision's (and DeiT's) LayerNorm epsilon


def _pair(size: int | tuple[int, int]) -> tuple[int, int]:
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))


class MLPBlock(nn.Sequential):
    """Linear, GELU, dropout, linear, dropout (torchvision's ``MLPBlock`` indices 0-4)."""

    def __init__(self, in_dim: int, mlp_dim: int, dropout: float = 0.0) -> None:
        super().__init__(nn.Linear(in_dim, mlp_dim), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(mlp_dim, in_dim), nn.Dropout(dropout))


class EncoderBlock(nn.Module):
    """A pre-norm transformer block.

    Args:
        num_heads: Attention heads.
        hidden_dim: Token width D.
        mlp_dim: Width of the MLP's hidden layer.
    """

    def __init__(self, num_heads: int, hidden_dim: int, mlp_dim: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden_dim, eps=_EPS)
        self.self_attention = MultiHeadSelfAttention(hidden_dim, num_heads)
        self.ln_2 = nn.LayerNorm(hidden_dim, eps=_EPS)
        self.mlp = MLPBlock(hidden_dim, mlp_dim)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torchvision's name
        """Applies the block to tokens ``(N, L, D)``."""
        x = self.self_attention(self.ln_1(input))
        x = x + input
        y = self.mlp(self.ln_2(x))
        return x + y


class Encoder(nn.Module):
    """Position embedding, the blocks and the final LayerNorm."""

    def __init__(self, seq_length: int, num_layers: int, num_heads: int, hidden_dim: int,
                 mlp_dim: int) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, seq_length, hidden_dim).normal_(
            std=0.02))
        self.layers = nn.Sequential(OrderedDict(
            (f"encoder_layer_{i}", EncoderBlock(num_heads, hidden_dim, mlp_dim))
            for i in range(num_layers)))
        self.ln = nn.LayerNorm(hidden_dim, eps=_EPS)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torchvision's name
        """Adds the position embedding and runs the blocks."""
        return self.ln(self.layers(input + self.pos_embedding))


class VisionTransformer(nn.Module):
    """ViT with a class token and a linear classification head.

    Args:
        image_size: Input height and width (an int for a square image).
        patch_size: Patch side p; the image is cut into (H // p) x (W // p) patches.
        num_layers: Encoder blocks.
        num_heads: Attention heads per block.
        hidden_dim: Token width D.
        mlp_dim: Width of the MLP's hidden layer.
        num_classes: Output classes.
    """

    def __init__(self, image_size: int | tuple[int, int], patch_size: int, num_layers: int,
                 num_heads: int, hidden_dim: int, mlp_dim: int,
                 num_classes: int = 1000) -> None:
        super().__init__()
        height, width = _pair(image_size)
        if height < patch_size or width < patch_size:
            raise ValueError(f"image size {height}x{width} is smaller than a patch "
                             f"({patch_size})")
        self.image_size = (height, width)
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        self.class_token = nn.Parameter(torch.empty(1, 1, hidden_dim).normal_(std=0.02))
        seq_length = (height // patch_size) * (width // patch_size) + 1
        self.encoder = Encoder(seq_length, num_layers, num_heads, hidden_dim, mlp_dim)
        self.heads = nn.Sequential(OrderedDict(head=nn.Linear(hidden_dim, num_classes)))

    def _process_input(self, x: Tensor) -> Tensor:
        """(N, 3, H, W) -> patch tokens (N, (H // p) (W // p), D)."""
        n, _, h, w = x.shape
        p = self.patch_size
        x = self.conv_proj(x)
        x = x.reshape(n, self.hidden_dim, (h // p) * (w // p))
        return x.permute(0, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        """Classifies images ``(N, 3, H, W)`` (H, W the image size) into ``(N, classes)``."""
        x = self._process_input(x)
        n = x.shape[0]
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        x = self.encoder(x)
        return self.heads(x[:, 0])


def vit_b_16(image_size: int | tuple[int, int] = 224, num_classes: int = 1000) -> VisionTransformer:
    """ViT-B/16 (Dosovitskiy et al. 2021): 12 layers, width 768, 12 heads, MLP 3072;
    86,567,656 parameters at 224 px, as torchvision's ``vit_b_16``."""
    return VisionTransformer(image_size, 16, 12, 12, 768, 3072, num_classes)


def deit_s(image_size: int | tuple[int, int] = 224, num_classes: int = 1000) -> VisionTransformer:
    """DeiT-S/16 (Touvron et al. 2021, ``deit_small_patch16_224``, without the distillation
    token): ViT with 12 layers, width 384, 6 heads, MLP 1536; 22,050,664 parameters at 224 px.
    DeiT differs from ViT in training only."""
    return VisionTransformer(image_size, 16, 12, 6, 384, 1536, num_classes)


def load_torchvision_vit(target: VisionTransformer, source: nn.Module) -> VisionTransformer:
    """Copy a torchvision ``VisionTransformer``'s parameters into a zoo one of the same
    configuration (torchvision's pretrained weights, for instance); returns `target`.

    Raises:
        ValueError: The two differ in configuration.
    """
    own = {k: v for k, v in source.state_dict().items() if ".self_attention." not in k}
    mine = target.state_dict()
    if any(k not in mine or mine[k].shape != v.shape for k, v in own.items()):
        raise ValueError("torchvision VisionTransformer of another configuration")
    with torch.no_grad():
        for key, value in own.items():
            mine[key].copy_(value)
    blocks = zip(target.encoder.layers, source.encoder.layers, strict=True)
    for mine_block, theirs in blocks:
        load_multihead_attention(mine_block.self_attention, theirs.self_attention)
    return target
