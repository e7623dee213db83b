"""The transformer ops of [workloads] item 1 in both importers, each run in the IR executor to
torch's own output: LayerNorm / GroupNorm / InstanceNorm / RMSNorm as `OpKind.NORM`, products of
two activations as `OpKind.MATMUL`, softmax on any axis, and scaled-dot-product attention and
nn.MultiheadAttention as their primitives; what no primitive expresses is refused by name."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from simulator.workload.errors import UnsupportedOpError
from simulator.workload.execute import execute, random_params
from simulator.workload.graph import OpKind
from simulator.workload.onnx_import import from_onnx_with_params
from simulator.workload.ops import matmul_shape
from simulator.workload.torch_import import from_torch, from_torch_with_params

pytestmark = pytest.mark.usefixtures("one_torch_thread")

N, M, MM = OpKind.NORM, OpKind.MATMUL, OpKind.MATMUL
X4 = (2, 4, 6, 6)


class Wrap(nn.Module):
    """``body(x * 2)``, with the body's parameters drawn away from their identity values."""

    def __init__(self, body: nn.Module | Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.body = body
        g = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x * 2.0)


class WithParams(nn.Module):
    """A function of the input and of this module's `w` (C) and `b` (C) parameters."""

    def __init__(self, fn: Callable[..., torch.Tensor], c: int = 6) -> None:
        super().__init__()
        self.fn = fn
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, c))
        self.b = nn.Parameter(torch.linspace(-0.2, 0.3, c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, self.w, self.b)


def _run(module: nn.Module, shape: tuple[int, ...], **tol: float):
    """Import with the module's parameters, execute, compare with the module; the graph."""
    module = module.eval()
    graph, params = from_torch_with_params(module, shape)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = module(x)
    (y,) = execute(graph, params, x)
    assert y.shape == ref.shape
    torch.testing.assert_close(y, ref, **({"rtol": 1e-5, "atol": 1e-5} | tol))
    return graph


def _params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# --- normalisations -----------------------------------------------------------------------------

# (id, body, input shape, (op_type, axes, groups, affine), weights)
NORMS = [
    ("LayerNorm", nn.LayerNorm(6), X4, ("layernorm", (3,), None, True), 12),
    ("LayerNorm 2 axes", nn.LayerNorm([6, 6], eps=1e-3), X4,
     ("layernorm", (2, 3), None, True), 72),
    ("LayerNorm no affine", nn.LayerNorm(6, elementwise_affine=False), (3, 5, 6),
     ("layernorm", (2,), None, False), 0),
    ("LayerNorm no bias", nn.LayerNorm(6, bias=False), (3, 5, 6),
     ("layernorm", (2,), None, True), 6),
    ("GroupNorm", nn.GroupNorm(2, 4), X4, ("groupnorm", (1, 2, 3), 2, True), 8),
    ("GroupNorm no affine", nn.GroupNorm(4, 4, affine=False), (2, 4, 9),
     ("groupnorm", (1, 2), 4, False), 0),
    ("InstanceNorm2d", nn.InstanceNorm2d(4), X4, ("groupnorm", (1, 2, 3), 4, False), 0),
    ("InstanceNorm1d affine", nn.InstanceNorm1d(4, affine=True), (2, 4, 9),
     ("groupnorm", (1, 2), 4, True), 8),
    ("RMSNorm", nn.RMSNorm(6), X4, ("rmsnorm", (3,), None, True), 6),
    ("RMSNorm 2 axes eps", nn.RMSNorm([6, 6], eps=1e-4, elementwise_affine=False), X4,
     ("rmsnorm", (2, 3), None, False), 0),
    ("F.layer_norm", WithParams(lambda x, w, b: F.layer_norm(x, (6,), w, b, 1e-4)), X4,
     ("layernorm", (3,), None, True), 12),
    ("torch.layer_norm", WithParams(lambda x, w, b: torch.layer_norm(x, [6], w, b)), X4,
     ("layernorm", (3,), None, True), 12),
    ("F.group_norm", WithParams(lambda x, w, b: F.group_norm(x, 2, w, b), 4), X4,
     ("groupnorm", (1, 2, 3), 2, True), 8),
    ("torch.group_norm", WithParams(lambda x, w, b: torch.group_norm(x, 4, w, b), 4), X4,
     ("groupnorm", (1, 2, 3), 4, True), 8),
    ("F.instance_norm", WithParams(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), 4), X4,
     ("groupnorm", (1, 2, 3), 4, True), 8),
    ("F.rms_norm", WithParams(lambda x, w, b: F.rms_norm(x, (6,), w)), X4,
     ("rmsnorm", (3,), None, True), 6),
    ("torch.rms_norm", WithParams(lambda x, w, b: torch.rms_norm(x, [6], w, 1e-3)), X4,
     ("rmsnorm", (3,), None, True), 6),
]


