"""EfficientNet-B0 and EfficientNet-B3 (torchvision's EfficientNet "v1" layout).

The network is a stem convolution, seven stages of MBConv blocks (inverted
residuals with squeeze-and-excitation and SiLU activations), a 1x1 head
convolution to four times the last stage's width, global pooling and a
dropout + linear classifier.  B3 scales widths by 1.2 and depths by 1.4.
Stochastic depth only acts during training and is therefore omitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import Tensor, nn

from .mobilenet import ConvBNAct, SqueezeExcitation, make_divisible

__all__ = [
    "EFFICIENTNET_B0_STAGES",
    "EfficientNet",
    "MBConv",
    "MBConvStage",
    "efficientnet_b0",
    "efficientnet_b3",
]


@dataclass(frozen=True)
class MBConvStage:
    """One stage of EfficientNet-B0 (before width/depth scaling).

    Attributes:
        expand_ratio: Expansion factor of the hidden layer.
        kernel_size: Depthwise kernel size.
        stride: Stride of the stage's first block.
        in_channels: Input channels of the stage.
        out_channels: Output channels of the stage.
        num_layers: Number of blocks.
    """

    expand_ratio: int
    kernel_size: int
    stride: int
    in_channels: int
    out_channels: int
    num_layers: int


#: The EfficientNet-B0 baseline stages.
EFFICIENTNET_B0_STAGES: tuple[MBConvStage, ...] = (
    MBConvStage(1, 3, 1, 32, 16, 1),
    MBConvStage(6, 3, 2, 16, 24, 2),
    MBConvStage(6, 5, 2, 24, 40, 2),
    MBConvStage(6, 3, 2, 40, 80, 3),
    MBConvStage(6, 5, 1, 80, 112, 3),
    MBConvStage(6, 5, 2, 112, 192, 4),
    MBConvStage(6, 3, 1, 192, 320, 1),
)


class MBConv(nn.Module):
    """Mobile inverted bottleneck with squeeze-and-excitation.

    Args:
        in_channels: Number of input channels.
        out_channels: Number of output channels.
        kernel_size: Depthwise kernel size.
        stride: Depthwise stride.
        expand_ratio: Expansion factor of the hidden layer.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        expand_ratio: int,
    ) -> None:
        super().__init__()
        expanded = make_divisible(in_channels * expand_ratio)
        self.use_residual = stride == 1 and in_channels == out_channels
        layers: list[nn.Module] = []
        if expanded != in_channels:
            layers.append(ConvBNAct(in_channels, expanded, kernel_size=1, activation=nn.SiLU))
        layers += [
            ConvBNAct(
                expanded,
                expanded,
                kernel_size=kernel_size,
                stride=stride,
                groups=expanded,
                activation=nn.SiLU,
            ),
            SqueezeExcitation(
                expanded,
                max(1, in_channels // 4),
                activation=nn.SiLU,
                scale_activation=nn.Sigmoid,
            ),
            ConvBNAct(expanded, out_channels, kernel_size=1, activation=None),
        ]
        self.block = nn.Sequential(*layers)
        self.out_channels = out_channels

    def forward(self, x: Tensor) -> Tensor:
        """Applies the block (with the identity shortcut when shapes match).

        Args:
            x: Input feature map.

        Returns:
            Output feature map.
        """
        if self.use_residual:
            return x + self.block(x)
        return self.block(x)


class EfficientNet(nn.Module):
    """EfficientNet classifier.

    Args:
        width_mult: Channel width multiplier.
        depth_mult: Block-count multiplier (rounded up per stage).
        dropout: Dropout probability before the classifier.
        num_classes: Number of output classes.
        stages: Baseline (B0) stage configuration.
    """

    def __init__(
        self,
        width_mult: float = 1.0,
        depth_mult: float = 1.0,
        dropout: float = 0.2,
        num_classes: int = 1000,
        stages: tuple[MBConvStage, ...] = EFFICIENTNET_B0_STAGES,
    ) -> None:
        super().__init__()

        def width(channels: int) -> int:
            return make_divisible(channels * width_mult)

        layers: list[nn.Module] = [
            ConvBNAct(3, width(stages[0].in_channels), stride=2, activation=nn.SiLU)
        ]
        for stage in stages:
            in_channels = width(stage.in_channels)
            out_channels = width(stage.out_channels)
            blocks: list[nn.Module] = []
            for i in range(int(math.ceil(stage.num_layers * depth_mult))):
                blocks.append(
                    MBConv(
                        in_channels if i == 0 else out_channels,
                        out_channels,
                        stage.kernel_size,
                        stage.stride if i == 0 else 1,
                        stage.expand_ratio,
                    )
                )
            layers.append(nn.Sequential(*blocks))
        head_in = width(stages[-1].out_channels)
        head_out = 4 * head_in
        layers.append(ConvBNAct(head_in, head_out, kernel_size=1, activation=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(head_out, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        """Computes class logits.

        Args:
            x: Input images of shape ``(N, 3, H, W)``.

        Returns:
            Logits of shape ``(N, num_classes)``.
        """
        x = self.features(x)
        x = self.flatten(self.avgpool(x))
        return self.classifier(x)


def efficientnet_b0(num_classes: int = 1000) -> EfficientNet:
    """Builds EfficientNet-B0 (5,288,548 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.

    Returns:
        The EfficientNet-B0 model.
    """
    return EfficientNet(width_mult=1.0, depth_mult=1.0, dropout=0.2, num_classes=num_classes)


def efficientnet_b3(num_classes: int = 1000) -> EfficientNet:
    """Builds EfficientNet-B3 (12,233,232 parameters at 1000 classes; 300x300 input).

    Args:
        num_classes: Number of output classes.

    Returns:
        The EfficientNet-B3 model.
    """
    return EfficientNet(width_mult=1.2, depth_mult=1.4, dropout=0.3, num_classes=num_classes)
