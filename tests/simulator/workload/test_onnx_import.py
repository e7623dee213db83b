"""Tests of the ONNX front end on small hand-built models and on torch exports."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from simulator.workload.errors import (
    GraphError,
    InputShapeError,
    ModelFileError,
    UnsupportedOpError,
)
from simulator.workload.graph import ComputeGraph, MappingType, Op, OpKind
from simulator.workload.onnx_import import from_onnx

# --- model-building helpers --------------------------------------------------------------------


def _vi(name: str, shape: Sequence[int | str] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _init(name: str, *shape: int, value: Sequence[float] | None = None) -> onnx.TensorProto:
    if value is not None:
        return numpy_helper.from_array(np.asarray(value, dtype=np.float32).reshape(shape), name)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def _ints(name: str, values: Sequence[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: Sequence[str], inits: Sequence[onnx.TensorProto] = (),
           opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, [_vi(o, None) for o in outputs],
                              initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _save(tmp_path: Path, model: onnx.ModelProto, name: str = "model.onnx",
          check: bool = True) -> Path:
    if check:  # (graph outputs are declared without shapes: check the inferred model)
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        onnx.checker.check_model(inferred, full_check=True)
    path = tmp_path / name
    onnx.save_model(model, path)
    return path


def _import(tmp_path: Path, model: onnx.ModelProto, **kwargs: object) -> ComputeGraph:
    return from_onnx(_save(tmp_path, model), **kwargs)


def _bn(name: str, x: str, out: str, channels: int) -> tuple[onnx.NodeProto, list]:
    params = [_init(f"{name}.{p}", channels) for p in ("scale", "bias", "mean")]
    params.append(_init(f"{name}.var", channels, value=[1.0] * channels))
    node = helper.make_node("BatchNormalization", [x, *(p.name for p in params)], [out],
                            name=name)
    return node, params


def _residual_block() -> onnx.ModelProto:
    """conv1(no bias)-bn1-relu-maxpool, then conv2(bias)-bn2, + skip, relu."""
    bn1, p1 = _bn("bn1", "c1", "b1", 8)
    bn2, p2 = _bn("bn2", "c2", "b2", 8)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        bn1,
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "bias2"], ["c2"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        bn2,
        helper.make_node("Add", ["p1", "b2"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["y"], name="relu2"),
    ]
    inits = [_init("w1", 8, 3, 3, 3), _init("w2", 8, 8, 3, 3), _init("bias2", 8), *p1, *p2]
    return _model(nodes, [_vi("x", [1, 3, 16, 16])], ["y"], inits)


def _by_name(g: ComputeGraph) -> dict[str, Op]:
    return {op.name: op for op in g}


# --- supported ops -----------------------------------------------------------------------------


def test_residual_block_folds_batchnorm(tmp_path: Path) -> None:
    g = _import(tmp_path, _residual_block())
    ops = _by_name(g)
    assert [op.name for op in g] == ["conv1", "relu1", "pool", "conv2", "add", "relu2"]
    assert g.input_names == ("x",) and g.input_shapes == ((1, 3, 16, 16),)
    conv1, conv2 = ops["conv1"], ops["conv2"]
    assert conv1.kind is OpKind.CONV and conv1.op_type == "conv"
    assert conv1.output_shape == (1, 8, 16, 16) and conv1.padding == (1, 1, 1, 1)
    assert conv1.weight_elems == 8 * 3 * 9 + 8  # folding gives the bias-less conv a bias
    assert conv1.macs == 8 * 16 * 16 * 3 * 9
    assert conv2.weight_elems == 8 * 8 * 9 + 8  # it had one already
    assert conv2.macs == 8 * 8 * 8 * 8 * 9
    pool = ops["pool"]
    assert (pool.kind, pool.op_type, pool.kernel, pool.stride) == (OpKind.POOL, "max", (2, 2),
                                                                  (2, 2))
    assert pool.attr("ceil_mode") is False and pool.output_shape == (1, 8, 8, 8)
    add = ops["add"]
    assert add.kind is OpKind.ELTWISE_BINARY and add.mapping is MappingType.ONE_TO_ONE
    assert add.inputs == (g.id_of("pool"), g.id_of("conv2"))
    assert conv1.mapping is MappingType.MANY_TO_MANY
    assert g.outputs == (g.id_of("relu2"),)


def test_fold_bn_false_keeps_batchnorm_ops(tmp_path: Path) -> None:
    g = _import(tmp_path, _residual_block(), fold_bn=False)
    ops = _by_name(g)
    assert g.count(OpKind.BATCHNORM) == 2
    bn1 = ops["bn1"]
    assert bn1.op_type == "batchnorm" and bn1.weight_elems == 16
    assert bn1.macs == math.prod(bn1.output_shape) == 8 * 16 * 16
    assert ops["conv1"].weight_elems == 8 * 3 * 9
    assert ops["conv2"].weight_elems == 8 * 8 * 9 + 8


def test_batchnorm_not_folded_when_conv_has_another_consumer(tmp_path: Path) -> None:
    bn, params = _bn("bn", "c", "b", 4)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]), bn,
             helper.make_node("Add", ["c", "b"], ["y"], name="add")]
    g = _import(tmp_path, _model(nodes, [_vi("x", [1, 2, 4, 4])], ["y"],
                                 [_init("w", 4, 2, 1, 1), *params]))
    assert [op.kind for op in g] == [OpKind.CONV, OpKind.BATCHNORM, OpKind.ELTWISE_BINARY]
    assert g[0].weight_elems == 8


def test_squeeze_excitation_block(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["gap"], name="se.pool"),
        helper.make_node("Conv", ["gap", "w1", "b1"], ["f1"], name="se.fc1",
                         kernel_shape=[1, 1]),
        helper.make_node("Relu", ["f1"], ["r"], name="se.relu"),
        helper.make_node("Conv", ["r", "w2", "b2"], ["f2"], name="se.fc2",
                         kernel_shape=[1, 1]),
        helper.make_node("HardSigmoid", ["f2"], ["gate"], name="se.gate", alpha=1 / 6),
        helper.make_node("Mul", ["x", "gate"], ["y"], name="se.mul"),
    ]
    inits = [_init("w1", 4, 16, 1, 1), _init("b1", 4), _init("w2", 16, 4, 1, 1),
             _init("b2", 16)]
    g = _import(tmp_path, _model(nodes, [_vi("x", [1, 16, 8, 8])], ["y"], inits))
    ops = _by_name(g)
    pool = ops["se.pool"]
    assert (pool.kind, pool.op_type, pool.kernel, pool.stride) == (
        OpKind.GLOBAL_POOL, "avg", (8, 8), (8, 8))
    assert pool.output_shape == (1, 16, 1, 1)
    assert ops["se.fc1"].weight_elems == 16 * 4 + 4 and ops["se.fc1"].macs == 4 * 16
    gate = ops["se.gate"]
    assert (gate.kind, gate.op_type) == (OpKind.ELTWISE_UNARY, "hardsigmoid")
    mul = ops["se.mul"]
    assert mul.kind is OpKind.ELTWISE_BINARY and mul.op_type == "mul"
    assert mul.input_shapes == ((1, 16, 8, 8), (1, 16, 1, 1))
    assert mul.mapping is MappingType.ONE_TO_MANY


def test_gates_become_silu_and_hardswish(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"], name="act1.sigmoid"),
        helper.make_node("Mul", ["x", "s"], ["a"], name="act1"),
        helper.make_node("HardSigmoid", ["a"], ["h"], name="act2.hsig", alpha=1 / 6),
        helper.make_node("Mul", ["h", "a"], ["b"], name="act2"),
        helper.make_node("Sigmoid", ["b"], ["t"], name="gate"),  # read twice: stays
        helper.make_node("Mul", ["b", "t"], ["c"], name="mul"),
        helper.make_node("Add", ["c", "t"], ["y"], name="add"),
    ]
    g = _import(tmp_path, _model(nodes, [_vi("x", [1, 4, 4, 4])], ["y"]))
    assert [(op.name, op.op_type) for op in g] == [
        ("act1", "silu"), ("act2", "hardswish"), ("gate", "sigmoid"), ("mul", "mul"),
        ("add", "add")]
    assert g[1].inputs == (0,)


def test_gemm_flatten_matmul(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "w", "b"], ["h"], name="fc1", transB=1),
        helper.make_node("Flatten", ["h"], ["h2"], name="noop_flatten", axis=1),
        helper.make_node("MatMul", ["h2", "m"], ["z"], name="fc2"),
        helper.make_node("Add", ["z", "mb"], ["y"], name="fc2.bias"),
    ]
    inits = [_init("w", 10, 32), _init("b", 10), _init("m", 10, 5), _init("mb", 5)]
    g = _import(tmp_path, _model(nodes, [_vi("x", [1, 8, 2, 2])], ["y"], inits))
    ops = _by_name(g)
    assert "noop_flatten" not in ops
    flatten = ops["flatten"]
    assert (flatten.kind, flatten.op_type, flatten.output_shape) == (OpKind.RESHAPE, "flatten",
                                                                     (1, 32))
    assert flatten.mapping is MappingType.REORGANIZE
    fc1 = ops["fc1"]
    assert (fc1.kind, fc1.op_type, fc1.output_shape) == (OpKind.LINEAR, "linear", (1, 10))
    assert (fc1.weight_elems, fc1.macs) == (330, 320)
    fc2 = ops["fc2"]
    assert (fc2.kind, fc2.weight_elems, fc2.macs) == (OpKind.LINEAR, 50, 50)
    bias = ops["fc2.bias"]
    assert (bias.kind, bias.op_type, bias.weight_elems) == (OpKind.ELTWISE_UNARY, "add", 5)


def test_gemm_trans_a(tmp_path: Path) -> None:
    node = helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transA=1)
    g = _import(tmp_path, _model([node], [_vi("x", [6, 2])], ["y"], [_init("w", 6, 3)]))
    assert (g[0].output_shape, g[0].weight_elems, g[0].macs) == ((2, 3), 18, 2 * 3 * 6)


def test_matmul_of_two_activations_is_a_matmul_and_a_constant_first_operand_is_refused(
        tmp_path: Path) -> None:
    node = helper.make_node("MatMul", ["x", "x"], ["y"], name="mm")
    g = _import(tmp_path, _model([node], [_vi("x", [4, 4])], ["y"]))
    assert (g[0].kind, g[0].inputs, g[0].weight_elems, g[0].macs) == (
        OpKind.MATMUL, (-1, -1), 0, 4 * 4 * 4)
    node = helper.make_node("MatMul", ["w", "x"], ["y"], name="wx")
    with pytest.raises(UnsupportedOpError, match="'MatMul'.*constant.*'wx'"):
        _import(tmp_path, _model([node], [_vi("x", [3, 4])], ["y"], [_init("w", 6, 3)]))


def test_resize_pad_concat_split(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Constant", [], ["scales"], name="scales",
                         value=numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32))),
        helper.make_node("Resize", ["x", "", "scales"], ["up"], name="up", mode="linear"),
        helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
        helper.make_node("Concat", ["up", "p"], ["cat"], name="cat", axis=1),
        helper.make_node("Split", ["cat", "split"], ["s0", "s1"], name="split", axis=1),
        helper.make_node("Relu", ["s0"], ["y"], name="relu"),
    ]
    inits = [_ints("pads", [0, 0, 1, 2, 0, 0, 3, 2]), _ints("split", [6, 2])]
    g = _import(tmp_path, _model(nodes, [_vi("x", [1, 4, 4, 4])], ["y"], inits))
    ops = _by_name(g)
    assert "scales" not in ops  # Constant nodes are not ops
    up = ops["up"]
    assert (up.kind, up.output_shape, up.attr("mode")) == (OpKind.RESIZE, (1, 4, 8, 8),
                                                           "bilinear")
    assert up.mapping is MappingType.ONE_TO_MANY
    pad = ops["pad"]
    assert (pad.kind, pad.padding, pad.output_shape) == (OpKind.PAD, (1, 2, 3, 2), (1, 4, 8, 8))
    cat = ops["cat"]
    assert (cat.kind, cat.output_shape, cat.inputs) == (OpKind.CONCAT, (1, 8, 8, 8),
                                                        (g.id_of("up"), g.id_of("pad")))
    split = ops["split:0"]  # the unread second output yields no op
    assert (split.kind, split.output_shape) == (OpKind.SLICE, (1, 6, 8, 8))
    assert "split:1" not in ops


def test_conv_variants(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "wd"], ["d"], name="dw", group=4, kernel_shape=[3, 3],
                         strides=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("Conv", ["x", "wd"], ["l"], name="lower", group=4, strides=[2, 2],
                         auto_pad="SAME_LOWER"),
        helper.make_node("Conv", ["x", "wg"], ["gr"], name="grouped", group=2, pads=[0, 1, 2, 3],
                         dilations=[2, 2]),
        helper.make_node("Clip", ["d", "zero", "six"], ["c1"], name="relu6"),
        helper.make_node("Clip", ["l", "zero", "one"], ["c2"], name="clip"),
    ]
    inits = [_init("wd", 4, 1, 3, 3), _init("wg", 6, 2, 3, 3), _init("zero", value=[0.0]),
             _init("six", value=[6.0]), _init("one", value=[1.0])]
    g = _import(tmp_path, _model(nodes, [_vi("x", [1, 4, 8, 8])], ["c1", "c2", "gr"], inits))
    ops = _by_name(g)
    dw = ops["dw"]
    assert (dw.kind, dw.groups, dw.output_shape) == (OpKind.DWCONV, 4, (1, 4, 4, 4))
    assert dw.padding == (0, 0, 1, 1) and ops["lower"].padding == (1, 1, 0, 0)
    assert dw.macs == 4 * 4 * 4 * 9 and dw.weight_elems == 36
    grouped = ops["grouped"]
    assert (grouped.kind, grouped.dilation, grouped.padding) == (OpKind.CONV, (2, 2),
                                                                (0, 1, 2, 3))
    assert grouped.output_shape == (1, 6, 6, 8) and grouped.macs == 6 * 6 * 8 * 2 * 9
    assert ops["relu6"].op_type == "relu6" and ops["clip"].op_type == "clip"


def test_elementwise_with_constants(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Mul", ["x", "k"], ["a"], name="scale"),
        helper.make_node("Sub", ["shift", "a"], ["b"], name="shift"),
        helper.make_node("PRelu", ["b", "slope"], ["c"], name="prelu"),
        helper.make_node("LeakyRelu", ["c"], ["y"], name="leaky"),
    ]
    inits = [_init("k", value=[2.0]), _init("shift", 1, 3, 1, 1), _init("slope", 3, 1, 1)]
    g = _import(tmp_path, _model(nodes, [_vi("x", [1, 3, 4, 4])], ["y"], inits))
    assert [(op.kind, op.op_type, op.weight_elems) for op in g] == [
        (OpKind.ELTWISE_UNARY, "mul", 0), (OpKind.ELTWISE_UNARY, "sub", 3),
        (OpKind.ELTWISE_UNARY, "prelu", 3), (OpKind.ELTWISE_UNARY, "leakyrelu", 0)]
    assert all(op.inputs == ((op.id - 1),) for op in g)


@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_mean_over_space_is_global_pool(tmp_path: Path, opset: int) -> None:
    if opset < 18:
        node = helper.make_node("ReduceMean", ["x"], ["y"], name="mean", axes=[-1, -2],
                                keepdims=0)
        inits = []
    else:
        node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="mean", keepdims=0)
        inits = [_ints("axes", [2, 3])]
    g = _import(tmp_path, _model([node], [_vi("x", [1, 5, 3, 4])], ["y"], inits, opset=opset))
    assert (g[0].kind, g[0].op_type, g[0].kernel, g[0].output_shape) == (
        OpKind.GLOBAL_POOL, "avg", (3, 4), (1, 5))


def test_reduce_mean_over_channels_is_a_global_pool_over_a_view(tmp_path: Path) -> None:
    """A reduction over other axes than (H, W) ([workloads-2]): the reduced axes moved last,
    a (1, M, R, 1) view, a global pool, the output's shape; executed exactly."""
    import torch

    from simulator.workload.execute import execute

    node = helper.make_node("ReduceMean", ["x"], ["y"], name="cmean", axes=[1])
    model = _model([node], [_vi("x", [1, 5, 3, 4])], ["y"], opset=13)
    g = _import(tmp_path, model)
    assert [op.kind for op in g] == [OpKind.TRANSPOSE, OpKind.RESHAPE, OpKind.GLOBAL_POOL,
                                     OpKind.RESHAPE]
    assert g.ops[2].output_shape == (1, 12, 1, 1) and g.ops[-1].output_shape == (1, 1, 3, 4)
    x = torch.randn(1, 5, 3, 4)
    assert torch.allclose(execute(g, {}, x)[0], x.mean(1, keepdim=True), atol=1e-6)


