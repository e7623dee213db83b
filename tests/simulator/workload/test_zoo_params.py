"""Tests of the model zoo: exact torchvision parameter counts and forward shapes."""

from __future__ import annotations

import pytest
import torch

from simulator.workload.zoo import ZOO, get_entry, zoo_names

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
}

#: Models whose forward pass is too expensive for the default test run.
SLOW_FORWARD = {
    "vgg16",
    "resnet101",
    "resnet152",
    "efficientnet_b3",
    "deeplabv3_mobilenet_v3_large",
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
        out = model(torch.randn(entry.input_shape))
    if entry.family == "deeplab":
        expected = (entry.input_shape[0], 21, *entry.input_shape[2:])
    else:
        expected = (entry.input_shape[0], 1000)
    assert tuple(out.shape) == expected
    assert torch.isfinite(out).all()
