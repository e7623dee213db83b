"""Both importers record what execution needs: a module imported with its own parameters (from
torch, and from its ONNX export) runs in the executor to the module's own output."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from simulator.workload.execute import ExecutionError, execute
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.onnx_import import from_onnx_with_params
from simulator.workload.torch_import import from_torch, from_torch_with_params

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Sink(nn.Module):
    """Many op kinds, each with a parameter an importer must record to run it."""

    def __init__(self, reflect: bool = True) -> None:
        super().__init__()
        # The legacy ONNX exporter computes F.pad's pads with constant subgraphs, which the
        # ONNX importer does not evaluate: the ONNX variant does not pad.
        self.stem = nn.Conv2d(3, 8, 3, padding=1, padding_mode="reflect" if reflect else "zeros")
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.LeakyReLU(0.2)
        self.dw = nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2, groups=8)
        self.hard = nn.Hardtanh(-0.5, 2.0)
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.shuffle = nn.PixelShuffle(2)
        self.pad = nn.ReflectionPad2d((1, 0, 2, 1)) if reflect else nn.Identity()
        self.prelu = nn.PReLU(2)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8).view(1, 8, 1, 1))
        self.fc = nn.Linear(2, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.bn(self.stem(x)))                   # folded BN, reflect padding
        y = F.max_pool2d(y, 3, 2, 1, ceil_mode=True)
        a, b = torch.split(y, [4, 4], dim=1)                  # slices of a split
        y = torch.cat([b * 0.5, 1.0 - a], dim=1)              # scalar constants on both sides
        y = self.hard(self.dw(y)) * self.scale                # constant tensor operand
        y = self.pool(F.elu(y, alpha=0.7))
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=True)
        y = self.pad(self.shuffle(y))                         # 8 -> 2 channels, reflect pad
        y = self.prelu(torch.clamp(y, -1.0, 3.0))
        y = y[:, :, 1:, ::2].permute(0, 2, 3, 1)              # index slice, permute
        y = F.gelu(self.fc(y), approximate="tanh").transpose(1, 3)
        return torch.log_softmax(y, dim=1) + F.softplus(y, beta=2.0)


def _randomize_bn(module: nn.Module, seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.normal_(generator=gen)
            m.running_var.uniform_(0.5, 1.5, generator=gen)
            m.weight.data.uniform_(0.5, 1.5, generator=gen)
            m.bias.data.normal_(generator=gen)


def _check(graph, params, module: nn.Module, x: torch.Tensor) -> None:
    with torch.no_grad():
        ref = module.eval()(x)
    y = execute(graph, params, x)[0]
    assert y.shape == ref.shape
    assert float((y - ref).abs().max()) <= 1e-4 * max(1.0, float(ref.abs().max()))


def _sink(reflect: bool = True) -> nn.Module:
    torch.manual_seed(0)
    module = Sink(reflect).eval()
    _randomize_bn(module)
    return module


def test_torch_import_with_params_runs_to_the_modules_output():
    module, x = _sink(), torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(1))
    graph, params = from_torch_with_params(module, x.shape)
    assert graph == from_torch(module, x.shape)  # the same graph as the plain import
    kinds = {op.kind for op in graph}
    assert {OpKind.SLICE, OpKind.TRANSPOSE, OpKind.PAD, OpKind.RESIZE, OpKind.SOFTMAX,
            OpKind.CONCAT} <= kinds
    assert OpKind.BATCHNORM not in kinds  # folded
    _check(graph, params, module, x)
    _check(ComputeGraph.from_json(graph.to_json()), params, module, x)  # attrs survive JSON


def test_torch_import_unfolded_batchnorm_runs_too():
    module, x = _sink(), torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(2))
    graph, params = from_torch_with_params(module, x.shape, fold_bn=False)
    bn = graph[graph.id_of("bn")]
    assert bn.kind is OpKind.BATCHNORM and set(params["bn"]) == {"scale", "shift"}
    _check(graph, params, module, x)


def test_torch_import_records_slice_bounds_of_splits_and_indexing():
    class Split(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, b, c = torch.split(x, [1, 2, 3], dim=1)
            parts = x.unbind(3)
            pair = torch.cat([parts[1][..., None], parts[3][..., None]], dim=3)
            return torch.cat([c[..., 1:3], b[:, :, :, -2:], a[:, :, :, 0:2], pair[:, :2]], dim=1)

    x = torch.randn(1, 6, 4, 5)
    graph, params = from_torch_with_params(Split(), x.shape)
    bounds = {op.name: (op.attr("axis"), op.attr("start"), op.attr("end"))
              for op in graph if op.kind is OpKind.SLICE}
    assert (1, 3, 6) in bounds.values() and (1, 1, 3) in bounds.values()
    _check(graph, params, Split(), x)


def test_opaque_op_from_an_import_cannot_execute():
    class Odd(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cumsum(x, 1)

    with pytest.warns(UserWarning):
        graph, params = from_torch_with_params(Odd(), (1, 3, 4, 4), allow_opaque=True)
    with pytest.raises(ExecutionError, match="cumsum"):
        execute(graph, params, torch.randn(1, 3, 4, 4))


def _export(module: nn.Module, x: torch.Tensor, path, dynamo: bool) -> None:
    kwargs = {"external_data": False} if dynamo else {}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(module, (x,), str(path), dynamo=dynamo, **kwargs)
        finally:
            logging.disable(logging.NOTSET)


def test_onnx_import_with_initializers_runs_to_the_modules_output(tmp_path):
    module = _sink(reflect=False)
    x = torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(3))
    path = tmp_path / "sink.onnx"
    _export(module, x, path, dynamo=False)
    graph, params = from_onnx_with_params(path)
    _check(graph, params, module, x)


def _onnx_model(path) -> None:
    """An opset-11 model using attributes the executor needs, built by hand."""
    from onnx import TensorProto, helper, numpy_helper

    gen = torch.Generator().manual_seed(4)

    def init(name: str, value) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(value), name)

    def rand(*shape: int):
        return torch.randn(shape, generator=gen).numpy()

    import numpy as np
    import onnx

    inits = [
        init("pads", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)), init("W", rand(6, 4, 3, 3)),
        init("B", rand(6)), init("lo", np.float32(-0.2)), init("hi", np.float32(0.5)),
        init("one", np.float32(1.0)), init("k", rand(4, 1, 1)),
        init("st", np.array([1, 0], np.int64)), init("en", np.array([100, 3], np.int64)),
        init("ax", np.array([2, 3], np.int64)), init("idx", np.array([1, 2], np.int64)),
        init("W2", rand(6, 5)), init("b2", rand(5)), init("gamma", rand(6)),
        init("beta", rand(6)), init("mean", rand(6)), init("var", np.abs(rand(6)) + 0.5),
    ]
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["p"], mode="reflect"),
        helper.make_node("LeakyRelu", ["p"], ["l"], alpha=0.3),
        helper.make_node("Conv", ["l", "W", "B"], ["c"], strides=[2, 2], pads=[1, 0, 0, 1]),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"],
                         epsilon=1e-3),
        helper.make_node("HardSigmoid", ["n"], ["h"], alpha=0.2, beta=0.4),
        helper.make_node("Split", ["h"], ["a", "b"], axis=1, split=[2, 4]),
        helper.make_node("Clip", ["a", "lo", "hi"], ["cl"]),
        helper.make_node("Sub", ["one", "cl"], ["s"]),
        helper.make_node("Mul", ["b", "k"], ["m"]),
        helper.make_node("Concat", ["s", "m"], ["cat"], axis=1),
        helper.make_node("Slice", ["cat", "st", "en", "ax"], ["sl"]),
        helper.make_node("AveragePool", ["sl"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Transpose", ["ap"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Gather", ["t", "idx"], ["g"], axis=1),
        helper.make_node("MatMul", ["g", "W2"], ["mm"]),
        helper.make_node("Add", ["mm", "b2"], ["bias"]),
        helper.make_node("Softmax", ["bias"], ["y"], axis=2),
    ]
    graph = helper.make_graph(
        nodes, "hand", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.save(model, str(path))


def test_hand_built_onnx_model_runs_as_onnxruntime_runs_it(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "hand.onnx"
    _onnx_model(path)
    x = torch.randn(1, 4, 6, 6, generator=torch.Generator().manual_seed(5))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = torch.from_numpy(session.run(None, {"x": x.numpy()})[0])
    for fold in (True, False):
        graph, params = from_onnx_with_params(path, fold_bn=fold)
        assert graph.count(OpKind.BATCHNORM) == (0 if fold else 1)
        softmax = next(op for op in graph if op.kind is OpKind.SOFTMAX)
        assert softmax.attr("axis") == (2, 3)  # opset 11: softmax over the axes from 2 on
        y = execute(graph, params, x)[0]
        assert y.shape == ref.shape
        assert float((y - ref).abs().max()) <= 1e-5
