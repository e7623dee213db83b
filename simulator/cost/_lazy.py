"""A module imported on first attribute access (the compiled kernels: numba takes most of a
second to import, and a command that fails an input check or costs nothing must not wait)."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LazyModule"]


class LazyModule:
    """Stands for the module `name`, imported when one of its attributes is first read; each
    attribute read is then kept on this object, so later reads bypass `__getattr__`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value
