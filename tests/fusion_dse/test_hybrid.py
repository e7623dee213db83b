"""`--scheme hybrid` end to end: optimize writes each group's dataflow, evaluate and simulate
run the mixed plan, compare's table names the hybrid and its groups per dataflow, and what a
hybrid cannot do is refused with one line."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def hybrid_plan(tmp_path_factory):
    """plan.json of ``optimize resnet18 --scheme hybrid --buffer 64KiB`` (LBDF, BRR and layer
    by layer groups)."""
    from fusion_dse.cli import main

    out = tmp_path_factory.mktemp("hybrid") / "run"
    assert main(["optimize", "resnet18", "--scheme", "hybrid", "--buffer", "64KiB",
                 "--budget", "20", "--out", str(out)]) == 0
    return out / "plan.json"


def test_optimize_records_each_groups_dataflow(hybrid_plan):
    doc = json.loads(hybrid_plan.read_text())
    assert doc["scheme"] == "hybrid"
    used = [g["dataflow"] for g in doc["groups"]]
    assert {"lbdf", "brr", "lbl"} <= set(used)
    counts = doc["totals"]["groups_by_dataflow"]
    assert counts == {s: used.count(s) for s in ("lbdf", "brr", "lbl")}


def test_evaluate_and_simulate_run_the_mixed_plan(cli, hybrid_plan):
    code, out, _ = cli("evaluate", "resnet18", "--plan", str(hybrid_plan), "--format", "json")
    doc = json.loads(out)
    plan = json.loads(hybrid_plan.read_text())
    assert code == 0 and doc["totals"]["scheme"] == "hybrid" and doc["totals"]["valid"]
    assert doc["totals"]["dram_bytes"] == plan["totals"]["dram_bytes"]
    assert [g["dataflow"] for g in doc["groups"]] == [g["dataflow"] for g in plan["groups"]]
    code, out, _ = cli("evaluate", "resnet18", "--plan", str(hybrid_plan))
    assert code == 0 and "groups per dataflow   lbdf" in out
    code, out, _ = cli("simulate", "resnet18", "--plan", str(hybrid_plan), "--format", "json")
    sim = json.loads(out)
    assert code == 0
    assert sim["totals"]["dram_bytes"] == plan["totals"]["dram_bytes"]
    assert sim["totals"]["peak_buffer_bytes"] == plan["totals"]["peak_buffer_bytes"] <= 65536


def test_a_plain_plan_names_no_dataflow(cli, tmp_path):
    out = tmp_path / "run"
    assert cli("optimize", "resnet18", "--buffer", "64KiB", "--budget", "5", "--out",
               str(out))[0] == 0
    doc = json.loads((out / "plan.json").read_text())
    assert "groups_by_dataflow" not in doc["totals"]
    assert all("dataflow" not in g for g in doc["groups"])


@pytest.mark.parametrize("argv, message", [
    (("--objectives", "dram,mbu"), "scheme 'hybrid' gives each group its least-DRAM dataflow"),
    (("--repair", "gnne"), "repair 'gnne' does not support scheme 'hybrid'"),
])
def test_what_a_hybrid_cannot_do_is_one_line(cli, tmp_path, argv, message):
    code, _, err = cli("optimize", "resnet18", "--scheme", "hybrid", "--budget", "5",
                       "--out", str(tmp_path / "o"), *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_sweep_refuses_a_hybrid_with_two_objectives(cli, tmp_path):
    code, _, err = cli("sweep", "--models", "resnet18", "--schemes", "lbdf,hybrid",
                       "--objectives", "dram,cycles", "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and "scheme 'hybrid' gives each group" in err
    assert not (tmp_path / "s.sqlite").exists()


def test_compare_table_names_the_hybrid_and_its_groups_per_dataflow():
    import pandas as pd

    from fusion_dse.sweep.cli import compare_table

    counts = {"lbdf": 3, "brr": 1, "lbl": 0}
    frame = pd.DataFrame({
        "status": ["done"] * 2, "model": ["m"] * 2, "hw_name": ["edge-npu"] * 2,
        "buffer_bytes": [65536] * 2, "scheme": ["lbdf", "hybrid"],
        "dram_bytes": [200, 150], "mbu_bytes": [10, 20], "cycles": [5, 6],
        "energy_pj": [1.0, 2.0],
        "plan": [json.dumps({"totals": {}}), json.dumps({"totals": {"groups_by_dataflow":
                                                                    counts}})],
    })
    table = compare_table(frame)
    hybrid = next(line for line in table.splitlines() if "HYBRID" in line)
    assert "*" in hybrid and "lbdf 3 (75%), brr 1 (25%), lbl 0 (0%)" in hybrid
    assert "groups per dataflow" in table
