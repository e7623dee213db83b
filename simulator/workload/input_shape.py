"""Input shapes as users give them (``1,3,224,224`` or ``1x3x224x224``), checked without torch.

`check_input_shape` is the one parser of an input-shape option: the loader checks a shape
with it before anything is imported or built, the torch and ONNX importers take its result.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator import limits
from simulator.workload.errors import InputShapeError

__all__ = ["check_input_shape"]


def check_input_shape(shape: Sequence[int] | str) -> tuple[int, ...]:
    """Parse and validate an input shape such as ``(1, 3, 224, 224)`` or ``"1,3,224,224"``."""
    text = shape if isinstance(shape, str) else ",".join(str(s) for s in shape)
    try:
        dims = tuple(int(s) for s in text.replace("x", ",").split(","))
    except ValueError:
        raise InputShapeError(f"input shape {text!r} is not a comma-separated list of "
                              "integers (expected N,C,H,W such as 1,3,224,224)") from None
    if not dims or any(d <= 0 for d in dims):
        raise InputShapeError(f"input shape {text!r} must have positive dimensions")
    return limits.check_input_size(dims, text, InputShapeError)
