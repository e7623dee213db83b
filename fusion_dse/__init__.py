"""fusion-dse: design-space exploration of layer fusion for CNN accelerators.

The application layer: the command line (`fusion_dse.cli`), reports, plots and the Python API.
The API functions load on first use, so that importing the package (and starting the CLI) does
not pay for torch:

    import fusion_dse
    graph = fusion_dse.load("mobilenet_v2")
    result = fusion_dse.optimize("mobilenet_v2", budget=2000, overrides={"buffer": "128KiB"})
    fusion_dse.evaluate("resnet18", plan="plan.json").cost.dram_bytes
    fusion_dse.sweep("squeezenet1_0", buffers="64KiB,256KiB", schemes="lbdf,brr")  # DataFrame
    fusion_dse.compare("mobilenet_v2", buffers="128KiB,1MiB")                     # DataFrame
    fusion_dse.recommend("mobilenet_v2", metric="energy", within="5%").buffer_bytes
"""

from __future__ import annotations

import importlib
from typing import Any

from simulator.lazy import lazy_exports

__all__ = ["compare", "evaluate", "load", "load_sweep", "optimize", "recommend", "simulate",
           "sweep", "write_outputs"]
__version__ = "0.1.0"

_API = {
    "load": "simulator.workload.loader",
    "evaluate": "fusion_dse.api",
    "simulate": "fusion_dse.api",
    "optimize": "fusion_dse.optimization",
    "write_outputs": "fusion_dse.optimization",
    "load_sweep": "fusion_dse.sweep",
    "compare": "fusion_dse.sweep",
    "recommend": "fusion_dse.sweep",
}

_exported, __dir__ = lazy_exports(__name__, _API)


def __getattr__(name: str) -> Any:
    """The API functions on first use; ``sweep`` is the package `fusion_dse.sweep`, which is
    callable: ``fusion_dse.sweep(...)`` runs a sweep."""
    if name == "sweep":
        return importlib.import_module("fusion_dse.sweep")
    return _exported(name)
