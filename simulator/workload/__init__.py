"""The workload layer: the ComputeGraph IR, its importers (torch, ONNX) and the model zoo."""