def test_aliases_and_shape_computations_are_not_ops(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Identity", ["x"], ["i"], name="identity"),
        helper.make_node("Dropout", ["i"], ["d"], name="dropout"),
        helper.make_node("MaxPool", ["d"], ["p"], name="pool1x1", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["p"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "first"], ["batch"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["batch", "zero"], ["batch1"], name="unsqueeze"),
        helper.make_node("Concat", ["batch1", "minus1"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["r", "target"], ["y"], name="reshape"),
    ]
    inits = [numpy_helper.from_array(np.int64(0), "first"), _ints("zero", [0]),
             _ints("minus1", [-1])]
    g = _import(tmp_path, _model(nodes, [_vi("x", [2, 3, 4, 4])], ["y"], inits))
    assert [(op.name, op.kind) for op in g] == [("relu", OpKind.ELTWISE_UNARY),
                                                ("reshape", OpKind.RESHAPE)]
    assert g[0].inputs == (-1,) and g[1].output_shape == (2, 48)


def test_names_fall_back_and_stay_unique(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="x"),  # clashes with the input
             helper.make_node("Relu", ["a"], ["b"], name="x"),
             helper.make_node("Relu", ["b"], ["c"])]
    g = from_onnx(_save(tmp_path, _model(nodes, [_vi("x", [1, 2])], ["c"]), check=False))
    assert [op.name for op in g] == ["x#1", "x#2", "c"]


def test_layout_ops(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], name="nhwc", perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["t"], ["t2"], name="noop", perm=[0, 1, 2, 3]),
        helper.make_node("Slice", ["t2", "starts", "ends", "axes"], ["s"], name="crop"),
        helper.make_node("Squeeze", ["s", "axes"], ["q"], name="squeeze"),
        helper.make_node("Softmax", ["q"], ["y"], name="softmax", axis=-1),
    ]
    inits = [_ints("starts", [0]), _ints("ends", [1]), _ints("axes", [1])]
    g = _import(tmp_path, _model(nodes, [_vi("x", [1, 3, 4, 5])], ["y"], inits))
    assert [(op.name, op.kind, op.output_shape, op.mapping) for op in g] == [
        ("nhwc", OpKind.TRANSPOSE, (1, 4, 5, 3), MappingType.SHUFFLE),
        ("crop", OpKind.SLICE, (1, 1, 5, 3), MappingType.ONE_TO_ONE),
        ("squeeze", OpKind.RESHAPE, (1, 5, 3), MappingType.REORGANIZE),
        ("softmax", OpKind.SOFTMAX, (1, 5, 3), MappingType.MANY_TO_MANY)]


