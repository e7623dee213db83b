"""The ONNX importer's GatherElements fold (constants) and Expand of an activation, on small
hand-built models executed by the IR executor (the two things BERT's and Llama's exports need:
tests/simulator/workload/test_hf_models.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from simulator.workload.execute import execute
from simulator.workload.graph import OpKind
from simulator.workload.onnx_import import _fold_gather_elements, from_onnx_with_params


def _save(tmp_path: Path, nodes, inputs, inits, opset: int = 18) -> Path:
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = tmp_path / "m.onnx"
    onnx.save_model(model, path)
    return path


def test_gather_elements_of_constants_folds_along_a_long_axis(tmp_path):
    """BERT's token-type ids: a (1, 100) buffer gathered at 16 positions (onnx's reference
    evaluator picks with np.choose, at most 32 or 64 choices, and did not fold it)."""
    table = np.arange(100, dtype=np.float32).reshape(1, 100) * 0.5
    idx = np.arange(16, dtype=np.int64).reshape(1, 16)[:, ::-1].copy()
    path = _save(tmp_path, [
        helper.make_node("GatherElements", ["table", "idx"], ["g"], axis=1),
        helper.make_node("Add", ["x", "g"], ["y"]),
    ], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(idx, "idx")])
    graph, params = from_onnx_with_params(path)
    assert [op.kind for op in graph.ops] == [OpKind.ELTWISE_UNARY]
    x = torch.randn(1, 16)
    expected = x + torch.from_numpy(np.take_along_axis(table, idx, axis=1))
    assert torch.equal(execute(graph, params, x)[0], expected)


def test_gather_elements_fold_follows_onnx():
    data = np.arange(12).reshape(3, 4)
    # the other dimensions are the indices' (a leading part of the data's); negative indices
    # count from the end
    assert _fold_gather_elements({"axis": 1}, data, np.array([[3, -1], [0, -4]]))[0].tolist() \
        == [[3, 3], [4, 4]]
    assert _fold_gather_elements({"axis": 0}, data, np.array([[2, 0, 1]]))[0].tolist() \
        == [[8, 1, 6]]
    for bad in (np.array([[4]]), np.array([[-5]]), np.array([1])):
        with pytest.raises(ValueError):
            _fold_gather_elements({"axis": 1}, data, bad)


@pytest.mark.parametrize(("shape", "target", "ops"), [
    ((1, 2, 1, 3, 4), (1, 2, 2, 3, 4), ["expand"]),  # grouped-query heads repeated
    ((3, 4), (2, 3, 4), ["unsqueeze", "expand"]),  # a new leading axis
    ((1, 3, 4), (1, 3, 4), []),  # the same shape: an alias
])
def test_expand_of_an_activation(tmp_path, shape, target, ops):
    path = _save(tmp_path, [
        helper.make_node("Expand", ["x", "shape"], ["e"]),
        helper.make_node("Relu", ["e"], ["y"]),
    ], [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [numpy_helper.from_array(np.array(target, dtype=np.int64), "shape")])
    graph, params = from_onnx_with_params(path)
    assert [op.op_type for op in graph.ops] == [*ops, "relu"]
    assert graph.ops[-1].output_shape == target
    x = torch.randn(shape)
    assert torch.equal(execute(graph, params, x)[0], torch.relu(x.expand(target)))
