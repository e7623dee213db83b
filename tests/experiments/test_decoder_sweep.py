"""experiments/decoder_sweep.py: its points, one real point solved (the small decode step), and
the table and figure rendered from a store, every number read back."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "decoder_sweep.py"


@pytest.fixture(scope="module")
def sweep():
    spec = importlib.util.spec_from_file_location("decoder_sweep", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["decoder_sweep"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("decoder_sweep", None)


def test_the_points_cover_both_phases_buffers_and_dataflows(sweep):
    points = sweep.points()
    assert len(points) == 2 * 3 * 2 * 3 == len(set(points))
    assert {p[3] for p in points} == {"lbdf", "brr", "hybrid"}
    # hybrid comes after its members, whose plans it starts from
    for k, (phase, n, b, s) in enumerate(points):
        if s == "hybrid":
            assert points[k - 2:k] == [(phase, n, b, "lbdf"), (phase, n, b, "brr")]


@pytest.mark.usefixtures("one_torch_thread")
def test_a_decode_point_is_solved_and_bounded(sweep):
    """llama_tiny_decode@16 at 1 MiB: the weights and a 16-token cache, at most a few rows
    above the compulsory traffic (2,439,169 + 256 x 16 B) and below layer by layer."""
    row, plan = sweep.solve_point("decode", 16, 1 << 20, "lbdf")
    hybrid, _ = sweep.solve_point("decode", 16, 1 << 20, "hybrid", {"lbdf": plan})
    assert row["lower_bound_bytes"] == 2_439_169 + 256 * 16
    for r in (row, hybrid):
        assert r["lower_bound_bytes"] <= r["dram_bytes"] < r["lbl_bytes"]
    assert hybrid["dram_bytes"] <= row["dram_bytes"]


def test_the_table_and_figure_come_from_the_store(sweep, tmp_path):
    rows = [{"phase": "decode", "tokens": "256", "buffer_bytes": str(256 * 1024),
             "scheme": s, "dram_bytes": str(d), "optimal": "False", "cap_reason": "set cap",
             "lbl_bytes": "2766817", "lower_bound_bytes": "2504705", "groups": "2",
             "seconds": "0.5"} for s, d in (("lbdf", 2513793), ("brr", 2504705),
                                             ("hybrid", 2504705))]
    store = tmp_path / "d.csv"
    with store.open("w", newline="") as f:
        w = csv.DictWriter(f, sweep.FIELDS)
        w.writeheader()
        w.writerows(rows)
    md, png = tmp_path / "d.md", tmp_path / "d.png"
    assert sweep.main(["--store", str(store), "--figure", str(png), "--markdown", str(md),
                       "--render-only"]) == 0
    lines = md.read_text().splitlines()
    assert lines[2] == ("| decode | 256 | 256 KiB | lbdf | 2.514 | capped | 2.767 | 2.505 | "
                        "1.00x |")
    assert "| brr | 2.505 | at the lower bound |" in lines[3]
    assert png.stat().st_size > 10_000
