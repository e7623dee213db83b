"""The workload layer: the ComputeGraph IR, its importers (torch, ONNX) and the model zoo.

The importers pull in torch and onnx, so they are loaded on first use: code that only needs the
IR (cost models, search) imports `simulator.workload.graph` without paying for torch.
"""

from __future__ import annotations

from simulator.lazy import lazy_exports
from simulator.workload.graph import ComputeGraph, MappingType, Op, OpKind

__all__ = ["ComputeGraph", "MappingType", "Op", "OpKind", "from_onnx", "from_torch", "load"]

_LAZY = {
    "from_torch": "simulator.workload.torch_import",
    "from_onnx": "simulator.workload.onnx_import",
    "load": "simulator.workload.loader",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
