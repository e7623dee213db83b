"""Symbolic shapes (RDP): propagated shapes equal the importers' at every binding, the SoD
classification, shape rules the zoo does not reach, and bad bindings."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings

import pytest
import sympy
import torch
import torch.nn.functional as F
from torch import nn

from simulator.errors import InputError
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import OpKind
from simulator.workload.loader import load_zoo
from simulator.workload.onnx_import import from_onnx
from simulator.workload.rdp import (
    BindingError,
    Dynamism,
    SymbolicShapeError,
    bind,
    classify,
    load_symbolic,
    parse_bindings,
    propagate,
    reference_shape,
)
from simulator.workload.torch_import import from_torch
from simulator.workload.zoo import CNN, zoo_names
from simulator.workload.zoo.bert import BertEncoder
from simulator.workload.zoo.vit import VisionTransformer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BINDINGS = ((224, 224), (193, 257), (320, 160))  # square, odd and non-square, wide
FAST = ("squeezenet1_0", "mobilenet_v3_small", "resnet18")
ZOO_CASES = [pytest.param(n, marks=() if n in FAST else pytest.mark.slow) for n in zoo_names(CNN)]
H, W = sympy.Symbol("H", integer=True, positive=True), sympy.Symbol("W", integer=True,
                                                                     positive=True)


@pytest.mark.parametrize("name", ZOO_CASES)
def test_every_zoo_network_binds_to_the_graph_imported_at_that_shape(name):
    symbolic = load_symbolic(name, "1,3,H,W")
    assert symbolic.symbols == ("H", "W")
    for h, w in BINDINGS:
        bound = symbolic.bind({"H": h, "W": w})
        concrete = load_zoo(name, (1, 3, h, w))
        # the whole graph: every op's shapes, MACs, windows, mapping, weights and attrs
        assert bound == concrete, (name, h, w)
        assert bound.total_macs == concrete.total_macs


LENGTH = sympy.Symbol("L", integer=True, positive=True)


@pytest.mark.slow
def test_bert_base_binds_to_the_graph_imported_at_each_sequence_length():
    symbolic = load_symbolic("bert_base", "1,L,768")
    assert symbolic.symbols == ("L",) and dict(symbolic.reference) == {"L": 160}
    for length in (128, 77, 512):
        assert symbolic.bind({"L": length}) == load_zoo("bert_base", (1, length, 768)), length


def test_a_bert_encoder_follows_batch_and_sequence_length():
    """The zoo's BERT builder at a small width: every op follows N and L; the attention
    scores are (N, h, L, L) with L^2 d MACs per head."""
    module = BertEncoder(num_layers=2, hidden=16, heads=2, intermediate=32)
    symbolic = propagate(from_torch(module, (2, 9, 16)), "N,L,16")
    n = sympy.Symbol("N", integer=True, positive=True)
    scores = next(s for s in symbolic.ops if s.op.kind is OpKind.MATMUL)
    assert scores.output_shape == (n, 2, LENGTH, LENGTH)
    assert sympy.expand(scores.macs - 16 * n * LENGTH ** 2) == 0
    assert all(s.symbols in (("L", "N"),) for s in symbolic.ops)
    for batch, length in ((1, 5), (3, 17), (1, 64)):
        assert symbolic.bind({"N": batch, "L": length}) == from_torch(module,
                                                                     (batch, length, 16))


def test_a_vision_transformer_position_embedding_fixes_its_resolution():
    """One learned position per patch: the token count cannot follow H and W, so RDP refuses
    the addition by name (a ViT at another resolution is another model: ``vit_b_16@384``)."""
    graph = from_torch(VisionTransformer(32, 8, 1, 2, 16, 32, num_classes=10), (1, 3, 32, 32))
    with pytest.raises(SymbolicShapeError, match=r"op 'add' .*floor\(H/8\)\*floor\(W/8\) \+ 1 "
                                                 r"and 17 agree only at one binding"):
        propagate(graph, "1,3,H,W")
    # the class token is a constant expanded to the batch (N copies, N x 16 weights)
    with pytest.raises(SymbolicShapeError, match=r"op 'cat' .*constant operand's axis 0: N and 1 "
                                                 r"agree only at one binding"):
        propagate(graph, "N,3,32,32")


@pytest.mark.slow
def test_vgg_classifier_after_its_fixed_adaptive_pool_follows_any_resolution():
    """The 7x7 adaptive pool fixes the classifier's input; at 224 the pool is an identity,
    which the importer drops, and so does `bind`."""
    symbolic = load_symbolic("vgg16", "1,3,H,W")
    assert dict(symbolic.reference) == {"H": 256, "W": 256}
    pool = symbolic.op("avgpool")
    assert pool.rule == "adaptive window" and pool.symbols == ()
    assert symbolic.op("classifier.0").is_static
    at_224 = symbolic.bind("H=224,W=224")
    assert "avgpool" not in {op.name for op in at_224} and len(at_224) == len(symbolic.ops) - 1
    assert at_224 == load_zoo("vgg16")


def test_shapes_are_expressions_of_the_symbols():
    symbolic = load_symbolic("resnet18", "1,3,H,W")
    conv1 = symbolic.op("conv1")
    assert conv1.output_shape == (1, 64, sympy.floor((H - 1) / 2) + 1,
                                  sympy.floor((W - 1) / 2) + 1)
    assert sympy.expand(conv1.macs - 64 * 3 * 7 * 7 * conv1.output_shape[2]
                        * conv1.output_shape[3]) == 0
    assert conv1.rule == "window" and conv1.symbols == ("H", "W")
    assert symbolic.op("fc").is_static and symbolic.op("fc").output_shape == (1, 1000)
    pool = symbolic.op("avgpool")
    assert pool.rule == "global" and pool.output_shape == (1, 512, 1, 1)


def test_symbolic_batch_and_resolution_together():
    symbolic = load_symbolic("resnet18", "N,3,H,W")
    assert dict(symbolic.reference) == {"H": 256, "N": 2, "W": 256}
    assert symbolic.op("fc").output_shape[0] == sympy.Symbol("N", integer=True, positive=True)
    assert symbolic.bind({"N": 3, "H": 97, "W": 131}) == load_zoo("resnet18", (3, 3, 97, 131))


def test_dynamism_classification_of_named_ops():
    deeplab = load_symbolic("deeplabv3_mobilenet_v3_large", "1,3,H,W")
    classes = deeplab.dynamism()
    isdos = Dynamism.INPUT_SHAPE_DETERMINED_OUTPUT_SHAPE
    isvdos = Dynamism.INPUT_SHAPE_AND_VALUE_DETERMINED_OUTPUT_SHAPE
    assert classes["backbone.0.0"] is isdos  # conv
    assert classes["cat"] is isdos  # concat
    assert classes["interpolate_1"] is isvdos  # resize to the input's size
    assert isvdos.abbreviation == "ISVDOS" and isvdos.value == (
        "Input Shape & Value Determined Output Shape")
    resize = deeplab.op("interpolate_1")
    assert resize.rule == "resize like" and resize.op.attr("size_of") == "x"
    assert resize.output_shape == (1, 21, H, W)
    assert classify(load_zoo("resnet18")[load_zoo("resnet18").id_of("flatten")]) is isvdos
    rows = deeplab.rows()
    assert rows[0]["dynamism"] == "ISDOS" and rows[-1]["output_shape"] == "(1, 21, H, W)"


def _graph(*ops, inputs=(("x", (1, 4, 8, 8)),), outputs=None):
    """A hand-built graph: each op is (name, kind, op_type, inputs, output_shape, fields)."""
    b = GraphBuilder("g")
    for name, shape in inputs:
        b.add_input(name, shape)
    for name, kind, op_type, ins, shape, fields in ops:
        b.add_op(name, kind, op_type, ins, shape, **fields)
    return b.build(outputs or [ops[-1][0]])


def test_classification_of_norms_matmul_and_opaque_ops():
    g = _graph(
        ("ln", OpKind.NORM, "layernorm", ["x"], (1, 4, 8, 8),
         {"weight_elems": 16, "attrs": {"axes": (-1,), "eps": 1e-5, "affine": True}}),
        ("gn", OpKind.NORM, "groupnorm", ["ln"], (1, 4, 8, 8),
         {"weight_elems": 8, "attrs": {"axes": (1, 2, 3), "groups": 2, "affine": True}}),
        ("mm", OpKind.MATMUL, "matmul", ["gn", "gn"], (1, 4, 8, 8), {"macs": 2048}),
        ("odd", OpKind.OPAQUE, "nonzero", ["mm"], (1, 4, 8, 8), {}),
    )
    kinds = {op.name: classify(op).abbreviation for op in g}
    assert kinds == {"ln": "ISDOS", "gn": "ISVDOS", "mm": "ISDOS", "odd": "EDO"}


def test_norm_and_matmul_follow_a_sequence_length():
    """A token tensor (N, L, D): attention scores Q K^T are (N, L, L), MACs L * L * D."""
    g = _graph(
        ("ln", OpKind.NORM, "layernorm", ["x"], (1, 6, 8),
         {"weight_elems": 16, "attrs": {"axes": (-1,), "affine": True}}),
        ("kt", OpKind.TRANSPOSE, "transpose", ["ln"], (1, 8, 6), {"attrs": {"perm": (0, 2, 1)}}),
        ("scores", OpKind.MATMUL, "matmul", ["ln", "kt"], (1, 6, 6), {"macs": 6 * 6 * 8}),
        ("attn", OpKind.SOFTMAX, "softmax", ["scores"], (1, 6, 6), {"attrs": {"axis": 2}}),
        ("ctx", OpKind.MATMUL, "matmul", ["attn", "ln"], (1, 6, 8), {"macs": 6 * 8 * 6}),
        inputs=(("x", (1, 6, 8)),),
    )
    symbolic = propagate(g, "1,L,8")
    length = sympy.Symbol("L", integer=True, positive=True)
    assert symbolic.op("scores").output_shape == (1, length, length)
    assert symbolic.op("scores").macs == 8 * length ** 2
    assert symbolic.op("ctx").macs == 8 * length ** 2
    at_20 = symbolic.bind({"L": 20})
    assert at_20[at_20.id_of("ctx")].output_shape == (1, 20, 8)
    assert at_20.total_macs == 2 * 20 * 20 * 8
    assert at_20.total_weights == g.total_weights
    with pytest.raises(SymbolicShapeError, match="'ln'.*normalised axes .* follows L"):
        propagate(g, "1,6,L")  # LayerNorm weights over a symbolic axis


class _Tail(nn.Module):
    """conv -> flatten -> linear: the classifier's input size is the feature map's."""

    def __init__(self, pool: bool) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(2) if pool else nn.Identity()
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.conv(x)), 1))


def test_a_flatten_of_a_symbolic_map_into_a_fixed_linear_is_refused_by_name():
    g = from_torch(_Tail(pool=False), (1, 3, 4, 4))
    with pytest.raises(SymbolicShapeError) as err:
        propagate(g, "1,3,H,W")
    text = str(err.value)
    assert "'fc'" in text and "H" in text and "fixed at 16 inputs" in text
    assert "\n" not in text
    fixed = from_torch(_Tail(pool=True), (1, 3, 8, 8))  # a fixed adaptive pool: fine
    symbolic = propagate(fixed, "1,3,H,W")
    assert symbolic.bind("H=31,W=17") == from_torch(_Tail(pool=True), (1, 3, 31, 17))


class _Branches(nn.Module):
    """Shapes that agree only at some bindings, ceil-mode pooling, a scaled upsample and a
    pixel unshuffle (whose H must be even)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Conv2d(3, 3, 3, stride=2, padding=1)
        self.up = nn.Upsample(scale_factor=2)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.unshuffle = nn.PixelUnshuffle(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.up(self.down(x))
        return self.unshuffle(self.pool(F.pad(y, (1, 2, 1, 1))))


def test_scale_pad_ceil_mode_and_shuffle_rules_match_the_importer():
    symbolic = propagate(from_torch(_Branches(), (1, 3, 16, 24)), "1,3,H,W")
    assert symbolic.op("up").op.attr("scale") == (2.0, 2.0)
    # x + up(down(x)): H == 2 * ceil(H / 2) and the same for W, checked at each binding
    assert [c.op for c in symbolic.constraints] == ["add", "add"]
    for h, w in ((8, 8), (32, 12), (12, 20)):
        assert symbolic.bind({"H": h, "W": w}) == from_torch(_Branches(), (1, 3, h, w))


@pytest.mark.parametrize("values, message", [
    ({"H": 16}, "symbol 'W' of .* is not bound"),
    ({"H": 16, "W": 16, "C": 3}, "symbol 'C' is not a dimension of"),
    ({"H": 0, "W": 16}, "H=0: a dimension must be a positive integer"),
    ({"H": 16.5, "W": 16}, "H=16.5: a dimension must be a positive integer"),
    ({"H": "x", "W": 16}, "H=x: a dimension must be a positive integer"),
    ({"H": 15, "W": 16}, r"op 'add': operands' axis 2 must agree but are 15 and 16 \(they "
                         r"depend on H\)"),
    ({"H": 18, "W": 16}, r"dimension 2 of op 'unshuffle' .* 11/2 \(not a whole number"),
])
def test_bad_bindings_are_one_line_naming_the_symbol_and_op(values, message):
    symbolic = propagate(from_torch(_Branches(), (1, 3, 16, 24)), "1,3,H,W")
    with pytest.raises(BindingError, match=message) as err:
        bind(symbolic, values)
    assert "\n" not in str(err.value) and isinstance(err.value, InputError)


def test_a_binding_that_makes_a_dimension_vanish_names_the_op_and_symbol():
    symbolic = load_symbolic("squeezenet1_1", "1,3,H,W")
    with pytest.raises(BindingError, match=r"H=16,W=64 makes dimension 2 of op 'features.\d+' "
                                           r".*depends on H\)"):
        symbolic.bind("H=16,W=64")


def test_parse_bindings_and_reference_shape():
    assert parse_bindings("H=512, W=256") == {"H": 512, "W": 256}
    for bad in ("H", "H=1,H=2", "=3", "H=-1", ""):
        with pytest.raises(BindingError):
            parse_bindings(bad)
    assert reference_shape((1, 3, "H", "W"), (1, 3, 224, 224)) == (1, 3, 256, 256)
    assert reference_shape(("N", "C", "S", "S"), (1, 3, 513, 513)) == (2, 3, 544, 544)
    assert reference_shape((1, "L"), None, {"L": 77}) == (1, 77)


def test_opaque_ops_are_refused_on_symbolic_tensors_only():
    g = _graph(("relu", OpKind.ELTWISE_UNARY, "relu", ["x"], (1, 4, 8, 8), {}),
               ("odd", OpKind.OPAQUE, "nonzero", ["relu"], (1, 4, 8, 8), {}))
    with pytest.raises(SymbolicShapeError, match="'odd' .*opaque op's shape is known only"):
        propagate(g, "1,4,H,W")
    static = _graph(("gp", OpKind.GLOBAL_POOL, "avg", ["x"], (1, 4, 1, 1),
                     {"kernel": (8, 8), "stride": (8, 8)}),
                    ("odd", OpKind.OPAQUE, "nonzero", ["gp"], (1, 4, 1, 1), {}))
    symbolic = propagate(static, "1,4,H,W")
    assert symbolic.op("odd").rule == "static"
    assert symbolic.bind("H=3,W=5")[0].kernel == (3, 5)


def test_a_reshape_splitting_a_symbolic_axis_ambiguously_is_refused():
    g = _graph(("view", OpKind.RESHAPE, "view", ["x"], (1, 4, 4, 2, 8), {}))
    with pytest.raises(SymbolicShapeError, match="'view'.*splits H into \\(4, 2\\)"):
        propagate(g, "1,4,H,8")
    flat = propagate(_graph(("flat", OpKind.RESHAPE, "flatten", ["x"], (1, 256), {})),
                     "1,4,H,W")
    assert flat.op("flat").output_shape == (1, 4 * H * W)


def _export(module: nn.Module, path, dynamic: dict[int, str]) -> None:
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(module.eval(), (torch.randn(1, 3, 32, 32),), str(path),
                              dynamo=False, input_names=["x"], dynamic_axes={"x": dynamic})
        finally:
            logging.disable(logging.NOTSET)


class _Segmenter(nn.Module):
    """A strided encoder, a global-pool branch upsampled to the feature size, logits
    resized to the input: DeepLab's shape dependencies in small."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.MaxPool2d(3, stride=2, ceil_mode=True))
        self.branch = nn.Conv2d(8, 8, 1)
        self.head = nn.Conv2d(16, 5, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.enc(x)
        g = F.interpolate(self.branch(F.adaptive_avg_pool2d(f, 1)), size=f.shape[-2:])
        logits = self.head(torch.cat([f, g], dim=1))
        return F.interpolate(logits, size=x.shape[-2:], mode="bilinear")


def test_onnx_dynamic_dims_become_symbols_and_bind_to_the_fixed_import(tmp_path):
    path = tmp_path / "seg.onnx"
    _export(_Segmenter(), path, {2: "height", 3: "width"})
    symbolic = load_symbolic(str(path))
    assert symbolic.symbols == ("height", "width")
    assert dict(symbolic.reference) == {"height": 256, "width": 256}
    for h, w in BINDINGS:
        assert symbolic.bind({"height": h, "width": w}) == from_onnx(path, (1, 3, h, w))
    renamed = load_symbolic(str(path), "1,3,H,W")  # --input-shape names the symbols
    assert renamed.bind("H=100,W=60") == from_onnx(path, (1, 3, 100, 60))
    with pytest.raises(SymbolicShapeError, match="reference shape .* does not match input 'x'"):
        load_symbolic(str(path), "1,4,H,W")


def test_onnx_auto_pad_same_is_recomputed_at_each_binding(tmp_path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[2, 2],
                            kernel_shape=[3, 3], auto_pad="SAME_UPPER")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([conv], "g", [x], [y], [weight]),
                              opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "same.onnx"
    onnx.save(model, path)
    symbolic = load_symbolic(str(path))
    for h, w in ((7, 8), (9, 12), (16, 5)):
        bound = symbolic.bind({"h": h, "w": w})
        assert bound == from_onnx(path, (1, 3, h, w))
    assert symbolic.bind("h=7,w=8")[0].padding != symbolic.bind("h=8,w=8")[0].padding
