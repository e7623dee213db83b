"""The zoo's transformers: ViT-B/16 and DeiT-S equal torchvision's VisionTransformer imported
through `from_torch` op for op, BERT-base's encoder equals a stack of post-norm
``nn.TransformerEncoderLayer``; each runs in the IR executor to the reference module's output;
sequence length and resolution through ``name@...``."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from simulator.workload.errors import InputShapeError
from simulator.workload.execute import execute
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.loader import load
from simulator.workload.torch_import import from_torch, from_torch_with_params
from simulator.workload.zoo.bert import BertEncoder, load_encoder_layer
from simulator.workload.zoo.vit import VisionTransformer, load_torchvision_vit
from tests.simulator.workload.conftest import torchvision_or_skip

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY_VIT = (32, 8, 2, 2, 16, 32)  # image, patch, layers, heads, width, MLP


def op_differences(a: ComputeGraph, b: ComputeGraph) -> list[str]:
    """Where two graphs differ in anything but op names: every op field (kind, op_type,
    inputs, shapes, windows, weights, MACs, mapping, attrs), the inputs and the outputs."""
    if (a.input_shapes, a.outputs, len(a)) != (b.input_shapes, b.outputs, len(b)):
        return [f"inputs {a.input_shapes} / {b.input_shapes}, outputs {a.outputs} / "
                f"{b.outputs}, {len(a)} / {len(b)} ops"]
    return [f"op {x.id}: {x} != {y}" for x, y in zip(a, b, strict=True)
            if dataclasses.replace(x, name="") != dataclasses.replace(y, name="")][:3]


def _nontrivial(module: nn.Module) -> nn.Module:
    """`module` in eval mode with every parameter redrawn, so that a norm without its affine,
    a zero head or a swapped projection would show in the output."""
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.rand(p.shape, generator=g) * 0.4 - 0.2)
    return module.eval()


def _close(y: torch.Tensor, ref: torch.Tensor) -> bool:
    return y.shape == ref.shape and float((y - ref).abs().max()) <= 1e-4 * float(
        ref.abs().max())


def _runs_like(graph, params, module: nn.Module, x: torch.Tensor) -> None:
    with torch.no_grad():
        ref = module(x)
    (y,) = execute(graph, params, x)
    assert _close(y, ref)


def test_tiny_zoo_vit_is_torchvisions_op_for_op_and_computes_the_same():
    tv = torchvision_or_skip()
    tv_module = _nontrivial(tv.models.VisionTransformer(*TINY_VIT, num_classes=10))
    zoo_module = load_torchvision_vit(VisionTransformer(*TINY_VIT, num_classes=10),
                                      tv_module).eval()
    for shape in ((1, 3, 32, 32), (2, 3, 32, 32)):
        assert op_differences(from_torch(zoo_module, shape), from_torch(tv_module, shape)) == []
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    graph, params = from_torch_with_params(zoo_module, x.shape)
    _runs_like(graph, params, tv_module, x)  # the zoo graph and weights: torchvision's output


def test_a_graph_with_other_op_fields_differs():
    """The comparison sees a changed head and an op of another kind, not just counts."""
    a = from_torch(VisionTransformer(*TINY_VIT, num_classes=10), (1, 3, 32, 32))
    assert op_differences(a, from_torch(VisionTransformer(*TINY_VIT, num_classes=11),
                                        (1, 3, 32, 32)))
    ops = list(a.ops)
    ops[5] = dataclasses.replace(ops[5], op_type="rmsnorm")
    assert op_differences(a, dataclasses.replace(a, ops=tuple(ops)))


def _reference_encoder(layers: int, hidden: int, heads: int, intermediate: int) -> nn.Module:
    """BERT by hand: the embedding LayerNorm and post-norm nn.TransformerEncoderLayer's."""

    class Reference(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.Sequential(*(
                nn.TransformerEncoderLayer(hidden, heads, intermediate, activation="gelu",
                                           batch_first=True, norm_first=False,
                                           layer_norm_eps=1e-12)
                for _ in range(layers)))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layers(self.embedding_norm(x))

    return Reference().eval()


def _zoo_bert_like(reference: nn.Module, *config: int) -> BertEncoder:
    zoo = BertEncoder(*config)
    with torch.no_grad():
        zoo.embedding_norm.weight.copy_(reference.embedding_norm.weight)
        zoo.embedding_norm.bias.copy_(reference.embedding_norm.bias)
    for mine, theirs in zip(zoo.layers, reference.layers, strict=True):
        load_encoder_layer(mine, theirs)
    return zoo.eval()


def test_tiny_zoo_bert_is_a_post_norm_transformer_encoder_op_for_op():
    config = (2, 16, 2, 32)
    reference = _nontrivial(_reference_encoder(*config))
    zoo = _zoo_bert_like(reference, *config)
    shape = (2, 7, 16)
    ref_graph, ref_params = from_torch_with_params(reference, shape)
    zoo_graph, zoo_params = from_torch_with_params(zoo, shape)
    assert op_differences(zoo_graph, ref_graph) == []
    # per layer: Q, K, V, output and two feed-forward linears, QK^T and PV, one softmax,
    # two LayerNorms; the embedding LayerNorm
    assert {k: zoo_graph.count(k) for k in (OpKind.LINEAR, OpKind.MATMUL, OpKind.SOFTMAX,
                                            OpKind.NORM)} == {
        OpKind.LINEAR: 12, OpKind.MATMUL: 4, OpKind.SOFTMAX: 2, OpKind.NORM: 5}
    assert {op.attr("eps") for op in zoo_graph if op.kind is OpKind.NORM} == {1e-12}
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    _runs_like(ref_graph, ref_params, reference, x)
    _runs_like(zoo_graph, zoo_params, reference, x)  # the zoo's graph: the encoder's output


class _PreNormCausal(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.triu(torch.full((5, 5), float("-inf")), 1)
        return self.layer(x, src_mask=mask)


def test_a_pre_norm_encoder_layer_with_a_mask_imports_and_the_fast_path_setting_is_kept():
    module = _nontrivial(_PreNormCausal())
    before = torch.backends.mha.get_fastpath_enabled()
    graph, params = from_torch_with_params(module, (2, 5, 16))
    assert torch.backends.mha.get_fastpath_enabled() == before
    assert graph.count(OpKind.NORM) == 2 and graph.count(OpKind.MATMUL) == 2
    mask_add = next(op for op in graph if op.name.endswith("/mask_add"))
    assert mask_add.weight_elems == 25  # the additive mask: a constant operand
    _runs_like(graph, params, module, torch.randn(2, 5, 16))


def test_bert_takes_a_sequence_length_after_the_at_sign():
    graph = load("bert_base@48")
    assert graph.input_shapes == ((1, 48, 768),) and graph.name == "bert_base"
    assert graph.total_weights == 85_056_000
    scores = next(op for op in graph if op.kind is OpKind.MATMUL)
    assert scores.output_shape == (1, 12, 48, 48) and scores.macs == 48 * 48 * 768
    # per layer 4 d x d and 2 d x 4d linears: 12 d^2 L, and 2 L^2 d for the two products
    assert graph.total_macs == 12 * (12 * 768 ** 2 * 48 + 2 * 48 ** 2 * 768)
    with pytest.raises(InputShapeError, match=r"bert_base@\.\.\. takes one sequence length, "
                                              r"not 48x2$"):
        load("bert_base@48x2")


def test_a_vision_transformer_is_built_for_its_resolution():
    graph = load("deit_s@256x192")
    cat = next(op for op in graph if op.kind is OpKind.CONCAT)
    assert cat.output_shape == (1, 16 * 12 + 1, 384)
    position = graph[cat.id + 1]  # the position embedding: one learned vector per token
    assert position.op_type == "add" and position.weight_elems == (16 * 12 + 1) * 384
    with pytest.raises(InputShapeError, match="does not fit model 'deit_s': image size 8x8 is "
                                              r"smaller than a patch \(16\)$"):
        load("deit_s@8")


@pytest.mark.slow
@pytest.mark.parametrize("name, config", [("vit_b_16", None),
                                          ("deit_s", (224, 16, 12, 6, 384, 1536))])
def test_zoo_vit_equals_torchvision_vit_op_for_op(name, config):
    tv = torchvision_or_skip()
    torch.manual_seed(0)
    module = tv.models.vit_b_16() if config is None else tv.models.VisionTransformer(*config)
    shape = (1, 3, 224, 224)
    zoo = load(name)
    assert op_differences(zoo, from_torch(module, shape)) == []
    assert zoo.total_weights == sum(p.numel() for p in module.parameters())


@pytest.mark.slow
def test_zoo_figures_match_the_published_ones():
    """torchvision's ViT-B/16 17.56 GFLOPS and DeiT-S's 4.6 GFLOPs (as MACs); BERT-base at
    128 tokens: 12 layers x (12 d^2 L + 2 L^2 d)."""
    assert round(load("vit_b_16").total_macs / 1e9, 2) == 17.56
    assert round(load("deit_s").total_macs / 1e9, 1) == 4.6
    assert load("bert_base").total_macs == 12 * (12 * 768 ** 2 * 128 + 2 * 128 ** 2 * 768)


@pytest.mark.slow
def test_bert_base_is_twelve_transformer_encoder_layers_op_for_op():
    config = (12, 768, 12, 3072)
    reference = _reference_encoder(*config)
    assert op_differences(load("bert_base"), from_torch(reference, (1, 128, 768))) == []
