"""Tests of the model zoo: exact torchvision parameter counts, forward shapes and kinds."""

from __future__ import annotations

import pytest
import torch

from simulator.workload.zoo import CNN, DECODER, TRANSFORMER, ZOO, get_entry, zoo_names

#: Parameter counts of the corresponding torchvision models.
EXPECTED_PARAMS: dict[str, int] = {
    "vgg16": 138_357_544,
    "squeezenet1_0": 1_248_424,
    "squeezenet1_1": 1_235_496,
    "mobilenet_v2": 3_504_872,
    "mobilenet_v3_small": 2_542_856,
    "mobilenet_v3_large": 5_483_032,
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "resnet101": 44_549_160,
    "resnet152": 60_192_808,
    "efficientnet_b0": 5_288_548,
    "efficientnet_b3": 12_233_232,
    "deeplabv3_mobilenet_v3_large": 11_025_477,
    "vit_b_16": 86_567_656,  # torchvision's vit_b_16
    "deit_s": 22_050_664,  # timm's deit_small_patch16_224
    "bert_base": 85_056_000,  # BERT-base's 109,482,240 less embedding tables and pooler
    "llama_tiny_prefill": 3_482_880,  # the zoo's own Llama-style decoder (2 layers, width 256)
    "llama_tiny_decode": 3_482_880,  # the same network, decode phase
}

#: Models whose forward pass is too expensive for the default test run.
SLOW_FORWARD = {
    "vgg16",
    "resnet101",
    "resnet152",
    "efficientnet_b3",
    "deeplabv3_mobilenet_v3_large",
    "vit_b_16",
    "bert_base",
}


def _forward_params() -> list[object]:
    """Returns the forward-test parameters, marking the expensive ones slow."""
    return [
        pytest.param(name, marks=pytest.mark.slow) if name in SLOW_FORWARD else name
        for name in EXPECTED_PARAMS
    ]


def test_registry_names() -> None:
    assert set(zoo_names()) == set(EXPECTED_PARAMS)
    assert list(ZOO) == zoo_names()
    for name, entry in ZOO.items():
        assert entry.name == name
        assert get_entry(name.upper()) is entry
    assert ZOO["efficientnet_b3"].input_shape == (1, 3, 300, 300)
    assert ZOO["deeplabv3_mobilenet_v3_large"].input_shape == (1, 3, 513, 513)
    assert ZOO["resnet50"].input_shape == (1, 3, 224, 224)
    assert ZOO["bert_base"].input_shape == (1, 128, 768)


def test_kinds_keep_the_cnn_zoo_apart() -> None:
    """The paper's experiments, the GNN datasets and the benchmarks take the CNN zoo."""
    assert zoo_names(CNN) == list(EXPECTED_PARAMS)[:13]
    assert zoo_names(TRANSFORMER) == ["vit_b_16", "deit_s", "bert_base"]
    assert zoo_names(DECODER) == ["llama_tiny_prefill", "llama_tiny_decode"]
    assert zoo_names() == zoo_names(CNN) + zoo_names(TRANSFORMER) + zoo_names(DECODER)
    assert {ZOO[n].family for n in zoo_names(TRANSFORMER)} == {"vit", "bert"}
    with pytest.raises(ValueError, match="unknown zoo kind 'rnn'"):
        zoo_names("rnn")


def test_resolution_sets_the_image_size_or_the_sequence_length() -> None:
    assert ZOO["resnet50"].shape_at((320,)) == (1, 3, 320, 320)
    assert ZOO["resnet50"].shape_at((320, 240), (2, 3, 224, 224)) == (2, 3, 320, 240)
    assert ZOO["bert_base"].shape_at((512,)) == (1, 512, 768)
    with pytest.raises(ValueError, match="bert_base@... takes one sequence length, not 512x64"):
        ZOO["bert_base"].shape_at((512, 64))
    # ViT's position embedding has one entry per patch: the model is built for its size
    vit = ZOO["deit_s"].build((1, 3, 384, 320))
    assert tuple(vit.encoder.pos_embedding.shape) == (1, 24 * 20 + 1, 384)
    assert tuple(ZOO["deit_s"].build().encoder.pos_embedding.shape) == (1, 197, 384)
    # a decoder's prompt length L (prefill) or KV-cache context C (decode)
    assert ZOO["llama_tiny_prefill"].shape_at((512,)) == (1, 512)
    assert ZOO["llama_tiny_decode"].shape_at((2048,)) == (1, 1, 2048)


def test_unknown_name_raises() -> None:
    with pytest.raises(KeyError):
        get_entry("alexnet")


@pytest.mark.parametrize("name", list(EXPECTED_PARAMS))
def test_param_count(name: str) -> None:
    model = get_entry(name).factory()
    assert sum(p.numel() for p in model.parameters()) == EXPECTED_PARAMS[name]


@pytest.mark.parametrize("name", _forward_params())
def test_forward_shape(name: str) -> None:
    entry = get_entry(name)
    torch.manual_seed(0)
    model = entry.factory().eval()
    with torch.no_grad():
        if entry.examples is not None:  # token ids (and a KV cache): logits, then K, V
            out, *cache = model(*entry.examples(entry.input_shape))
            new_tokens = 128 if entry.name.endswith("prefill") else 1
            assert [tuple(t.shape) for t in cache] == [(1, 2, new_tokens, 32)] * 4
        else:
            out = model(torch.randn(entry.input_shape))
    if entry.family == "deeplab":
        expected = (entry.input_shape[0], 21, *entry.input_shape[2:])
    elif entry.family == "llama":  # the last token's logits
        expected = (1, 4096)
    elif entry.family == "bert":
        expected = entry.input_shape
    else:
        expected = (entry.input_shape[0], 1000)
    assert tuple(out.shape) == expected
    assert torch.isfinite(out).all()
