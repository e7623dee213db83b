"""Smoke test of experiments/paper_tables.py on one setup with a tiny budget, the optimum
column and the gaps to it included."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "paper_tables.py"


def load_script():
    spec = importlib.util.spec_from_file_location("paper_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_one_setup_runs_and_renders():
    pt = load_script()
    rows = pt.run_setup(pt.Setup("resnet18", "lbdf", 128, 2000), seeds=1, budget_scale=0.01)
    table = pd.DataFrame(rows)
    assert set(table["method"]) == {"rs", "ls", "nsga2", "optimum", "greedy", "segment_dp",
                                    "lbl", "lower_bound"}
    assert (table["budget"] == 20).all()
    text = pt.markdown(table, "dram_bytes_fuseable")
    assert text.count("\n") == 2 and "| resnet18 | LBDF | 128 KiB | 20 |" in text
    assert "| optimum |" in text.splitlines()[0]
    opt = table[table["method"] == "optimum"].iloc[0]
    assert bool(opt["optimal"])
    plans = table[~table["method"].isin(["optimum", "lower_bound"])]
    assert (plans["dram_bytes"] >= opt["dram_bytes"]).all()
    gaps = pt.gap_markdown(table, "dram_bytes_fuseable")
    row = gaps.splitlines()[2]
    assert row.startswith("| resnet18 | LBDF | 128 KiB | 20 |")
    assert all(float(c.strip().rstrip("%")) >= 0 for c in row.split("|")[5:-1])
    assert len(pt.SETUPS) == 12


def test_get_tables_gap_closed_is_the_share_of_the_random_repairs_gap():
    spec = importlib.util.spec_from_file_location(
        "get_tables", SCRIPT.with_name("get_tables.py"))
    gt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gt)
    base = {"network": "n", "scheme": "lbdf", "buffer": "128KiB", "search": "ls",
            "budget": 20, "optimum_fuseable_mb": 2.0, "optimum_proven": True}
    rows = [{**base, "seed": 0, "repair": "random", "dram_fuseable_mb": 4.0},
            {**base, "seed": 0, "repair": "rg", "dram_fuseable_mb": 3.0},
            {**base, "seed": 1, "repair": "random", "dram_fuseable_mb": 3.0},
            {**base, "seed": 1, "repair": "rg", "dram_fuseable_mb": 2.0},
            {**base, "seed": 2, "repair": "random", "dram_fuseable_mb": 2.0},
            {**base, "seed": 2, "repair": "rg", "dram_fuseable_mb": 2.0}]
    (row,) = gt.gap_closed(pd.DataFrame(rows)).to_dict("records")
    assert row["repair"] == "rg" and row["seeds"] == 3 and row["seeds_without_gap"] == 1
    assert row["gap_closed"] == 0.75  # mean of 1/2 and 1/1; seed 2 had no gap
    assert gt.gap_closed(pd.DataFrame(rows).drop(columns=["optimum_fuseable_mb"])).empty
