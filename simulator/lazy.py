"""Lazy package exports: names a package's ``__init__`` loads from their module on first use.

Used by the package facades (`simulator.workload`, `search`, `fusion_dse`) so that importing a
light module of a package (the CLI parser, the registry) does not import torch or pymoo.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, home: Mapping[str, str],
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module ``__getattr__`` and ``__dir__`` functions for a package.

    Args:
        package: The package's ``__name__`` (for the AttributeError message).
        home: Exported name -> the module that defines it.

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level.
    """

    def getattr_(name: str) -> Any:
        if name in home:
            return getattr(importlib.import_module(home[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def dir_() -> list[str]:
        return sorted(set(importlib.import_module(package).__dict__) | set(home))

    return getattr_, dir_
