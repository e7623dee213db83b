"""Model zoo: self-contained PyTorch definitions of well-known CNNs.

Every model is written from scratch with standard ``torch.nn`` layers (random
initialisation, no downloads) and mirrors the corresponding torchvision
architecture exactly, down to the parameter count.  All models are
``torch.fx.symbolic_trace``-able and ONNX-exportable.  This package depends on
``torch`` only.

Example:
    >>> entry = get_entry("resnet50")
    >>> model = entry.factory().eval()
    >>> entry.input_shape
    (1, 3, 224, 224)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from .deeplab import deeplabv3_mobilenet_v3_large
from .efficientnet import efficientnet_b0, efficientnet_b3
from .mobilenet import mobilenet_v2, mobilenet_v3_large, mobilenet_v3_small
from .resnet import resnet18, resnet50, resnet101, resnet152
from .squeezenet import squeezenet1_0, squeezenet1_1
from .vgg import vgg16

__all__ = ["ZOO", "ZooEntry", "get_entry", "zoo_names"]

_IMAGENET_SHAPE: tuple[int, int, int, int] = (1, 3, 224, 224)


@dataclass(frozen=True)
class ZooEntry:
    """A model of the zoo.

    Attributes:
        name: Lower-case registry key (torchvision's builder name).
        factory: Zero-argument callable building a fresh, randomly initialised model.
        input_shape: Default NCHW input shape.
        family: Architecture family (e.g. ``"resnet"``).
        description: One-line human-readable description.
    """

    name: str
    factory: Callable[[], nn.Module]
    input_shape: tuple[int, int, int, int]
    family: str
    description: str


_ENTRIES: tuple[ZooEntry, ...] = (
    ZooEntry("vgg16", vgg16, _IMAGENET_SHAPE, "vgg",
             "VGG-16: 13 3x3 convs + 3 FC layers, 138.4M parameters"),
    ZooEntry("squeezenet1_0", squeezenet1_0, _IMAGENET_SHAPE, "squeezenet",
             "SqueezeNet 1.0: Fire modules, 7x7 stem, conv classifier, 1.25M parameters"),
    ZooEntry("squeezenet1_1", squeezenet1_1, _IMAGENET_SHAPE, "squeezenet",
             "SqueezeNet 1.1: Fire modules, 3x3 stem, earlier pooling, 1.24M parameters"),
    ZooEntry("mobilenet_v2", mobilenet_v2, _IMAGENET_SHAPE, "mobilenet",
             "MobileNetV2: inverted residuals with ReLU6, 3.5M parameters"),
    ZooEntry("mobilenet_v3_small", mobilenet_v3_small, _IMAGENET_SHAPE, "mobilenet",
             "MobileNetV3-Small: SE + hardswish inverted residuals, 2.5M parameters"),
    ZooEntry("mobilenet_v3_large", mobilenet_v3_large, _IMAGENET_SHAPE, "mobilenet",
             "MobileNetV3-Large: SE + hardswish inverted residuals, 5.5M parameters"),
    ZooEntry("resnet18", resnet18, _IMAGENET_SHAPE, "resnet",
             "ResNet-18: basic blocks [2, 2, 2, 2], 11.7M parameters"),
    ZooEntry("resnet50", resnet50, _IMAGENET_SHAPE, "resnet",
             "ResNet-50: bottleneck blocks [3, 4, 6, 3], 25.6M parameters"),
    ZooEntry("resnet101", resnet101, _IMAGENET_SHAPE, "resnet",
             "ResNet-101: bottleneck blocks [3, 4, 23, 3], 44.5M parameters"),
    ZooEntry("resnet152", resnet152, _IMAGENET_SHAPE, "resnet",
             "ResNet-152: bottleneck blocks [3, 8, 36, 3], 60.2M parameters"),
    ZooEntry("efficientnet_b0", efficientnet_b0, _IMAGENET_SHAPE, "efficientnet",
             "EfficientNet-B0: MBConv + SE with SiLU, 5.3M parameters"),
    ZooEntry("efficientnet_b3", efficientnet_b3, (1, 3, 300, 300), "efficientnet",
             "EfficientNet-B3: width 1.2, depth 1.4, 300x300 input, 12.2M parameters"),
    ZooEntry("deeplabv3_mobilenet_v3_large", deeplabv3_mobilenet_v3_large, (1, 3, 513, 513),
             "deeplab",
             "DeepLabV3 (ASPP 12/24/36, 21 classes) on dilated MobileNetV3-Large, 11.0M "
             "parameters"),
)  # fmt: skip

#: Registry of all zoo models, keyed by lower-case name.
ZOO: dict[str, ZooEntry] = {entry.name: entry for entry in _ENTRIES}


def zoo_names() -> list[str]:
    """Returns the names of all zoo models in registry order.

    Returns:
        The model names.
    """
    return list(ZOO)


def get_entry(name: str) -> ZooEntry:
    """Looks up a zoo model by name.

    Args:
        name: Model name (case-insensitive).

    Returns:
        The registry entry.

    Raises:
        KeyError: If no model of that name exists.
    """
    try:
        return ZOO[name.lower()]
    except KeyError:
        raise KeyError(f"unknown zoo model {name!r}; available: {', '.join(ZOO)}") from None
