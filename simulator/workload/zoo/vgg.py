"""VGG-16 (configuration "D", without batch normalisation).

The network is a stack of 3x3 convolutions with ReLU activations separated by
2x2 max-pooling layers, followed by an adaptive average pool to 7x7 and a
three-layer fully connected classifier with dropout.
"""

from __future__ import annotations

from torch import Tensor, nn

__all__ = ["VGG", "VGG16_CONFIG", "vgg16"]

#: Layer configuration of VGG-16: integers are conv output channels, "M" is a max-pool.
VGG16_CONFIG: tuple[int | str, ...] = (
    64, 64, "M",
    128, 128, "M",
    256, 256, 256, "M",
    512, 512, 512, "M",
    512, 512, 512, "M",
)  # fmt: skip


def _make_features(config: tuple[int | str, ...], batch_norm: bool) -> nn.Sequential:
    """Builds the convolutional feature extractor.

    Args:
        config: Sequence of output channel counts and ``"M"`` markers for max-pooling.
        batch_norm: Whether to insert a BatchNorm2d after each convolution.

    Returns:
        The feature extractor as an ``nn.Sequential``.
    """
    layers: list[nn.Module] = []
    in_channels = 3
    for item in config:
        if item == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        out_channels = int(item)
        layers.append(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=not batch_norm)
        )
        if batch_norm:
            layers.append(nn.BatchNorm2d(out_channels))
        layers.append(nn.ReLU(inplace=False))
        in_channels = out_channels
    return nn.Sequential(*layers)


class VGG(nn.Module):
    """VGG network with the standard ImageNet classifier head.

    Args:
        config: Feature-extractor configuration (see :data:`VGG16_CONFIG`).
        num_classes: Number of output classes.
        batch_norm: Whether the convolutions are followed by batch normalisation.
        dropout: Dropout probability used in the classifier.
    """

    def __init__(
        self,
        config: tuple[int | str, ...] = VGG16_CONFIG,
        num_classes: int = 1000,
        batch_norm: bool = False,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        self.features = _make_features(config, batch_norm)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.flatten = nn.Flatten(1)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(inplace=False),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=False),
            nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        """Computes class logits.

        Args:
            x: Input images of shape ``(N, 3, H, W)``.

        Returns:
            Logits of shape ``(N, num_classes)``.
        """
        x = self.features(x)
        x = self.avgpool(x)
        x = self.flatten(x)
        return self.classifier(x)


def vgg16(num_classes: int = 1000) -> VGG:
    """Builds a randomly initialised VGG-16 (138,357,544 parameters at 1000 classes).

    Args:
        num_classes: Number of output classes.

    Returns:
        The VGG-16 model.
    """
    return VGG(VGG16_CONFIG, num_classes=num_classes)
