"""DeepLabV3 semantic segmentation with a dilated MobileNetV3-Large backbone.

The backbone is the complete ``features`` stack of MobileNetV3-Large whose last
stage uses dilation 2 instead of stride 2 (output stride 16, 960 channels).  The
head is an ASPP module (1x1 branch, three dilated 3x3 branches at rates 12, 24
and 36, and an image-pooling branch) followed by a 3x3 convolution and a 1x1
classifier.  Logits are bilinearly upsampled to the input resolution.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .mobilenet import ConvBNAct, mobilenet_v3_large

__all__ = ["ASPP", "ASPPPooling", "DeepLabHead", "DeepLabV3", "deeplabv3_mobilenet_v3_large"]


class ASPPPooling(nn.Module):
    """ASPP image-level branch: global pooling, 1x1 conv + BN + ReLU, upsampling.

    Args:
        in_channels: Number of input channels.
        out_channels: Number of output channels.
    """

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.conv = ConvBNAct(in_channels, out_channels, kernel_size=1, activation=nn.ReLU)

    def forward(self, x: Tensor) -> Tensor:
        """Computes the pooled branch at the spatial size of ``x``.

        Args:
            x: Input feature map ``(N, in_channels, H, W)``.

        Returns:
            Feature map ``(N, out_channels, H, W)``.
        """
        y = self.conv(self.pool(x))
        return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    """Atrous spatial pyramid pooling.

    Args:
        in_channels: Number of input channels.
        rates: Dilation rates of the 3x3 branches.
        out_channels: Channels of every branch and of the projection.
        dropout: Dropout probability after the projection.
    """

    def __init__(
        self,
        in_channels: int,
        rates: Sequence[int] = (12, 24, 36),
        out_channels: int = 256,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        branches: list[nn.Module] = [
            ConvBNAct(in_channels, out_channels, kernel_size=1, activation=nn.ReLU)
        ]
        branches += [
            ConvBNAct(in_channels, out_channels, kernel_size=3, dilation=rate, activation=nn.ReLU)
            for rate in rates
        ]
        branches.append(ASPPPooling(in_channels, out_channels))
        self.branches = nn.ModuleList(branches)
        self.project = nn.Sequential(
            ConvBNAct(
                len(branches) * out_channels, out_channels, kernel_size=1, activation=nn.ReLU
            ),
            nn.Dropout(p=dropout),
        )

    def forward(self, x: Tensor) -> Tensor:
        """Runs all branches, concatenates them and projects the result.

        Args:
            x: Input feature map ``(N, in_channels, H, W)``.

        Returns:
            Feature map ``(N, out_channels, H, W)``.
        """
        return self.project(torch.cat([branch(x) for branch in self.branches], dim=1))


class DeepLabHead(nn.Sequential):
    """DeepLabV3 head: ASPP, 3x3 conv + BN + ReLU, 1x1 classifier convolution.

    Args:
        in_channels: Channels of the backbone output.
        num_classes: Number of segmentation classes.
        rates: ASPP dilation rates.
    """

    def __init__(
        self, in_channels: int, num_classes: int, rates: Sequence[int] = (12, 24, 36)
    ) -> None:
        super().__init__(
            ASPP(in_channels, rates),
            ConvBNAct(256, 256, kernel_size=3, activation=nn.ReLU),
            nn.Conv2d(256, num_classes, kernel_size=1),
        )


class DeepLabV3(nn.Module):
    """DeepLabV3 segmentation model.

    Args:
        backbone: Feature extractor returning ``backbone_channels`` channels.
        backbone_channels: Channels produced by ``backbone``.
        num_classes: Number of segmentation classes.
    """

    def __init__(self, backbone: nn.Module, backbone_channels: int, num_classes: int = 21) -> None:
        super().__init__()
        self.backbone = backbone
        self.classifier = DeepLabHead(backbone_channels, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """Computes per-pixel logits at the input resolution.

        Args:
            x: Input images of shape ``(N, 3, H, W)``.

        Returns:
            Logits of shape ``(N, num_classes, H, W)``.
        """
        features = self.backbone(x)
        logits = self.classifier(features)
        return F.interpolate(logits, size=x.shape[-2:], mode="bilinear", align_corners=False)


def deeplabv3_mobilenet_v3_large(num_classes: int = 21) -> DeepLabV3:
    """Builds DeepLabV3 with a dilated MobileNetV3-Large backbone (11,025,477 parameters).

    Args:
        num_classes: Number of segmentation classes.

    Returns:
        The DeepLabV3 model (no auxiliary head).
    """
    features = mobilenet_v3_large(dilated=True).features
    backbone_channels = features[-1].out_channels  # 960: the final 160->960 conv block
    return DeepLabV3(features, backbone_channels=backbone_channels, num_classes=num_classes)
