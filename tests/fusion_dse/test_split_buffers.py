"""Split buffers end to end (`hwconfigs/nvdla-split.yaml`: 64 KiB weights, 64 KiB data):
optimize, evaluate, simulate, compare and a sweep over the split capacities run, the
simulator reports each buffer's peak within its capacity, ``--weight-buffer`` and
``--activation-buffer`` override them, and ``--buffer`` scales both in proportion."""

from __future__ import annotations

import json
import sqlite3

import pytest

SHAPE = ("--input-shape", "1,3,96,96")
HW = ("--hw", "nvdla-split")


@pytest.fixture(scope="module")
def split_plan(tmp_path_factory):
    from fusion_dse.cli import main

    out = tmp_path_factory.mktemp("split") / "run"
    assert main(["optimize", "squeezenet1_1", *SHAPE, *HW, "--scheme", "hybrid", "--budget",
                 "5", "--out", str(out)]) == 0
    return out / "plan.json"


def test_optimize_records_the_split_buffers(split_plan):
    doc = json.loads(split_plan.read_text())
    hw = doc["hardware"]
    assert (hw["weight_buffer_bytes"], hw["activation_buffer_bytes"]) == (65536, 65536)
    assert doc["buffer_bytes"] == 131072


def test_evaluate_and_simulate_check_each_buffer(cli, split_plan):
    code, out, _ = cli("evaluate", "squeezenet1_1", *SHAPE, *HW, "--plan", str(split_plan))
    assert code == 0 and "(buffers 65,536 B weights + 65,536 B activations" in out
    code, out, _ = cli("simulate", "squeezenet1_1", *SHAPE, *HW, "--plan", str(split_plan),
                       "--format", "json")
    sim = json.loads(out)
    plan = json.loads(split_plan.read_text())
    assert code == 0 and sim["totals"]["dram_bytes"] == plan["totals"]["dram_bytes"]
    peaks = [g["peak_by_buffer"] for g in sim["groups"]]
    assert all(p["weights"] <= 65536 and p["activations"] <= 65536 for p in peaks)
    assert max(p["weights"] for p in peaks) > 0 and max(p["activations"] for p in peaks) > 0
    code, out, _ = cli("simulate", "squeezenet1_1", *SHAPE, *HW, "--plan", str(split_plan))
    assert code == 0 and "peak per buffer       weights " in out


def test_a_plan_carries_its_split_buffers(cli, split_plan):
    code, out, _ = cli("evaluate", "squeezenet1_1", *SHAPE, "--plan", str(split_plan))
    assert code == 0 and "on nvdla-split (buffers 65,536 B weights + 65,536 B activations" in out
    code, out, err = cli("evaluate", "squeezenet1_1", *SHAPE, "--hw", "nvdla-small", "--plan",
                         str(split_plan))
    assert code == 0 and "on nvdla-small (buffer 131,072 B" in out
    assert "the plan's buffers do not apply to nvdla-small's shared buffer" in err


def test_overrides_of_the_split_capacities(cli):
    code, out, _ = cli("evaluate", "squeezenet1_1", *SHAPE, *HW, "--weight-buffer", "16KiB",
                       "--format", "json")
    assert code == 0
    hw = json.loads(out)["hw"]
    assert (hw["weight_buffer_bytes"], hw["activation_buffer_bytes"], hw["buffer_bytes"]) == \
        (16384, 65536, 81920)
    code, out, _ = cli("evaluate", "squeezenet1_1", *SHAPE, *HW, "--buffer", "256KiB",
                       "--format", "json")
    hw = json.loads(out)["hw"]
    assert code == 0 and (hw["weight_buffer_bytes"], hw["activation_buffer_bytes"]) == \
        (131072, 131072)
    code, out, _ = cli("evaluate", "squeezenet1_1", *SHAPE, "--weight-buffer", "32KiB",
                       "--activation-buffer", "96KiB", "--format", "json")
    assert code == 0 and json.loads(out)["hw"]["buffer_bytes"] == 131072


def test_compare_and_a_sweep_over_the_split_capacities(cli, tmp_path):
    code, out, _ = cli("compare", "squeezenet1_1", *HW, "--buffers", "128KiB", "--schemes",
                       "lbdf", "--workers", "1", "--store", str(tmp_path / "c.sqlite"),
                       "--out", str(tmp_path / "c.png"), "--quiet")
    assert code == 0 and "nvdla-split" in out and (tmp_path / "c.png").exists()
    store = tmp_path / "s.sqlite"
    code, out, _ = cli("sweep", "--models", "squeezenet1_1", *SHAPE, "--hw", "nvdla-split",
                       "--axis", "weight_buffer=16KiB,64KiB", "--axis",
                       "activation_buffer=32KiB,64KiB", "--workers", "1", "--store",
                       str(store), "--quiet")
    assert code == 0 and "4 done, 0 failed" in out
    assert "16 KiB + 64 KiB" in out and "64 KiB + 32 KiB" in out  # equal totals kept apart
    with sqlite3.connect(store) as db:
        totals = sorted(b for (b,) in db.execute("SELECT buffer_bytes FROM points"))
    assert totals == [48 * 1024, 80 * 1024, 96 * 1024, 128 * 1024]