def test_unsorted_nodes_are_sorted(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="second"),
             helper.make_node("Sigmoid", ["x"], ["a"], name="first")]
    g = from_onnx(_save(tmp_path, _model(nodes, [_vi("x", [1, 2])], ["y"]), check=False))
    assert [op.name for op in g] == ["first", "second"] and g[1].output_shape == (1, 2)


def test_several_inputs_and_initializers_listed_as_inputs(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Mul", ["s", "k"], ["y"], name="scale")]
    model = _model(nodes, [_vi("a", ["n", 3]), _vi("b", ["n", 3]), _vi("k", [1, 3])], ["y"],
                   [_init("k", 1, 3)])
    g = _import(tmp_path, model)
    assert g.input_names == ("a", "b") and g.input_shapes == ((1, 3), (1, 3))
    assert g[0].inputs == (-1, -2) and g[1].kind is OpKind.ELTWISE_UNARY
    assert g[1].weight_elems == 3


# --- input shapes ------------------------------------------------------------------------------


def _relu_model(shape: Sequence[int | str]) -> onnx.ModelProto:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return _model(nodes, [_vi("x", shape)], ["y"], [_init("w", 2, 3, 3, 3)])


def test_dynamic_batch_defaults_to_one(tmp_path: Path) -> None:
    g = _import(tmp_path, _relu_model(["batch", 3, 8, 8]))
    assert g.input_shapes == ((1, 3, 8, 8),) and g[1].output_shape == (1, 2, 6, 6)


def test_input_shape_fills_symbolic_dims(tmp_path: Path) -> None:
    path = _save(tmp_path, _relu_model(["batch", 3, "h", "w"]))
    with pytest.raises(InputShapeError, match="--input-shape"):
        from_onnx(path)
    g = from_onnx(path, (2, 3, 10, 12))
    assert g[0].output_shape == (2, 2, 8, 10) and g[0].macs == 2 * 2 * 8 * 10 * 27


@pytest.mark.parametrize("shape", [(1, 3, 8), (1, 4, 8, 8), (1, 3, 8, 0), ("a",)])
def test_wrong_input_shape(tmp_path: Path, shape: tuple) -> None:
    path = _save(tmp_path, _relu_model([1, 3, 8, 8]))
    assert from_onnx(path, (1, 3, 8, 8)).input_shapes == ((1, 3, 8, 8),)
    with pytest.raises(InputShapeError):
        from_onnx(path, shape)


# --- bad input ---------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="nope.onnx.*does not exist"):
        from_onnx(tmp_path / "nope.onnx")


@pytest.mark.parametrize("content", [np.random.default_rng(1).bytes(512), b""],
                         ids=["random", "empty"])
def test_corrupt_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match="bad.onnx"):
        from_onnx(path)


