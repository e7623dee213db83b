"""Split buffers priced by the SRAM model: each buffer's accesses at its own pJ per byte.

The chain of docs/cost-model.md section 9.1 (x -> conv0 -> conv1, 3x3 convs of 4 channels,
148 weights each, int8, 256-element maps) fused under LBDF moves 808 B of DRAM and touches the
buffer 2,128 times a byte: 1,320 first-order accesses of its ops (each reads its 256-element
input and 148 weights and writes its 256-element output: 2 x 660) and the 808 DRAM bytes
passing through it. Of those, 592 B are weights: each conv reads its 148 weights once
(296 B) after they arrive from DRAM (296 B). On edge-npu (45 nm, 8 banks) split
8 KiB / 32 KiB the banks are 1 KiB and 4 KiB:
Horowitz's 64-bit read is 10 pJ at 8 KB with 20 pJ at 32 KB, a log-log slope of 1/2 that the
model continues below 8 KB, so 10 x (1/8)^(1/2) = 3.5355 pJ and 10 x (1/2)^(1/2) = 7.0711 pJ
a word: 0.44194 and 0.88388 pJ/B. The buffer energy is 592 x 0.44194 + 1,536 x 0.88388 =
1,619.3 pJ, not the 2,128 x 0.79550 = 1,692.8 pJ of the capacity-weighted mean.
"""

from __future__ import annotations

import math

import pytest

from simulator.cost import evaluate_plan, lbdf
from simulator.engine import simulate
from simulator.hw import load_hw
from simulator.plan import PartitionPlan
from tests.simulator.cost.test_tiled_layers import chain_graph

PJ_W = 10 * math.sqrt(1 / 8) / 8  # a 1 KiB bank
PJ_A = 10 * math.sqrt(1 / 2) / 8  # a 4 KiB bank


def _split():
    return load_hw("edge-npu", {"weight_buffer": "8KiB", "activation_buffer": "32KiB"})


def test_each_buffer_prices_its_own_accesses():
    hw = _split()
    assert dict((r, c.pj_per_byte) for r, c in hw.memories) == pytest.approx(
        {"weights": PJ_W, "activations": PJ_A})
    cost = lbdf.group_cost(chain_graph(), (0, 1), hw)
    assert cost.fits and cost.dram_bytes == 808
    assert cost.timing.energy_buffer_pj == pytest.approx(592 * PJ_W + 1536 * PJ_A)
    assert cost.timing.energy_buffer_pj == pytest.approx(1619.3, abs=0.1)
    mean = (8 * PJ_W + 32 * PJ_A) / 40
    assert hw.energy_buffer_pj_per_byte == pytest.approx(mean)  # what reports show
    assert 2128 * mean == pytest.approx(1692.8, abs=0.1)


@pytest.mark.parametrize("scheme", ["lbdf", "brr", "lbl"])
def test_the_simulator_charges_the_same(scheme):
    hw, g = _split(), chain_graph()
    plan = PartitionPlan.of([(0,), (1,)] if scheme == "lbl" else [(0, 1)])
    cost = evaluate_plan(g, plan, hw, scheme)
    report = simulate(g, plan, hw, scheme, record=False)
    assert report.dram_bytes == cost.dram_bytes
    assert report.energy_buffer_pj == pytest.approx(cost.energy_parts[1], rel=1e-12)


def test_a_shared_buffer_is_priced_as_before():
    shared = load_hw("edge-npu", {"buffer": "40KiB"})
    cost = lbdf.group_cost(chain_graph(), (0, 1), shared)
    assert cost.timing.energy_buffer_pj == 2128 * shared.energy_buffer_pj_per_byte
