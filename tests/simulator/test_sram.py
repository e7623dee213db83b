"""The SRAM model (simulator/sram.py) and the energy that uses it: the worked examples of
docs/hardware.md, every number derived by hand there. A failure means the code or the document
changed: update both together."""

from __future__ import annotations

import json
import math

import pytest

from simulator.cost import evaluate_plan, lbdf
from simulator.engine import simulate
from simulator.hw import HardwareConfigError, load_hw
from simulator.plan import PartitionPlan
from simulator.sram import NODES, SramError, SramRow, SramSpec, horowitz_read_pj, sram_cost

KIB = 1024


@pytest.mark.parametrize("capacity, pj_per_byte, area_mm2, leakage_mw", [
    # 10 pJ per 64-bit read / 8 B; 65,536 bits x 0.346 um^2 / 0.7; 65,536 bits x 22.09 pW
    (8 * KIB, 1.25, 0.0323935, 0.00144769),
    # 20 pJ / 8 B; 262,144 bits x 0.346 / 0.7 um^2; 262,144 x 22.09 pW
    (32 * KIB, 2.5, 0.1295740, 0.00579076),
    # 20 pJ x (256/32)^(ln 5 / ln 32) = 20 x 5^0.6 = 52.5306 pJ / 8 B; 2,097,152 bits
    (256 * KIB, 6.566320, 1.0365923, 0.04632609),
])
def test_three_sizes_at_45nm(capacity, pj_per_byte, area_mm2, leakage_mw):
    # docs/hardware.md, "Worked example: three sizes"
    cost = sram_cost(capacity, SramSpec())
    assert cost.pj_per_byte == pytest.approx(pj_per_byte, rel=1e-6)
    assert cost.area_mm2 == pytest.approx(area_mm2, rel=1e-6)
    assert cost.leakage_mw == pytest.approx(leakage_mw, rel=1e-5)


def test_horowitz_points_are_reproduced_and_energy_grows_with_capacity():
    assert [horowitz_read_pj(c) for c in (8 * KIB, 32 * KIB, 1024 * KIB)] == pytest.approx(
        [10, 20, 100])
    sizes = [2**k * KIB for k in range(2, 14)]
    energies = [sram_cost(s, SramSpec()).pj_per_byte for s in sizes]
    assert all(a < b for a, b in zip(energies, energies[1:], strict=False))


def test_banks_set_the_access_energy_not_the_area():
    # 256 KiB in 8 banks of 32 KiB: a 32 KiB bank's 2.5 pJ/B (edge-npu's figure), same area
    one, eight = sram_cost(256 * KIB, SramSpec()), sram_cost(256 * KIB, SramSpec(banks=8))
    assert eight.pj_per_byte == pytest.approx(2.5)
    assert (eight.area_mm2, eight.leakage_mw) == (one.area_mm2, one.leakage_mw)


def test_node_scales_energy_area_and_leakage():
    # 32 KiB at 22 nm: 2.5 x 0.2229 pJ/B; 262,144 bits x 0.092 um^2 / 0.7; x 66.86 pW
    cost = sram_cost(32 * KIB, SramSpec(node_nm=22))
    assert cost.pj_per_byte == pytest.approx(2.5 * 0.2229)
    assert cost.area_mm2 == pytest.approx(262144 * 0.092 / 0.7 * 1e-6)
    assert cost.leakage_mw == pytest.approx(262144 * 66.86e-9)
    assert set(NODES) == {90, 65, 45, 32, 28, 22}


def test_a_user_table_replaces_the_model_and_is_never_extrapolated():
    rows = (SramRow(32 * KIB, 0.1, 20.0, 0.01), SramRow(128 * KIB, 0.4, 40.0, 0.04))
    spec = SramSpec(banks=2, table=rows)
    cost = sram_cost(128 * KIB, spec)  # two 64 KiB banks, half way in log-log
    assert cost.area_mm2 == pytest.approx(2 * 0.2)
    assert cost.pj_per_byte == pytest.approx(20 * math.sqrt(2) / 8)
    assert cost.leakage_mw == pytest.approx(2 * 0.02)
    assert sram_cost(64 * KIB, spec).pj_per_byte == 20 / 8  # a row's own figure
    with pytest.raises(SramError, match="bank of 512 KiB .* outside the SRAM table's "
                                        "capacities 32 KiB..128 KiB"):
        sram_cost(1024 * KIB, spec)


def _yaml(tmp_path, extra: str = "", energy: str = "") -> str:
    path = tmp_path / "hw.yaml"
    path.write_text(
        "name: t\nbuffer: 8KiB\ndram_bandwidth: 8\ndram_latency: 100\nclock: 1GHz\n"
        "macs_per_cycle: 64\nbuffer_bandwidth: 64\n"
        f"energy: {{dram_pj_per_byte: 100, mac_pj: 0.5{energy}}}\n{extra}")
    return str(path)