def test_external_data(tmp_path: Path) -> None:
    model = _residual_block()
    path = tmp_path / "ext.onnx"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.onnx.data", size_threshold=0)
    assert (tmp_path / "ext.onnx.data").is_file()
    assert from_onnx(path).total_weights == 8 * 27 + 8 + 8 * 72 + 8
    (tmp_path / "ext.onnx.data").unlink()
    with pytest.raises(ModelFileError, match="ext.onnx.*external data"):
        from_onnx(path)


def test_old_opset_is_rejected(tmp_path: Path) -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", [1, 2])],
                   ["y"], opset=10)
    with pytest.raises(ModelFileError, match="opset 10"):
        _import(tmp_path, model)


def _einsum_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Einsum", ["x", "w"], ["e"], name="mix", equation="ij,jk->ik"),
             helper.make_node("Relu", ["e"], ["y"], name="relu")]
    return _model(nodes, [_vi("x", [2, 3])], ["y"], [_init("w", 3, 4)])


def test_unsupported_op(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedOpError, match="'Einsum' at node 'mix'.*--allow-opaque"):
        _import(tmp_path, _einsum_model())


def test_unsupported_op_as_opaque(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="Einsum at node 'mix'"):
        g = _import(tmp_path, _einsum_model(), allow_opaque=True)
    op = g[0]
    assert (op.kind, op.op_type, op.output_shape) == (OpKind.OPAQUE, "einsum", (2, 4))
    assert (op.weight_elems, op.macs, op.inputs) == (12, 0, (-1,))
    assert g[1].inputs == (0,)


