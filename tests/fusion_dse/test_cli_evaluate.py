"""`fusion-dse evaluate`: totals, stable JSON keys, hardware overrides, bad plans and configs."""

from __future__ import annotations

import json
import re

import pytest

TOTAL_KEYS = {"scheme", "valid", "violations", "groups", "unfusable_ops", "dram_bytes",
              "dram_bytes_fuseable", "mbu_bytes", "cycles", "energy_pj", "lower_bound_bytes",
              "lower_bound_fuseable_bytes", "lbl_dram_bytes", "lbl_dram_fuseable_bytes",
              "peak_buffer_bytes",  # the whole network's largest F_beta (04a1907)
              # energy by component and the buffers' area (docs/hardware.md)
              "energy_dram_pj", "energy_buffer_pj", "energy_mac_pj", "energy_leak_pj",
              "area_mm2"}
GROUP_KEYS = {"ops", "buffer_bytes", "weight_buffer_bytes", "dram_bytes", "dram_act_read",
              "dram_weight_read", "dram_write", "macs", "cycles", "bound", "energy_pj", "fits",
              "reason", "unfusable"}
ALONE_KEYS = {"tiling", "tiles", "reread_act_bytes", "reread_weight_bytes"}  # an op on its own


def test_json_document_has_stable_keys_and_the_lbl_plan_by_default(cli):
    code, out, _ = cli("evaluate", "resnet18", "--buffer", "128KiB", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["format"] == "fusion-dse.evaluation"
    assert set(doc["totals"]) == TOTAL_KEYS
    assert all(set(g) == GROUP_KEYS | (ALONE_KEYS if g["unfusable"] else set())
               for g in doc["groups"])
    assert doc["hw"]["buffer_bytes"] == 131072
    t = doc["totals"]
    # optimize's graph stages (fuse): 49 imported ops, 32 after fusing activations
    assert t["groups"] == 32 and t["dram_bytes"] == t["lbl_dram_bytes"]
    assert t["unfusable_ops"] == len(doc["unfusable"]) > 0
    assert t["lower_bound_bytes"] < t["dram_bytes"]
    graph = doc["graph"]
    assert graph["stages"] == ["fuse"] and (graph["ops_before"], graph["ops_after"]) == (49, 32)
    assert graph["imported_lbl_dram_bytes"] > t["lbl_dram_bytes"]  # reported, named apart
    code, out, _ = cli("evaluate", "resnet18", "--buffer", "128KiB", "--format", "json",
                       "--graph-stages", "none")
    plain = json.loads(out)
    assert code == 0 and plain["totals"]["groups"] == 49 and plain["graph"]["stages"] == []
    assert plain["totals"]["lbl_dram_bytes"] == graph["imported_lbl_dram_bytes"]
    assert plain["graph"]["imported_lbl_dram_bytes"] is None


def test_a_fused_plan_lowers_dram_and_groups_over_the_buffer_are_reported(cli, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"groups": [["conv1", "relu", "maxpool"]]
                                + [[k] for k in range(3, 49)]}))
    code, out, _ = cli("evaluate", "resnet18", "--plan", str(plan), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["totals"]["valid"]
    assert doc["totals"]["dram_bytes"] < doc["totals"]["lbl_dram_bytes"]
    code, out, _ = cli("evaluate", "resnet18", "--plan", str(plan), "--buffer", "8KiB")
    assert code == 0 and "plan valid            NO: group 0 (conv1, 3 ops)" in out


def test_table_shows_totals_and_groups(cli):
    code, out, _ = cli("evaluate", "mobilenet_v2", "--scheme", "brr", "--hw", "eyeriss")
    assert code == 0
    assert "scheme brr" in out and "lower bound" in out and "F_beta" in out
    assert "eyeriss" in out


def test_set_overrides_any_hardware_key(cli):
    code, out, _ = cli("evaluate", "squeezenet1_1", "--set", "energy.mac_pj=0",
                       "--set", "energy.dram_pj_per_byte=0", "--set", "energy.buffer_pj_per_byte=0",
                       "--set", "sram.leakage_pw_per_bit=0", "--format", "json")
    assert code == 0 and json.loads(out)["totals"]["energy_pj"] == 0


@pytest.mark.parametrize("groups, message", [
    ([["conv1", "nope"]], "unknown op 'nope'"),
    ([["conv1", "relu"], ["relu", "maxpool"]], "is in group 0 and group 1"),
    ([["conv1", "relu"]], r"op\(s\) in no group"),
])
def test_bad_plans_are_refused_with_the_reason(cli, tmp_path, groups, message):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"groups": groups}))
    code, _, err = cli("evaluate", "resnet18", "--plan", str(plan))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert re.search(message, err), err


def test_a_plan_whose_groups_form_a_cycle_is_refused(cli, tmp_path):
    # layer1.0: conv1 -> bn/relu -> conv2 -> add(conv2, maxpool output) -> relu
    doc = json.loads(cli("inspect", "resnet18", "--format", "json")[1])
    names = [op["name"] for op in doc["ops"]]
    add = next(k for k, op in enumerate(doc["ops"]) if op["kind"] == "eltwise_binary")
    first = [names[3], names[add]]  # maxpool and the add: re-entered through the conv branch
    rest = [[n] for k, n in enumerate(names) if n not in first]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"groups": [first, *rest]}))
    code, _, err = cli("evaluate", "resnet18", "--plan", str(plan))
    assert code == 2 and ("cycle" in err or "not connected" in err)


@pytest.mark.parametrize("argv, message", [
    (["--buffer", "12XB"], "override 'buffer' = '12XB'"),
    (["--buffer", "-4KiB"], "buffer"),
    (["--hw", "edge-npx"], "edge-npu"),
    (["--set", "bufer=1MiB"], "bufer"),
    (["--set", "novalue"], "expected KEY=VALUE"),
    (["--scheme", "xyz"], "invalid choice"),
])
def test_bad_hardware_input_is_one_line_with_status_2(cli, argv, message):
    code, _, err = cli("evaluate", "squeezenet1_1", *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert message in err, err


def test_bad_hardware_file_names_file_key_and_value(cli, tmp_path):
    bad = tmp_path / "npu.yaml"
    bad.write_text("name: x\nbuffer: 256KiB\ndram_bandwith: 16\n")
    code, _, err = cli("evaluate", "squeezenet1_1", "--hw", str(bad))
    assert code == 2 and "npu.yaml" in err and "dram_bandwith" in err
