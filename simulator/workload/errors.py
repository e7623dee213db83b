"""User-facing errors of the workload layer (all `simulator.errors.InputError`)."""

from __future__ import annotations

from simulator.errors import InputError
from simulator.workload.graph import GraphError

__all__ = [
    "GraphError",
    "InputShapeError",
    "ModelFileError",
    "UnknownModelError",
    "UnsupportedOpError",
]


class UnknownModelError(InputError):
    """A model name that is neither a zoo network, an existing file nor `module:callable`."""


class ModelFileError(InputError):
    """A model file that is missing, unreadable, corrupt or of an unsupported version."""


class UnsupportedOpError(InputError):
    """An operation the importer cannot represent (and opaque fallback was not allowed)."""


class InputShapeError(InputError):
    """An input shape that is malformed or that the model cannot run on."""
