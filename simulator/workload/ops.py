"""Op arithmetic shared by the importers, so that every front end yields the same IR.

MAC counts follow the usual convention (torchvision's and fvcore's): a convolution or linear layer
counts one multiply-accumulate per weight use; bias additions, activations, pooling and
elementwise arithmetic count none, except a standalone (unfolded) BatchNorm, which is one
multiply-add per output element.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from simulator.workload.graph import Op, OpKind, Shape

__all__ = [
    "ACTIVATIONS",
    "const_operand_shape",
    "adaptive_window",
    "conv_kind",
    "conv_macs",
    "is_identity_window",
    "linear_macs",
]

# Canonical lower-case names of elementwise unary functions, keyed by the spellings the torch
# and ONNX front ends use.
ACTIVATIONS: dict[str, str] = {
    "relu": "relu", "relu6": "relu6", "hardtanh": "hardtanh", "clip": "clip",
    "hardswish": "hardswish", "hardsigmoid": "hardsigmoid", "sigmoid": "sigmoid",
    "silu": "silu", "swish": "silu", "tanh": "tanh", "gelu": "gelu", "elu": "elu",
    "leakyrelu": "leakyrelu", "leaky_relu": "leakyrelu", "prelu": "prelu", "mish": "mish",
    "softplus": "softplus", "selu": "selu", "exp": "exp", "log": "log", "sqrt": "sqrt",
    "neg": "neg", "abs": "abs", "erf": "erf", "reciprocal": "reciprocal", "celu": "celu",
    "softsign": "softsign", "tanhshrink": "tanhshrink", "logsigmoid": "logsigmoid",
    "hardshrink": "hardshrink", "softshrink": "softshrink", "threshold": "threshold",
}


def conv_kind(groups: int, in_channels: int) -> OpKind:
    """DWCONV for a depthwise convolution (one group per input channel), else CONV."""
    return OpKind.DWCONV if groups > 1 and groups == in_channels else OpKind.CONV


def conv_macs(output_shape: Shape, in_channels: int, groups: int, kernel: Sequence[int]) -> int:
    """MACs of a 2-D convolution: every output element reads C_in/groups x kh x kw weights."""
    return math.prod(output_shape) * (in_channels // groups) * math.prod(kernel)


def linear_macs(output_shape: Shape, in_features: int) -> int:
    """MACs of a fully connected layer (or a matmul against a constant matrix)."""
    return math.prod(output_shape) * in_features


def adaptive_window(in_size: int, out_size: int) -> tuple[int, int]:
    """(kernel, stride) covering adaptive pooling from `in_size` to `out_size` along one axis.

    Adaptive pooling window i spans [floor(i*in/out), ceil((i+1)*in/out)); the kernel reported is
    the widest window, the stride the floor of in/out (exact when in is a multiple of out).
    """
    widest = max(
        -(-(i + 1) * in_size // out_size) - (i * in_size // out_size) for i in range(out_size)
    )
    return widest, max(1, in_size // out_size)


def is_identity_window(kernel: Sequence[int], stride: Sequence[int],
                       padding: Sequence[int]) -> bool:
    """A pooling window of 1x1, stride 1, no padding copies its input: the importers drop it."""
    return all(k == 1 for k in kernel) and all(s == 1 for s in stride) and not any(padding)


def const_operand_shape(op: Op) -> Shape | None:
    """Shape of the constant tensor operand of an elementwise op: the recorded ``const_shape``,
    else inferred from ``weight_elems`` (a whole map or one value per channel); None when
    neither tells (a scalar constant is an attribute, not a tensor)."""
    shape = op.attr("const_shape")
    if shape is not None:
        return tuple(int(d) for d in shape)
    out = op.output_shape
    if op.weight_elems == math.prod(out):
        return tuple(out)
    if len(out) >= 2 and op.weight_elems == out[1]:
        return (1, out[1], *([1] * (len(out) - 2)))
    return None
