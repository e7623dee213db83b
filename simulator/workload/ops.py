"""Op arithmetic shared by the importers, so that every front end yields the same IR.

MAC counts follow the usual convention (torchvision's and fvcore's): a convolution or linear layer
counts one multiply-accumulate per weight use and a product of two activations (`OpKind.MATMUL`)
one per pair of operand elements it multiplies (output elements x the shared dimension K); bias
additions, activations, pooling, softmax, normalisations (`OpKind.NORM`: LayerNorm, GroupNorm,
RMSNorm, whose statistics are reductions like pooling's) and elementwise arithmetic count none,
except a standalone (unfolded) BatchNorm, which is one multiply-add per output element.
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
    "matmul_macs",
    "matmul_shape",
    "norm_param_shape",
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


def matmul_shape(a: Shape, b: Shape) -> Shape | None:
    """Output shape of ``torch.matmul(a, b)`` (numpy's matmul: batch dimensions broadcast, a 1-D
    operand promoted to a matrix and its dimension removed again), None when the shapes do not
    multiply."""
    if not a or not b:
        return None
    a2, b2 = (a if len(a) > 1 else (1, *a)), (b if len(b) > 1 else (*b, 1))
    if a2[-1] != b2[-2]:
        return None
    batch_a, batch_b = a2[:-2], b2[:-2]
    rank = max(len(batch_a), len(batch_b))
    batch = []
    for x, y in zip((1,) * (rank - len(batch_a)) + batch_a,
                    (1,) * (rank - len(batch_b)) + batch_b, strict=True):
        if x != y and 1 not in (x, y):
            return None
        batch.append(max(x, y))
    out = (*batch, *(a2[-2:-1] if len(a) > 1 else ()), *(b2[-1:] if len(b) > 1 else ()))
    return tuple(out)


def matmul_macs(output_shape: Shape, a_shape: Shape) -> int:
    """MACs of a product of two activations: every output element sums K products, K being
    the last dimension of the first operand."""
    return math.prod(output_shape) * int(a_shape[-1])


def norm_param_shape(op: Op) -> Shape:
    """Shape of the scale (and bias) of a `OpKind.NORM` op: one value per channel for a group
    norm, the normalised shape (the dimensions of ``axes``) for a layer or RMS norm."""
    out = op.output_shape
    if op.op_type == "groupnorm":
        return (int(out[1]),)
    axes = op.attr("axes", (len(out) - 1,))
    return tuple(int(out[a]) for a in (axes if isinstance(axes, tuple) else (axes,)))


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
