"""Model zoo: self-contained PyTorch definitions of well-known CNNs and transformers.

Every model is written from scratch with standard ``torch.nn`` layers (random
initialisation, no downloads) and mirrors the corresponding torchvision
architecture exactly, down to the parameter count (the transformers: torchvision's
``VisionTransformer`` for ViT-B/16 and DeiT-S, BERT-base's encoder).  All models but the
decoder are ``torch.fx.symbolic_trace``-able and ONNX-exportable; the decoder (token ids and a
KV cache in, `ZooEntry.examples`) imports through ``torch.export``.  This package depends on
``torch`` only.

Each entry has a `ZooEntry.kind`, ``"cnn"`` (the 13 convolutional networks the paper's
experiments, the GNN datasets and the benchmarks use), ``"transformer"`` or ``"decoder"``
(the Llama-style decoder's prefill and decode phases, `llama`);
``zoo_names("cnn")`` is the CNN zoo, ``zoo_names()`` everything.

Example:
    >>> entry = get_entry("resnet50")
    >>> model = entry.factory().eval()
    >>> entry.input_shape
    (1, 3, 224, 224)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import Tensor, nn

from simulator.workload.zoo_catalog import resolution_shape

from .bert import bert_base
from .deeplab import deeplabv3_mobilenet_v3_large
from .efficientnet import efficientnet_b0, efficientnet_b3
from .llama import LLAMA_TINY, example_inputs, llama_tiny
from .mobilenet import mobilenet_v2, mobilenet_v3_large, mobilenet_v3_small
from .resnet import resnet18, resnet50, resnet101, resnet152
from .squeezenet import squeezenet1_0, squeezenet1_1
from .vgg import vgg16
from .vit import deit_s, vit_b_16

__all__ = ["CNN", "DECODER", "KINDS", "TRANSFORMER", "ZOO", "ZooEntry", "get_entry",
           "zoo_names"]

_IMAGENET_SHAPE: tuple[int, int, int, int] = (1, 3, 224, 224)

CNN = "cnn"
TRANSFORMER = "transformer"
DECODER = "decoder"
KINDS: tuple[str, ...] = (CNN, TRANSFORMER, DECODER)


@dataclass(frozen=True)
class ZooEntry:
    """A model of the zoo.

    Attributes:
        name: Lower-case registry key (torchvision's builder name).
        factory: Zero-argument callable building a fresh, randomly initialised model.
        input_shape: Default input shape: NCHW for images, ``(N, L, hidden)`` for BERT's
            embedded tokens.
        family: Architecture family (e.g. ``"resnet"``, ``"vit"``).
        description: One-line human-readable description.
        kind: ``"cnn"`` or ``"transformer"`` (`KINDS`).
        sized_factory: Builds the model for an input shape, for a model whose parameters
            depend on it (ViT's position embedding has one entry per patch); None when
            `factory`'s model takes any shape.
        resolution_axes: The input axes that ``name@R`` (``name@HxW``) sets: H and W of an
            image, L of a token sequence, C of a decode step's KV cache.
        examples: For a model whose inputs are not one float tensor of `input_shape` (a
            decoder's token ids and KV cache): its example inputs for an input shape; the
            model then imports through ``torch.export`` (`simulator.workload.export_import`).
    """

    name: str
    factory: Callable[[], nn.Module]
    input_shape: tuple[int, ...]
    family: str
    description: str
    kind: str = CNN
    sized_factory: Callable[[tuple[int, ...]], nn.Module] | None = None
    resolution_axes: tuple[int, ...] = (2, 3)
    examples: Callable[[tuple[int, ...]], list[Tensor]] | None = None

    def build(self, input_shape: Sequence[int] | None = None) -> nn.Module:
        """A fresh model for `input_shape` (default: `input_shape`)."""
        if self.sized_factory is None or input_shape is None:
            return self.factory()
        return self.sized_factory(tuple(int(d) for d in input_shape))

    def shape_at(self, resolution: Sequence[int],
                 base: Sequence[int] | None = None) -> tuple[int, ...]:
        """`base` (default `input_shape`) with the `resolution_axes` set to `resolution`:
        one value for every axis (``resnet50@320``, ``bert_base@512``) or one per axis
        (``resnet50@320x240``); `simulator.workload.zoo_catalog.resolution_shape`, which
        answers the same without torch.

        Raises:
            ValueError: A resolution of another length, or a base shape without the axes.
        """
        return resolution_shape(self.name, self.input_shape, self.resolution_axes, resolution,
                                base)


def _image_sized(builder: Callable[..., nn.Module]) -> Callable[[tuple[int, ...]], nn.Module]:
    """A sized factory building `builder`'s model for the H x W of an NCHW shape."""

    def build(shape: tuple[int, ...]) -> nn.Module:
        return builder(image_size=(shape[2], shape[3]) if len(shape) == 4 else 224)

    build.__name__ = f"{builder.__name__}_sized"
    return build


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
    ZooEntry("vit_b_16", vit_b_16, _IMAGENET_SHAPE, "vit",
             "ViT-B/16: 12 pre-norm layers, width 768, 12 heads, MLP 3072, 197 tokens, "
             "86.6M parameters",
             kind=TRANSFORMER, sized_factory=_image_sized(vit_b_16)),
    ZooEntry("deit_s", deit_s, _IMAGENET_SHAPE, "vit",
             "DeiT-S/16 (no distillation token): ViT with 12 layers, width 384, 6 heads, "
             "MLP 1536, 22.1M parameters",
             kind=TRANSFORMER, sized_factory=_image_sized(deit_s)),
    ZooEntry("bert_base", bert_base, (1, 128, 768), "bert",
             "BERT-base encoder on embedded tokens (N, L, 768): 12 post-norm layers, width "
             "768, 12 heads, MLP 3072, GELU, 85.1M parameters",
             kind=TRANSFORMER, resolution_axes=(1,)),
    ZooEntry("llama_tiny_prefill", llama_tiny, (1, 128), "llama",
             "Llama-style decoder, prefill of L token ids (N, L): 2 layers, width 256, 8 heads, "
             "2 K/V heads, SwiGLU 688, RoPE, 4,096 ids; writes the KV cache, 3.48M parameters",
             kind=DECODER, resolution_axes=(1,),
             examples=functools.partial(example_inputs, LLAMA_TINY, "prefill")),
    ZooEntry("llama_tiny_decode", llama_tiny, (1, 1, 512), "llama",
             "Llama-style decoder, decode of one token against a KV cache of C tokens (N, 1, "
             "C): llama_tiny_prefill's network; reads the cache, writes the token's K and V",
             kind=DECODER, resolution_axes=(2,),
             examples=functools.partial(example_inputs, LLAMA_TINY, "decode")),
)  # fmt: skip

#: Registry of all zoo models, keyed by lower-case name.
ZOO: dict[str, ZooEntry] = {entry.name: entry for entry in _ENTRIES}


def zoo_names(kind: str | None = None) -> list[str]:
    """Returns the names of the zoo models in registry order.

    Args:
        kind: Only models of this kind (``"cnn"`` or ``"transformer"``); None for all.

    Returns:
        The model names.

    Raises:
        ValueError: An unknown kind.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown zoo kind {kind!r}; kinds: {', '.join(KINDS)}")
    return [name for name, entry in ZOO.items() if kind is None or entry.kind == kind]


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