@pytest.mark.parametrize(("body", "shape", "expected", "weights"), [c[1:] for c in NORMS],
                         ids=[c[0] for c in NORMS])
def test_normalisations_import_as_norm_and_run_like_torch(body, shape, expected, weights):
    graph = _run(Wrap(body), shape)
    op = graph[len(graph) - 1]
    op_type, axes, groups, affine = expected
    assert (op.kind, op.op_type, op.attr("axes"), op.attr("groups"), op.attr("affine")) == (
        N, op_type, axes, groups, affine)
    assert op.output_shape == shape and op.macs == 0
    # the scale and bias are weights (a parameter the function does not read is not)
    assert op.weight_elems == graph.total_weights == weights
    if isinstance(body, nn.Module) and not isinstance(body, WithParams):
        assert weights == _params(body)
        eps = body.eps if body.eps is not None else torch.finfo(torch.float32).eps
        assert op.attr("eps") == pytest.approx(eps)


def test_instance_norm_with_running_statistics_is_a_batchnorm():
    norm = nn.InstanceNorm2d(4, affine=True, track_running_stats=True)
    with torch.no_grad():
        norm.running_mean.uniform_(-1, 1)
        norm.running_var.uniform_(0.5, 2)
    graph = _run(Wrap(norm), X4)
    assert [op.kind for op in graph][1:] == [OpKind.BATCHNORM]


def test_random_parameters_run_every_norm():
    graph = from_torch(Wrap(nn.Sequential(nn.LayerNorm(6), nn.GroupNorm(2, 4),
                                          nn.RMSNorm([6, 6]))), X4)
    (y,) = execute(graph, random_params(graph), torch.randn(X4))
    assert y.shape == X4 and torch.isfinite(y).all()


# --- products of two activations ---------------------------------------------------------------

# (id, function of x (2, 4, 6), expected MACs)
PRODUCTS = [
    ("x @ x^T", lambda x: x @ x.transpose(-1, -2), 2 * 4 * 4 * 6),
    ("torch.matmul broadcast", lambda x: torch.matmul(x.unsqueeze(1), x[:1].transpose(1, 2)),
     2 * 1 * 4 * 4 * 6),
    ("torch.bmm", lambda x: torch.bmm(x.transpose(1, 2), x), 2 * 6 * 6 * 4),
    ("Tensor.bmm", lambda x: x.bmm(x.transpose(1, 2)), 2 * 4 * 4 * 6),
    ("Tensor.matmul vector", lambda x: x.matmul(x[0, 0]), 2 * 4 * 6),
    ("torch.mm", lambda x: torch.mm(x[0], x[1].T), 4 * 4 * 6),
]


@pytest.mark.parametrize(("fn", "macs"), [c[1:] for c in PRODUCTS],
                         ids=[c[0] for c in PRODUCTS])
def test_products_of_two_activations_are_matmuls(fn, macs):
    graph = _run(Wrap(fn), (2, 4, 6))
    op = next(op for op in graph if op.kind is MM)
    assert op.op_type == "matmul" and len(op.inputs) == 2 and op.weight_elems == 0
    assert op.macs == macs
    assert op.output_shape == matmul_shape(*op.input_shapes)


