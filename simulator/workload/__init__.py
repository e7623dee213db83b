"""The workload layer: the ComputeGraph IR, its importers (torch, ONNX), the model zoo and the
IR executor.

The importers and the executor pull in torch and onnx, so they are loaded on first use: code that
only needs the IR (cost models, search) imports `simulator.workload.graph` without paying for
torch.
"""

from __future__ import annotations

from simulator.lazy import lazy_exports
from simulator.workload.graph import ComputeGraph, MappingType, Op, OpKind

__all__ = [
    "ComputeGraph",
    "MappingType",
    "Op",
    "OpKind",
    "execute",
    "from_onnx",
    "from_onnx_with_params",
    "from_torch",
    "from_torch_with_params",
    "load",
    "random_params",
]

_LAZY = {
    "from_torch": "simulator.workload.torch_import",
    "from_torch_with_params": "simulator.workload.torch_import",
    "from_onnx": "simulator.workload.onnx_import",
    "from_onnx_with_params": "simulator.workload.onnx_import",
    "load": "simulator.workload.loader",
    "execute": "simulator.workload.execute",
    "random_params": "simulator.workload.execute",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
