"""ResNet-18/50/101/152 (torchvision "v1.5" layout: stride on the 3x3 convolution).

Residual stages are built from :class:`BasicBlock` (ResNet-18) or
:class:`Bottleneck` (ResNet-50 and deeper).  A 1x1 strided convolution with
BatchNorm projects the shortcut whenever the shape changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet50", "resnet101", "resnet152"]


def _downsample(in_channels: int, out_channels: int, stride: int) -> nn.Sequential | None:
    """Builds the projection shortcut, or ``None`` when the identity suffices.

    Args:
        in_channels: Channels entering the block.
        out_channels: Channels leaving the block.
        stride: Spatial stride of the block.

    Returns:
        A 1x1 conv + BatchNorm projection, or ``None``.
    """
    if stride == 1 and in_channels == out_channels:
        return None
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False),
        nn.BatchNorm2d(out_channels),
    )


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual shortcut.

    Args:
        in_channels: Channels entering the block.
        planes: Channels of both convolutions (= output channels).
        stride: Stride of the first convolution.
    """

    expansion: int = 1

    def __init__(self, in_channels: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out_channels = planes * self.expansion
        self.conv1 = nn.Conv2d(in_channels, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU(inplace=False)
        self.conv2 = nn.Conv2d(planes, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.relu2 = nn.ReLU(inplace=False)
        self.downsample = _downsample(in_channels, out_channels, stride)

    def forward(self, x: Tensor) -> Tensor:
        """Applies the block.

        Args:
            x: Input feature map.

        Returns:
            Output feature map.
        """
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand (x4) convolutions with a residual shortcut.

    Args:
        in_channels: Channels entering the block.
        planes: Bottleneck width; the block outputs ``4 * planes`` channels.
        stride: Stride of the 3x3 convolution.
    """

    expansion: int = 4

    def __init__(self, in_channels: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out_channels = planes * self.expansion
        self.conv1 = nn.Conv2d(in_channels, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU(inplace=False)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu2 = nn.ReLU(inplace=False)
        self.conv3 = nn.Conv2d(planes, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu3 = nn.ReLU(inplace=False)
        self.downsample = _downsample(in_channels, out_channels, stride)

    def forward(self, x: Tensor) -> Tensor:
        """Applies the block.

        Args:
            x: Input feature map.

        Returns:
            Output feature map.
        """
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu3(out + identity)


class ResNet(nn.Module):
    """ResNet classifier.

    Args:
        block: Residual block class (:class:`BasicBlock` or :class:`Bottleneck`).
        layers: Number of blocks in each of the four stages.
        num_classes: Number of output classes.
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: Sequence[int],
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=False)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self._in_channels = 64
        self.layer1 = self._make_stage(block, 64, layers[0], stride=1)
        self.layer2 = self._make_stage(block, 128, layers[1], stride=2)
        self.layer3 = self._make_stage(block, 256, layers[2], stride=2)
        self.layer4 = self._make_stage(block, 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten(1)
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _make_stage(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        planes: int,
        num_blocks: int,
        stride: int,
    ) -> nn.Sequential:
        """Builds one residual stage; only its first block may be strided.

        Args:
            block: Residual block class.
            planes: Block width.
            num_blocks: Number of blocks.
            stride: Stride of the first block.

        Returns:
            The stage as an ``nn.Sequential``.
        """
        blocks: list[nn.Module] = []
        for i in range(num_blocks):
            blocks.append(block(self._in_channels, planes, stride if i == 0 else 1))
            self._in_channels = planes * block.expansion
        return nn.Sequential(*blocks)

    def forward(self, x: Tensor) -> Tensor:
        """Computes class logits.

        Args:
            x: Input images of shape ``(N, 3, H, W)``.

        Returns:
            Logits of shape ``(N, num_classes)``.
        """
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = self.flatten(self.avgpool(x))
        return self.fc(x)


def resnet18(num_classes: int = 1000) -> ResNet:
    """Builds ResNet-18 (11,689,512 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.

    Returns:
        The ResNet-18 model.
    """
    return ResNet(BasicBlock, (2, 2, 2, 2), num_classes)


def resnet50(num_classes: int = 1000) -> ResNet:
    """Builds ResNet-50 (25,557,032 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.

    Returns:
        The ResNet-50 model.
    """
    return ResNet(Bottleneck, (3, 4, 6, 3), num_classes)


def resnet101(num_classes: int = 1000) -> ResNet:
    """Builds ResNet-101 (44,549,160 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.

    Returns:
        The ResNet-101 model.
    """
    return ResNet(Bottleneck, (3, 4, 23, 3), num_classes)


def resnet152(num_classes: int = 1000) -> ResNet:
    """Builds ResNet-152 (60,192,808 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.

    Returns:
        The ResNet-152 model.
    """
    return ResNet(Bottleneck, (3, 8, 36, 3), num_classes)