def test_matmul_shape_broadcasts_as_torch():
    for a, b in [((2, 1, 4, 6), (3, 6, 5)), ((6,), (2, 6, 3)), ((2, 3, 6), (6,)), ((6,), (6,))]:
        assert matmul_shape(a, b) == tuple(torch.matmul(torch.zeros(a), torch.zeros(b)).shape)
    assert matmul_shape((2, 3), (4, 5)) is None and matmul_shape((2, 3, 4), (3, 4, 5)) is None


# --- attention -----------------------------------------------------------------------------------


class SDPA(nn.Module):
    def __init__(self, **kwargs: object) -> None:
        super().__init__()
        self.kwargs = kwargs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(x * 0.5, x + 1.0, x, **self.kwargs)


class SDPAMask(nn.Module):
    """A constant boolean mask (True takes part) or a float mask computed from the input."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.register_buffer("allowed", torch.rand(5, 5, generator=torch.Generator()
                                                   .manual_seed(1)) > 0.3)
        self.allowed[:, 0] = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = self.allowed if self.kind == "bool" else x[..., :5].sigmoid()
        return F.scaled_dot_product_attention(x, x * 2.0, x, attn_mask=mask)


SDPA_PRIMITIVES = [(OpKind.TRANSPOSE, "transpose"), (MM, "matmul"),
                   (OpKind.ELTWISE_UNARY, "mul"), (OpKind.SOFTMAX, "softmax"), (MM, "matmul")]


def test_scaled_dot_product_attention_is_its_primitives():
    graph = _run(SDPA(), (2, 3, 5, 8))
    assert [(op.kind, op.op_type) for op in graph][2:] == SDPA_PRIMITIVES
    names = [op.name for op in graph][2:]
    assert names[0] == "scaled_dot_product_attention/key_t"
    assert graph[4].attr("scalar") == pytest.approx(1 / math.sqrt(8))
    assert graph[5].attr("axis") == 3
    assert [graph[3].macs, graph[6].macs] == [2 * 3 * 5 * 5 * 8] * 2


@pytest.mark.parametrize(("module", "mask_weights"), [
    (SDPA(is_causal=True), 25), (SDPA(scale=0.3), 0), (SDPAMask("bool"), 25),
    (SDPAMask("float"), 0)], ids=["is_causal", "scale", "bool mask", "float mask"])
def test_scaled_dot_product_attention_options(module, mask_weights):
    graph = _run(module, (2, 5, 8))
    adds = [op for op in graph if op.op_type == "add" and "mask" in op.name]
    assert len(adds) == (0 if isinstance(module, SDPA) and mask_weights == 0 else 1)
    assert graph.total_weights == mask_weights  # an additive mask constant counts as weights


def test_attention_no_primitive_expresses_is_refused_by_name():
    class RuntimeBool(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(x, x, x, attn_mask=x[..., :5] > 0)

    class Padding(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
            self.register_buffer("pad", torch.zeros(2, 5, dtype=torch.bool))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.attn(x, x, x, key_padding_mask=self.pad)[0]

    with pytest.warns(UserWarning, match="opaque"):  # the comparison is refused too
        graph = from_torch(RuntimeBool(), (2, 5, 8), allow_opaque=True)
    assert [op.op_type for op in graph if op.kind is OpKind.OPAQUE] == [
        "gt", "scaled_dot_product_attention"]
    with pytest.raises(UnsupportedOpError, match="unsupported op scaled_dot_product_attention"):
        from_torch(SDPA(enable_gqa=True), (2, 4, 5, 8))
    with pytest.raises(UnsupportedOpError, match="unsupported op MultiheadAttention"):
        from_torch(Padding(), (2, 5, 8))


class MHA(nn.Module):
    def __init__(self, mask: str | None = None, cross: bool = False, **kwargs: object) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, **kwargs)
        self.mask, self.cross = mask, cross
        blocked = torch.ones(5, 5, dtype=torch.bool).triu(1)  # True is masked out
        self.register_buffer("blocked", blocked)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = {"bool": self.blocked, "float": self.blocked.float() * -3.0,
                None: None}[self.mask]
        kv = x[..., :self.attn.kdim] * 2.0 if self.cross else x
        out, _ = self.attn(x, kv, kv, attn_mask=mask)
        return out


MHA_CASES = [
    ("batch first", MHA(batch_first=True), (2, 5, 8)),
    ("sequence first", MHA(), (5, 2, 8)),
    ("unbatched", MHA(batch_first=True), (5, 8)),
    ("no bias", MHA(batch_first=True, bias=False), (2, 5, 8)),
    ("kdim vdim", MHA(cross=True, batch_first=True, kdim=4, vdim=4), (2, 5, 8)),
    ("bool mask", MHA("bool", batch_first=True), (2, 5, 8)),
    ("float mask", MHA("float"), (5, 2, 8)),
]


@pytest.mark.parametrize(("module", "shape"), [c[1:] for c in MHA_CASES],
                         ids=[c[0] for c in MHA_CASES])
def test_multihead_attention_is_its_primitives(module, shape):
    graph = _run(module, shape)
    kinds = [(op.kind, op.op_type) for op in graph if op.kind is not OpKind.ELTWISE_UNARY
             or "mask" in op.name or op.op_type != "mul" or "/scale" in op.name]
    head = [(OpKind.LINEAR, "linear"), (OpKind.RESHAPE, "reshape"), (OpKind.TRANSPOSE, "permute")]
    start = kinds.index((OpKind.LINEAR, "linear"))
    assert kinds[start:start + 9] == head * 3
    linears = [op for op in graph if op.kind is OpKind.LINEAR]
    assert [op.name.rsplit("/", 1)[-1] for op in linears] == [
        "q_proj", "k_proj", "v_proj", "attn.out_proj"]
    heads = [op for op in graph if op.name.endswith("q_heads")][0]
    assert heads.output_shape[-3:] == (2, 5, 4)  # (..., h, L, d)
    mask = 25 if module.mask else 0  # a constant mask operand counts as weights
    assert graph.total_weights == _params(module) + mask
    assert graph.count(MM) == 2 and graph.count(OpKind.SOFTMAX) == 1


def test_multihead_attention_with_unread_weights_imports():
    class Both(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, weights = self.attn(x, x, x)  # need_weights=True, weights never read
            return out

    graph = _run(Both(), (2, 5, 8))
    assert graph.total_weights == _params(Both())


# --- ONNX ---------------------------------------------------------------------------------------


def _export(tmp_path, module: nn.Module, shape: tuple[int, ...], opset: int = 17):
    path = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), torch.randn(shape), path, dynamo=False,
                          opset_version=opset)
    return from_onnx_with_params(path)


def _same_output(graph, params, module: nn.Module, shape: tuple[int, ...]) -> None:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = module(x)
    torch.testing.assert_close(execute(graph, params, x)[0], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("body", "shape"), [
    (nn.LayerNorm(6), X4), (nn.LayerNorm([6, 6]), X4), (nn.GroupNorm(2, 4), X4),
    (nn.GroupNorm(2, 4, affine=False), X4), (nn.InstanceNorm2d(4, affine=True), X4),
    (nn.InstanceNorm2d(4), X4)],
    ids=["LayerNorm", "LayerNorm 2 axes", "GroupNorm", "GroupNorm no affine",
         "InstanceNorm2d affine", "InstanceNorm2d"])
def test_onnx_exports_of_norms_import_as_from_torch_does(tmp_path, body, shape):
    """LayerNormalization; GroupNorm as the exporter writes it (Reshape, InstanceNormalization
    of ones and zeros, Reshape, Mul, Add) is one op with the module's weights; an
    InstanceNorm's InstanceNormalization."""
    module = Wrap(body).eval()
    graph, params = _export(tmp_path, module, shape)
    _same_output(graph, params, module, shape)
    torch_graph = from_torch(module, shape)
    summary = [(op.kind, op.op_type, op.attr("axes"), op.attr("groups"), op.attr("affine"),
                op.weight_elems) for op in graph]
    assert summary == [(op.kind, op.op_type, op.attr("axes"), op.attr("groups"),
                        op.attr("affine"), op.weight_elems) for op in torch_graph]
    assert graph.total_weights == _params(body)


