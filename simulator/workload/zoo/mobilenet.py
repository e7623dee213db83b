"""MobileNetV2 and MobileNetV3 (Small / Large), plus shared building blocks.

Besides the three classifiers this module provides the small helpers that other
zoo models reuse: :func:`make_divisible` (channel rounding),
:class:`ConvBNAct` (convolution + BatchNorm + optional activation) and
:class:`SqueezeExcitation`.  MobileNetV3-Large accepts ``dilated=True`` which
replaces the stride of the last stage with dilation 2 (output stride 16), as
used by the DeepLabV3 segmentation model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import Tensor, nn

__all__ = [
    "ConvBNAct",
    "InvertedResidual",
    "InvertedResidualV3",
    "MobileNetV2",
    "MobileNetV3",
    "SqueezeExcitation",
    "V3BlockConfig",
    "make_divisible",
    "mobilenet_v2",
    "mobilenet_v3_large",
    "mobilenet_v3_large_config",
    "mobilenet_v3_small",
    "mobilenet_v3_small_config",
]

ActivationFactory = Callable[[], nn.Module]


def make_divisible(value: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Rounds a channel count to the nearest multiple of ``divisor``.

    The result never drops below 90% of ``value`` (one extra ``divisor`` is added
    in that case) and never below ``min_value``.

    Args:
        value: The unrounded channel count.
        divisor: The required divisor.
        min_value: Lower bound of the result; defaults to ``divisor``.

    Returns:
        The rounded channel count.
    """
    if min_value is None:
        min_value = divisor
    rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


