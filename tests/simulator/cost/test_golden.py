"""Golden per-network figures of the cost models (golden_costs.json, made by golden.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from simulator.workload.zoo import CNN, zoo_names

HERE = Path(__file__).parent
FAST = ("resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0")


def _golden_module():
    spec = importlib.util.spec_from_file_location("golden", HERE / "golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in FAST else pytest.mark.slow)
                                  for n in zoo_names(CNN)])
def test_cost_figures_match_the_golden_file(name):
    golden = json.loads((HERE / "golden_costs.json").read_text())
    assert _golden_module().figures(name) == golden[name]