def _onnx_graph(tmp_path, nodes, inputs, out_shape, inits=(), opset=17):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s))
                     for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        initializer=list(inits))
    path = tmp_path / "g.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return from_onnx_with_params(path)


def _init(name: str, values: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(values.astype(np.float32), name)


def test_onnx_group_and_rms_normalization(tmp_path):
    scale, bias = np.linspace(0.5, 1.5, 4), np.linspace(-1, 1, 4)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2,
                            epsilon=1e-3)
    graph, params = _onnx_graph(tmp_path, [node], [("x", X4)], X4,
                                [_init("s", scale), _init("b", bias)], opset=21)
    assert (graph[0].kind, graph[0].attr("groups"), graph[0].weight_elems) == (N, 2, 8)
    x = torch.randn(X4)
    ref = F.group_norm(x, 2, torch.tensor(scale).float(), torch.tensor(bias).float(), 1e-3)
    torch.testing.assert_close(execute(graph, params, x)[0], ref)
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-2, epsilon=1e-4)
    graph, params = _onnx_graph(tmp_path, [node], [("x", X4)], X4,
                                [_init("s", np.linspace(0.5, 2, 36).reshape(6, 6))], opset=23)
    assert (graph[0].op_type, graph[0].attr("axes"), graph[0].weight_elems) == (
        "rmsnorm", (2, 3), 36)
    ref = F.rms_norm(x, (6, 6), params[graph[0].name]["weight"], 1e-4)
    torch.testing.assert_close(execute(graph, params, x)[0], ref)


