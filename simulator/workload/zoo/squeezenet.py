"""SqueezeNet 1.0 and 1.1.

Both versions are built from "Fire" modules: a 1x1 squeeze convolution followed
by parallel 1x1 and 3x3 expand convolutions whose outputs are concatenated.
Classification is done by a 1x1 convolution followed by global average pooling.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["Fire", "SqueezeNet", "squeezenet1_0", "squeezenet1_1"]


class Fire(nn.Module):
    """SqueezeNet Fire module.

    Args:
        in_channels: Number of input channels.
        squeeze_channels: Output channels of the 1x1 squeeze convolution.
        expand1x1_channels: Output channels of the 1x1 expand convolution.
        expand3x3_channels: Output channels of the 3x3 expand convolution.
    """

    def __init__(
        self,
        in_channels: int,
        squeeze_channels: int,
        expand1x1_channels: int,
        expand3x3_channels: int,
    ) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(in_channels, squeeze_channels, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=False)
        self.expand1x1 = nn.Conv2d(squeeze_channels, expand1x1_channels, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=False)
        self.expand3x3 = nn.Conv2d(squeeze_channels, expand3x3_channels, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=False)

    def forward(self, x: Tensor) -> Tensor:
        """Applies squeeze, both expand branches and concatenates them on channels.

        Args:
            x: Input feature map ``(N, in_channels, H, W)``.

        Returns:
            Feature map ``(N, expand1x1_channels + expand3x3_channels, H, W)``.
        """
        x = self.squeeze_activation(self.squeeze(x))
        left = self.expand1x1_activation(self.expand1x1(x))
        right = self.expand3x3_activation(self.expand3x3(x))
        return torch.cat([left, right], dim=1)


def _pool() -> nn.MaxPool2d:
    """Returns SqueezeNet's 3x3/2 max-pool with ceil rounding."""
    return nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)


class SqueezeNet(nn.Module):
    """SqueezeNet classifier.

    Args:
        version: ``"1_0"`` or ``"1_1"``.
        num_classes: Number of output classes.
        dropout: Dropout probability before the final convolution.

    Raises:
        ValueError: If ``version`` is not supported.
    """

    def __init__(self, version: str = "1_0", num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        if version == "1_0":
            self.features = nn.Sequential(
                nn.Conv2d(3, 96, kernel_size=7, stride=2),
                nn.ReLU(inplace=False),
                _pool(),
                Fire(96, 16, 64, 64),
                Fire(128, 16, 64, 64),
                Fire(128, 32, 128, 128),
                _pool(),
                Fire(256, 32, 128, 128),
                Fire(256, 48, 192, 192),
                Fire(384, 48, 192, 192),
                Fire(384, 64, 256, 256),
                _pool(),
                Fire(512, 64, 256, 256),
            )
        elif version == "1_1":
            self.features = nn.Sequential(
                nn.Conv2d(3, 64, kernel_size=3, stride=2),
                nn.ReLU(inplace=False),
                _pool(),
                Fire(64, 16, 64, 64),
                Fire(128, 16, 64, 64),
                _pool(),
                Fire(128, 32, 128, 128),
                Fire(256, 32, 128, 128),
                _pool(),
                Fire(256, 48, 192, 192),
                Fire(384, 48, 192, 192),
                Fire(384, 64, 256, 256),
                Fire(512, 64, 256, 256),
            )
        else:
            raise ValueError(f"unsupported SqueezeNet version {version!r}")
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Conv2d(512, num_classes, kernel_size=1),
            nn.ReLU(inplace=False),
            nn.AdaptiveAvgPool2d((1, 1)),
        )
        self.flatten = nn.Flatten(1)

    def forward(self, x: Tensor) -> Tensor:
        """Computes class logits.

        Args:
            x: Input images of shape ``(N, 3, H, W)``.

        Returns:
            Logits of shape ``(N, num_classes)``.
        """
        x = self.features(x)
        x = self.classifier(x)
        return self.flatten(x)


def squeezenet1_0(num_classes: int = 1000) -> SqueezeNet:
    """Builds SqueezeNet 1.0 (1,248,424 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.

    Returns:
        The SqueezeNet 1.0 model.
    """
    return SqueezeNet("1_0", num_classes=num_classes)


def squeezenet1_1(num_classes: int = 1000) -> SqueezeNet:
    """Builds SqueezeNet 1.1 (1,235,496 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.

    Returns:
        The SqueezeNet 1.1 model.
    """
    return SqueezeNet("1_1", num_classes=num_classes)
