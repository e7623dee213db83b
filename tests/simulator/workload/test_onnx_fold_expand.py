"""The ONNX importer's GatherElements fold (constants), Expand of an activation and the dynamo
exporter's safe softmax, on small hand-built models executed by the IR executor (what BERT's
and Llama's exports need: tests/simulator/workload/test_hf_models.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from simulator.workload.errors import UnsupportedOpError
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


# --- the dynamo exporter's safe softmax: Where(IsNaN(Softmax(x)), 0, Softmax(x)) ---------------


def _safe_softmax(tmp_path, zero=0.0, isnan_of="s", extra_reader=False):
    nodes = [
        helper.make_node("Softmax", ["x"], ["s"], axis=-1),
        helper.make_node("IsNaN", [isnan_of], ["nan"]),
        helper.make_node("Where", ["nan", "zero", isnan_of], ["w"]),
    ]
    if extra_reader:  # the NaN flags added to the result too
        nodes += [helper.make_node("Cast", ["nan"], ["nan_f"], to=TensorProto.FLOAT),
                  helper.make_node("Add", ["w", "nan_f"], ["w2"]),
                  helper.make_node("Relu", ["w2"], ["y"])]
    else:
        nodes.append(helper.make_node("Relu", ["w"], ["y"]))
    return _save(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                 [1, 2, 4, 4])],
                 [numpy_helper.from_array(np.array(zero, dtype=np.float32), "zero")])


def test_safe_softmax_is_the_softmax(tmp_path):
    graph, params = from_onnx_with_params(_safe_softmax(tmp_path))
    assert [op.op_type for op in graph.ops] == ["softmax", "relu"]
    x = torch.randn(1, 2, 4, 4)
    x[0, 0, 1, 2:] = float("-inf")  # a masked row: exact
    assert torch.equal(execute(graph, params, x)[0], torch.softmax(x, -1))
    # a fully masked row: the pattern gives zeros, the imported softmax NaN (documented)
    x[0, 1, 3, :] = float("-inf")
    out = execute(graph, params, x)[0]
    assert torch.isnan(out[0, 1, 3]).all() and not torch.isnan(out[0, :, :3]).any()


@pytest.mark.parametrize("variant", [
    {"zero": 1.0},  # not zero for the NaNs
    {"isnan_of": "x"},  # IsNaN of an activation that is no softmax
    {"extra_reader": True},  # the IsNaN read elsewhere too
])
def test_other_isnan_is_refused_by_name(tmp_path, variant):
    with pytest.raises(UnsupportedOpError) as err:
        from_onnx_with_params(_safe_softmax(tmp_path, **variant))
    text = str(err.value)
    assert "'IsNaN'" in text and "safe softmax" in text and "\n" not in text


def test_isnan_of_a_constant_folds(tmp_path):
    c = np.array([[1.0, np.nan, 3.0]], dtype=np.float32)
    path = _save(tmp_path, [
        helper.make_node("IsNaN", ["c"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "c"], ["clean"]),
        helper.make_node("Add", ["x", "clean"], ["y"]),
    ], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(c, "c"),
         numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")])
    graph, params = from_onnx_with_params(path)
    x = torch.randn(1, 3)
    assert torch.equal(execute(graph, params, x)[0], x + torch.tensor([[1.0, 0.0, 3.0]]))