class ConvBNAct(nn.Sequential):
    """Bias-free convolution followed by BatchNorm2d and an optional activation.

    Padding is chosen so that the spatial size is only reduced by the stride.

    Args:
        in_channels: Number of input channels.
        out_channels: Number of output channels.
        kernel_size: Square kernel size.
        stride: Convolution stride.
        groups: Number of convolution groups (``in_channels`` for depthwise).
        dilation: Convolution dilation.
        activation: Factory of the activation module, or ``None`` for no activation.
        bn_eps: BatchNorm epsilon.
        bn_momentum: BatchNorm momentum.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int = 1,
        groups: int = 1,
        dilation: int = 1,
        activation: ActivationFactory | None = nn.ReLU,
        bn_eps: float = 1e-5,
        bn_momentum: float = 0.1,
    ) -> None:
        padding = (kernel_size - 1) // 2 * dilation
        layers: list[nn.Module] = [
            nn.Conv2d(
                in_channels,
                out_channels,
                kernel_size,
                stride=stride,
                padding=padding,
                dilation=dilation,
                groups=groups,
                bias=False,
            ),
            nn.BatchNorm2d(out_channels, eps=bn_eps, momentum=bn_momentum),
        ]
        if activation is not None:
            layers.append(activation())
        super().__init__(*layers)
        self.out_channels = out_channels


class SqueezeExcitation(nn.Module):
    """Squeeze-and-excitation channel attention.

    Global average pooling, a 1x1 reduction convolution, an activation, a 1x1
    expansion convolution and a gating activation produce per-channel scales
    that multiply the input.

    Args:
        channels: Number of input (and output) channels.
        squeeze_channels: Channels of the bottleneck.
        activation: Factory of the bottleneck activation.
        scale_activation: Factory of the gating activation.
    """

    def __init__(
        self,
        channels: int,
        squeeze_channels: int,
        activation: ActivationFactory = nn.ReLU,
        scale_activation: ActivationFactory = nn.Sigmoid,
    ) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze_channels, kernel_size=1)
        self.activation = activation()
        self.fc2 = nn.Conv2d(squeeze_channels, channels, kernel_size=1)
        self.scale_activation = scale_activation()

    def forward(self, x: Tensor) -> Tensor:
        """Rescales the channels of ``x``.

        Args:
            x: Input feature map ``(N, C, H, W)``.

        Returns:
            Feature map of the same shape as ``x``.
        """
        scale = self.avgpool(x)
        scale = self.activation(self.fc1(scale))
        scale = self.scale_activation(self.fc2(scale))
        return scale * x


# --------------------------------------------------------------------------- MobileNetV2


class InvertedResidual(nn.Module):
    """MobileNetV2 inverted residual block (expand, depthwise, linear project).

    Args:
        in_channels: Number of input channels.
        out_channels: Number of output channels.
        stride: Stride of the depthwise convolution (1 or 2).
        expand_ratio: Expansion factor of the hidden layer.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = int(round(in_channels * expand_ratio))
        self.use_residual = stride == 1 and in_channels == out_channels
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNAct(in_channels, hidden, kernel_size=1, activation=nn.ReLU6))
        layers += [
            ConvBNAct(hidden, hidden, stride=stride, groups=hidden, activation=nn.ReLU6),
            nn.Conv2d(hidden, out_channels, kernel_size=1, bias=False),
            nn.BatchNorm2d(out_channels),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = out_channels

    def forward(self, x: Tensor) -> Tensor:
        """Applies the block (with the identity shortcut when shapes match).

        Args:
            x: Input feature map.

        Returns:
            Output feature map.
        """
        if self.use_residual:
            return x + self.conv(x)
        return self.conv(x)


#: MobileNetV2 stages as (expand ratio t, output channels c, repeats n, first stride s).
MOBILENET_V2_SETTING: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


class MobileNetV2(nn.Module):
    """MobileNetV2 classifier.

    Args:
        num_classes: Number of output classes.
        width_mult: Channel width multiplier.
        dropout: Dropout probability before the final linear layer.
    """

    def __init__(
        self, num_classes: int = 1000, width_mult: float = 1.0, dropout: float = 0.2
    ) -> None:
        super().__init__()
        in_channels = make_divisible(32 * width_mult)
        last_channels = make_divisible(1280 * max(1.0, width_mult))
        layers: list[nn.Module] = [
            ConvBNAct(3, in_channels, stride=2, activation=nn.ReLU6),
        ]
        for t, c, n, s in MOBILENET_V2_SETTING:
            out_channels = make_divisible(c * width_mult)
            for i in range(n):
                stride = s if i == 0 else 1
                layers.append(InvertedResidual(in_channels, out_channels, stride, t))
                in_channels = out_channels
        layers.append(ConvBNAct(in_channels, last_channels, kernel_size=1, activation=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(last_channels, num_classes),
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


def mobilenet_v2(num_classes: int = 1000) -> MobileNetV2:
    """Builds MobileNetV2 (3,504,872 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.

    Returns:
        The MobileNetV2 model.
    """
    return MobileNetV2(num_classes=num_classes)


# --------------------------------------------------------------------------- MobileNetV3

_V3_BN_EPS = 1e-3
_V3_BN_MOMENTUM = 0.01


@dataclass(frozen=True)
class V3BlockConfig:
    """Configuration of one MobileNetV3 inverted residual block.

    Attributes:
        in_channels: Input channels (before width scaling).
        kernel_size: Depthwise kernel size.
        expanded_channels: Hidden channels (before width scaling).
        out_channels: Output channels (before width scaling).
        use_se: Whether the block contains squeeze-and-excitation.
        use_hardswish: Hardswish activation if True, ReLU otherwise.
        stride: Depthwise stride (ignored, i.e. 1, when ``dilation > 1``).
        dilation: Depthwise dilation.
    """

    in_channels: int
    kernel_size: int
    expanded_channels: int
    out_channels: int
    use_se: bool
    use_hardswish: bool
    stride: int
    dilation: int = 1


class InvertedResidualV3(nn.Module):
    """MobileNetV3 block: optional expansion, depthwise conv, optional SE, projection.

    Args:
        cfg: Block configuration.
        width_mult: Channel width multiplier applied to the configuration.
    """

    def __init__(self, cfg: V3BlockConfig, width_mult: float = 1.0) -> None:
        super().__init__()
        in_channels = make_divisible(cfg.in_channels * width_mult)
        expanded = make_divisible(cfg.expanded_channels * width_mult)
        out_channels = make_divisible(cfg.out_channels * width_mult)
        stride = 1 if cfg.dilation > 1 else cfg.stride
        activation: ActivationFactory = nn.Hardswish if cfg.use_hardswish else nn.ReLU
        norm = {"bn_eps": _V3_BN_EPS, "bn_momentum": _V3_BN_MOMENTUM}
        self.use_residual = cfg.stride == 1 and in_channels == out_channels

        layers: list[nn.Module] = []
        if expanded != in_channels:
            layers.append(
                ConvBNAct(in_channels, expanded, kernel_size=1, activation=activation, **norm)
            )
        layers.append(
            ConvBNAct(
                expanded,
                expanded,
                kernel_size=cfg.kernel_size,
                stride=stride,
                groups=expanded,
                dilation=cfg.dilation,
                activation=activation,
                **norm,
            )
        )
        if cfg.use_se:
            layers.append(
                SqueezeExcitation(
                    expanded,
                    make_divisible(expanded // 4),
                    activation=nn.ReLU,
                    scale_activation=nn.Hardsigmoid,
                )
            )
        layers.append(ConvBNAct(expanded, out_channels, kernel_size=1, activation=None, **norm))
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


def mobilenet_v3_large_config(dilated: bool = False) -> tuple[list[V3BlockConfig], int]:
    """Returns the MobileNetV3-Large block configurations and classifier width.

    Args:
        dilated: Use dilation 2 (instead of stride 2) in the last stage.

    Returns:
        The block configurations and the hidden width of the classifier.
    """
    d = 2 if dilated else 1
    c = V3BlockConfig
    blocks = [
        c(16, 3, 16, 16, False, False, 1),
        c(16, 3, 64, 24, False, False, 2),
        c(24, 3, 72, 24, False, False, 1),
        c(24, 5, 72, 40, True, False, 2),
        c(40, 5, 120, 40, True, False, 1),
        c(40, 5, 120, 40, True, False, 1),
        c(40, 3, 240, 80, False, True, 2),
        c(80, 3, 200, 80, False, True, 1),
        c(80, 3, 184, 80, False, True, 1),
        c(80, 3, 184, 80, False, True, 1),
        c(80, 3, 480, 112, True, True, 1),
        c(112, 3, 672, 112, True, True, 1),
        c(112, 5, 672, 160, True, True, 2, d),
        c(160, 5, 960, 160, True, True, 1, d),
        c(160, 5, 960, 160, True, True, 1, d),
    ]
    return blocks, 1280


def mobilenet_v3_small_config(dilated: bool = False) -> tuple[list[V3BlockConfig], int]:
    """Returns the MobileNetV3-Small block configurations and classifier width.

    Args:
        dilated: Use dilation 2 (instead of stride 2) in the last stage.

    Returns:
        The block configurations and the hidden width of the classifier.
    """
    d = 2 if dilated else 1
    c = V3BlockConfig
    blocks = [
        c(16, 3, 16, 16, True, False, 2),
        c(16, 3, 72, 24, False, False, 2),
        c(24, 3, 88, 24, False, False, 1),
        c(24, 5, 96, 40, True, True, 2),
        c(40, 5, 240, 40, True, True, 1),
        c(40, 5, 240, 40, True, True, 1),
        c(40, 5, 120, 48, True, True, 1),
        c(48, 5, 144, 48, True, True, 1),
        c(48, 5, 288, 96, True, True, 2, d),
        c(96, 5, 576, 96, True, True, 1, d),
        c(96, 5, 576, 96, True, True, 1, d),
    ]
    return blocks, 1024


class MobileNetV3(nn.Module):
    """MobileNetV3 classifier.

    ``features`` holds the stem convolution, the inverted residual blocks and the
    final 1x1 convolution (to six times the last block's channels).

    Args:
        blocks: Block configurations.
        last_channels: Hidden width of the classifier.
        num_classes: Number of output classes.
        width_mult: Channel width multiplier.
        dropout: Dropout probability inside the classifier.
    """

    def __init__(
        self,
        blocks: Sequence[V3BlockConfig],
        last_channels: int,
        num_classes: int = 1000,
        width_mult: float = 1.0,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        norm = {"bn_eps": _V3_BN_EPS, "bn_momentum": _V3_BN_MOMENTUM}
        stem_channels = make_divisible(blocks[0].in_channels * width_mult)
        layers: list[nn.Module] = [
            ConvBNAct(3, stem_channels, stride=2, activation=nn.Hardswish, **norm)
        ]
        layers += [InvertedResidualV3(cfg, width_mult) for cfg in blocks]
        block_out = make_divisible(blocks[-1].out_channels * width_mult)
        head_channels = 6 * block_out
        layers.append(
            ConvBNAct(block_out, head_channels, kernel_size=1, activation=nn.Hardswish, **norm)
        )
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.classifier = nn.Sequential(
            nn.Linear(head_channels, last_channels),
            nn.Hardswish(),
            nn.Dropout(p=dropout),
            nn.Linear(last_channels, num_classes),
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


def mobilenet_v3_large(num_classes: int = 1000, dilated: bool = False) -> MobileNetV3:
    """Builds MobileNetV3-Large (5,483,032 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.
        dilated: Replace the last stage's stride with dilation 2 (output stride 16).

    Returns:
        The MobileNetV3-Large model.
    """
    blocks, last_channels = mobilenet_v3_large_config(dilated)
    return MobileNetV3(blocks, last_channels, num_classes=num_classes)


def mobilenet_v3_small(num_classes: int = 1000, dilated: bool = False) -> MobileNetV3:
    """Builds MobileNetV3-Small (2,542,856 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.
        dilated: Replace the last stage's stride with dilation 2 (output stride 16).

    Returns:
        The MobileNetV3-Small model.
    """
    blocks, last_channels = mobilenet_v3_small_config(dilated)
    return MobileNetV3(blocks, last_channels, num_classes=num_classes)