def test_opaque_lstm_with_secondary_output(tmp_path: Path) -> None:
    node = helper.make_node("LSTM", ["x", "W", "R"], ["", "h"], name="lstm", hidden_size=4)
    model = _model([node], [_vi("x", [5, 1, 3])], ["h"],
                   [_init("W", 1, 16, 3), _init("R", 1, 16, 4)])
    with pytest.raises(UnsupportedOpError, match="'LSTM' at node 'lstm'"):
        _import(tmp_path, model)
    with pytest.warns(UserWarning, match="LSTM"):
        g = from_onnx(tmp_path / "model.onnx", allow_opaque=True)
    assert [(op.kind, op.output_shape, op.weight_elems) for op in g] == [
        (OpKind.OPAQUE, (1, 1, 4), 48 + 64)]


def test_unknown_shape_is_a_model_file_error(tmp_path: Path) -> None:
    node = helper.make_node("Mystery", ["x"], ["y"], name="custom", domain="example.com")
    model = helper.make_model(
        helper.make_graph([node], "g", [_vi("x", [1, 2])], [_vi("y", None)]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example.com", 1)])
    path = _save(tmp_path, model, check=False)
    with pytest.raises(UnsupportedOpError, match="example.com.Mystery"):
        from_onnx(path)
    with pytest.raises(ModelFileError, match="'y' at node 'custom'"):
        from_onnx(path, allow_opaque=True)


def test_cycle_is_a_graph_error(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="second")]
    model = _model(nodes, [_vi("x", [1, 2])], ["b"])
    with pytest.raises(GraphError, match="cycle.*first"):
        from_onnx(_save(tmp_path, model, check=False))


# --- torch exports -----------------------------------------------------------------------------


def _torch_net() -> object:
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(8)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.bn1(self.conv1(x)))
            y = torch.relu(y + self.bn2(self.conv2(y)))
            return self.fc(torch.flatten(self.pool(y), 1))

    net = Net()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # non-trivial statistics: the folded biases must not be all zero
        for bn in (net.bn1, net.bn2):
            for t in (bn.weight, bn.bias, bn.running_mean):
                t.copy_(torch.rand(t.shape, generator=gen))
            bn.running_var.copy_(torch.rand(8, generator=gen) + 0.5)
    return net.eval()