def test_onnx_group_normalization_with_a_scale_per_group_is_refused(tmp_path):
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2,
                            name="gn")
    with pytest.raises(UnsupportedOpError, match="GroupNormalization.*per group.*'gn'"):
        _onnx_graph(tmp_path, [node], [("x", X4)], X4,
                    [_init("s", np.ones(2)), _init("b", np.zeros(2))], opset=18)


def test_onnx_matmul_of_two_inputs_broadcasts(tmp_path):
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    graph, params = _onnx_graph(tmp_path, [node], [("a", (2, 1, 4, 6)), ("b", (3, 6, 5))],
                                (2, 3, 4, 5))
    assert (graph[0].kind, graph[0].macs) == (MM, 2 * 3 * 4 * 5 * 6)
    a, b = torch.randn(2, 1, 4, 6), torch.randn(3, 6, 5)
    torch.testing.assert_close(execute(graph, params, [a, b])[0], a @ b)


@pytest.mark.parametrize("opset", [11, 13])
def test_onnx_exports_of_softmax_on_every_axis(tmp_path, opset):
    for dim in (0, 1, 2, 3, -1):  # opset 11's exporter moves the axis last with transposes
        module = Wrap(nn.Softmax(dim)).eval()
        graph, params = _export(tmp_path, module, X4, opset)
        assert graph.count(OpKind.SOFTMAX) == 1
        _same_output(graph, params, module, X4)


@pytest.mark.parametrize(("module", "shape"), [
    (SDPA(), (2, 3, 5, 8)), (SDPA(is_causal=True), (2, 5, 8)),
    (MHA(batch_first=True), (2, 5, 8)), (MHA(), (5, 2, 8))],
    ids=["sdpa", "sdpa causal", "mha batch first", "mha sequence first"])
def test_onnx_exports_of_attention_run_like_torch(tmp_path, module, shape):
    """The exporter computes the scale and the heads' shapes from Shape at run time: those
    constants are folded and shapes inferred again."""
    graph, params = _export(tmp_path, module, shape)
    _same_output(graph, params, module.eval(), shape)
    assert graph.count(MM) == 2 and graph.count(OpKind.SOFTMAX) == 1
    assert graph.total_weights == from_torch(module, shape).total_weights
