"""Smoke test of experiments/paper_tables.py on one setup with a tiny budget."""

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
    assert set(table["method"]) == {"rs", "ls", "nsga2", "greedy", "segment_dp", "lbl",
                                    "lower_bound"}
    assert (table["budget"] == 20).all()
    text = pt.markdown(table, "dram_bytes_fuseable")
    assert text.count("\n") == 2 and "| resnet18 | LBDF | 128 KiB | 20 |" in text
    assert len(pt.SETUPS) == 12