#: (kind, output shape, weights, MACs) of the non-elementwise ops of `_torch_net` on 1x3x16x16.
TORCH_NET_OPS = [
    (OpKind.CONV, (1, 8, 16, 16), 8 * 27 + 8, 8 * 16 * 16 * 27),
    (OpKind.CONV, (1, 8, 16, 16), 8 * 72 + 8, 8 * 16 * 16 * 72),
    (OpKind.GLOBAL_POOL, (1, 8, 1, 1), 0, 0),
    (OpKind.RESHAPE, (1, 8), 0, 0),
    (OpKind.LINEAR, (1, 10), 90, 80),
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("layout", ["legacy", "dynamo", "dynamo-external"])
def test_torch_exports_agree(tmp_path: Path, layout: str) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "net.onnx"
    x = torch.randn(1, 3, 16, 16)
    if layout == "legacy":
        torch.onnx.export(_torch_net(), (x,), path, dynamo=False, input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}})
    else:
        torch.onnx.export(_torch_net(), (x,), path, dynamo=True, verbose=False,
                          external_data=layout == "dynamo-external")
    assert (tmp_path / "net.onnx.data").exists() == (layout == "dynamo-external")
    g = from_onnx(path)
    eltwise = (OpKind.ELTWISE_UNARY, OpKind.ELTWISE_BINARY)
    assert [(op.kind, op.output_shape, op.weight_elems, op.macs)
            for op in g if op.kind not in eltwise] == TORCH_NET_OPS
    assert [op.op_type for op in g if op.kind in eltwise] == ["relu", "add", "relu"]
    assert g.count(OpKind.BATCHNORM) == 0 and g.input_shapes == ((1, 3, 16, 16),)