def test_the_energy_of_a_small_plan(tmp_path):
    # docs/hardware.md, "Worked example: the energy of a small plan": docs/cost-model.md 9.1's
    # chain (x -> conv0 -> conv1, 4x8x8 int8) fused under LBDF on an 8 KiB buffer at 45 nm:
    # DRAM 808 B x 100 + buffer accesses 2,128 B x 1.25 + MACs 18,432 x 0.5
    # + leakage 65,536 bits x 22.09 pW x 1,344 cycles / 1 GHz
    from tests.simulator.cost.test_worked_examples import ALL_A, CHAIN

    hw = load_hw(_yaml(tmp_path))
    assert hw.buffer_pj_from_sram and hw.energy_buffer_pj_per_byte == 1.25
    t = lbdf.group_cost(CHAIN, ALL_A, hw).timing
    assert t.cycles == 1344
    leak = 65536 * 22.09e-12 * 1344e-9 * 1e12  # W x s -> pJ: 1.9457 pJ
    assert (t.energy_dram_pj, t.energy_buffer_pj, t.energy_mac_pj) == (80800, 2660, 9216)
    assert t.energy_leak_pj == pytest.approx(leak) and leak == pytest.approx(1.9457, abs=1e-4)
    assert t.energy_pj == pytest.approx(92677.9457, abs=1e-3)
    plan = PartitionPlan.of([ALL_A])
    cost = evaluate_plan(CHAIN, plan, hw, "lbdf")
    assert cost.totals()["energy_leak_pj"] == pytest.approx(leak)
    assert cost.area_mm2 == pytest.approx(0.0323935, rel=1e-6)
    sim = simulate(CHAIN, plan, hw, "lbdf")  # the simulator charges the same
    assert sim.energy_pj == pytest.approx(cost.energy_pj, rel=1e-12)


def test_an_explicit_buffer_energy_is_honoured(tmp_path):
    # the YAML's energy.buffer_pj_per_byte wins over the model at every capacity; 'sram' as
    # an override asks for the model's figure again
    hw = load_hw(_yaml(tmp_path, energy=", buffer_pj_per_byte: 3"), {"buffer": "1MiB"})
    assert (hw.energy_buffer_pj_per_byte, hw.buffer_pj_from_sram) == (3, False)
    assert hw.area_mm2 == pytest.approx(sram_cost(1024 * KIB, SramSpec()).area_mm2)
    back = hw.with_overrides(energy={"buffer_pj_per_byte": "sram"})
    assert back.energy_buffer_pj_per_byte == pytest.approx(12.5)  # 100 pJ / 8 B at 1 MiB
    assert load_hw("edge-npu", {"buffer": "2MiB"}).energy_buffer_pj_per_byte == \
        pytest.approx(6.566320, rel=1e-6)  # 8 banks of 256 KiB


def test_every_preset_states_its_node_and_source():
    from simulator.hw import list_presets

    for name in list_presets():
        hw = load_hw(name)
        assert hw.sram is not None and hw.sram.node_nm in NODES and hw.sram.source, name
        assert hw.area_mm2 > 0 and hw.leakage_mw > 0
        # a plan file records the hardware as JSON and applies it as overrides
        assert hw.with_overrides(**json.loads(json.dumps(hw.to_dict()))) == hw, name
        assert json.loads(json.dumps(hw.to_dict())) == hw.to_dict()  # JSON-ready


def test_sram_tables_from_csv_and_yaml_files(tmp_path):
    (tmp_path / "sram.csv").write_text(
        "# CACTI 7, 45 nm, itrs-lstp\ncapacity,area_mm2,pj_per_access,leakage_mw\n"
        "32KiB,0.1062,19.50,0.00627\n256KiB,0.983,50.9,0.0463\n")
    hw = load_hw(_yaml(tmp_path, "sram: {table: sram.csv}\n"), {"buffer": "256KiB"})
    assert hw.energy_buffer_pj_per_byte == pytest.approx(50.9 / 8)
    assert (hw.area_mm2, hw.leakage_mw) == (0.983, 0.0463)
    assert hw.sram.table_source == "sram.csv"
    (tmp_path / "sram.yaml").write_text(
        "- {capacity: 8KiB, area_mm2: 0.04, pj_per_access: 10, leakage_mw: 0.002}\n"
        "- {capacity: 1MiB, area_mm2: 4, pj_per_access: 100, leakage_mw: 0.2}\n")
    hw = load_hw(_yaml(tmp_path, "sram: {table: sram.yaml}\n"))
    assert hw.energy_buffer_pj_per_byte == 10 / 8
    assert hw.with_overrides(**hw.to_dict()) == hw  # the rows travel without the file


@pytest.mark.parametrize("extra, overrides, message", [
    ("sram: {node_nm: 7}\n", {}, "key 'sram.node_nm' = 7: must be one of 90, 65, 45, 32, 28, "
                                 "22 (nm), or give an SRAM table"),
    ("sram: {banks: 0}\n", {}, "key 'sram.banks' = 0: must be positive"),
    ("sram: {array_efficiency: 1.5}\n", {}, "must be in (0, 1]"),
    ("sram: {nodes: 45}\n", {}, "unknown key 'sram.nodes' (did you mean 'node_nm'?)"),
    ("sram: {table: missing.csv}\n", {}, "cannot read file"),
    ("", {"sram.table": [{"capacity": "8KiB", "area_mm2": 0.1, "pj_per_access": 10}]},
     "row 1: missing leakage_mw"),
    ("", {"buffer": "4MiB", "sram.table": [{"capacity": "8KiB", "area_mm2": 0.1,
                                              "pj_per_access": 10, "leakage_mw": 0}]},
     "override 'sram.table': a bank of 4 MiB"),
])
def test_bad_sram_input_is_one_line_naming_the_key(tmp_path, extra, overrides, message):
    with pytest.raises(HardwareConfigError) as err:
        load_hw(_yaml(tmp_path, extra), overrides)
    assert message in str(err.value) and "\n" not in str(err.value)
