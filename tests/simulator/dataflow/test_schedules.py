"""What a group's cost carries is what the simulator replays: BRR's configuration rebuilt from
the cost equals the search's, an op on its own carries its tiling."""

from __future__ import annotations

import pytest

from simulator.cost import CostCache
from simulator.cost.brr import chosen_tiling
from simulator.cost.lbl import LayerTiling, layer_tiling
from simulator.dataflow.brr import replayed_tiling
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo


@pytest.mark.parametrize("buffer", ["32KiB", "256KiB", "2MiB"])
def test_brr_replays_the_configuration_its_cost_chose(buffer):
    graph = load_zoo("squeezenet1_1")
    hw = load_hw("edge-npu", {"buffer": buffer})
    cache = CostCache(graph, hw, "brr")
    n = len(graph)
    groups = [tuple(range(a, min(a + k, n))) for k in (1, 2, 4, 7) for a in range(0, n, k)]
    checked = 0
    for ops in groups:
        if not graph.is_weakly_connected(ops):
            continue
        cost = cache.group(ops)
        searched = chosen_tiling(graph, ops, hw)
        if searched is None:
            continue
        assert replayed_tiling(graph, cost, hw) == searched, ops
        checked += 1
    assert checked > 20


def test_an_op_on_its_own_carries_its_tiling():
    graph = load_zoo("resnet18")
    hw = load_hw("edge-npu", {"buffer": "32KiB"})
    cache = CostCache(graph, hw, "lbl")
    for o in range(len(graph)):
        cost = cache.group((o,))
        assert isinstance(cost.schedule, LayerTiling)
        assert cost.schedule == layer_tiling(graph, o, hw)
