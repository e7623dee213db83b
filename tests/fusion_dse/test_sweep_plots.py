"""Figures from a sweep store: every plot command writes a figure, and the data drawn is right.

The store is filled in-process (`run_point` + `SweepStore.write`, no cluster): the engine is
tested in test_sweep_engine.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fusion_dse.sweep import load_sweep
from fusion_dse.sweep.plots import budget_data, compare_data, pareto_data, tradeoff_data
from fusion_dse.sweep.point import run_point
from fusion_dse.sweep.spec import SweepSpec, expand
from fusion_dse.sweep.store import SweepStore, keyed_config, point_key

BUFFERS = [64 * 1024, 256 * 1024]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plots") / "p.sqlite"
    spec = SweepSpec(axes={"model": "squeezenet1_0", "buffer": "64KiB,256KiB",
                           "scheme": "lbdf,brr,lbl", "search": "ls", "seed": "0..1",
                           "budget": 20},
                     include=[{"scheme": "lbdf", "buffer": "256KiB", "seed": 0,
                               "search": "nsga2", "objectives": "dram,mbu"}])
    with SweepStore(path) as opened:
        for p in expand(spec):
            opened.write(p, keyed_config(p), run_point(p, point_key(p)), "p")
    return path


@pytest.mark.parametrize("kind", ["tradeoff", "budget", "pareto", "compare"])
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_every_plot_command_writes_a_figure(cli, store, tmp_path, kind, suffix):
    out = tmp_path / f"{kind}{suffix}"
    code, text, err = cli("plot", kind, str(store), "--out", str(out))
    assert code == 0, err
    assert str(out) in text and out.stat().st_size > 5000
    if suffix == ".svg":
        svg = out.read_text()
        assert "edge-npu" in svg and "20" in svg  # hardware and budget are stated


def test_tradeoff_data(store):
    frame = load_sweep(store)
    data = tradeoff_data(frame)
    lines, refs = data["lines"], data["references"]
    lbdf = lines[(lines["scheme"] == "lbdf") & (lines["search"] == "ls")]
    assert list(lbdf["buffer_bytes"]) == BUFFERS and (lbdf["n"] == 2).all()
    for _, row in lbdf.iterrows():
        runs = frame[(frame["scheme"] == "lbdf") & (frame["search"] == "ls")
                     & (frame["buffer_bytes"] == row["buffer_bytes"])]["dram_bytes"]
        assert (row["mean"], row["min"], row["max"]) == (runs.mean(), runs.min(), runs.max())
    lbl = frame[frame["scheme"] == "lbl"].set_index("buffer_bytes")["dram_bytes"]
    assert list(refs["lbl"]) == [lbl[b] for b in BUFFERS]
    assert (refs["lower_bound"] <= lines.groupby("buffer_bytes")["min"].min().values).all()


def test_budget_data_is_the_best_so_far(store):
    data = budget_data(load_sweep(store, blobs=True))
    run = data[(data["scheme"] == "brr") & (data["buffer_bytes"] == BUFFERS[0])]
    assert list(run["evaluation"]) == list(range(1, 21))
    assert (np.diff(run["mean"]) <= 0).all() and (run["min"] <= run["max"]).all()


def test_pareto_data_holds_the_front(store):
    frame = load_sweep(store, blobs=True)
    data = pareto_data(frame)
    assert set(data["objectives"]) == {"dram,mbu"} and set(data["search"]) == {"nsga2"}
    front = data.sort_values("x")
    assert (np.diff(front["dram_bytes"]) <= 0).all()  # non-dominated: less x, more DRAM
    best = frame[frame["objectives"] == "dram,mbu"]["dram_bytes"].iloc[0]
    assert front["dram_bytes"].min() == best


def test_compare_data_names_the_best_dataflow(store):
    frame = load_sweep(store)
    data = compare_data(frame)
    assert len(data) == 2
    for _, row in data.iterrows():
        cell = frame[frame["buffer_bytes"] == row["buffer_bytes"]]
        per_scheme = cell.groupby("scheme")["dram_bytes"].min()
        assert row["best"] == per_scheme.idxmin() and row["best_dram"] == per_scheme.min()
        assert row[f"saving_{row['best']}"] == 0
        assert row["saving_lbl"] == pytest.approx(1 - per_scheme.min() / per_scheme["lbl"])


def test_plot_of_a_store_without_fronts_says_so(cli, tmp_path, store):
    from fusion_dse.sweep.plots import pareto_figure

    frame = load_sweep(store, blobs=True)
    with pytest.raises(Exception, match="two-objective"):
        pareto_figure(frame[frame["objectives"] != "dram,mbu"])
    code, _, err = cli("plot", "tradeoff", str(store), "--out", str(tmp_path / "x.gif"))
    assert code == 2 and ".png, .svg or .pdf" in err


def test_references_and_cells_never_mix_graph_stages():
    # an lbl point costed on the imported graph (graph_stages NULL: an earlier store) next to
    # searched points on the fused graph: each line gets the reference of its own graph
    row = {"status": "done", "model": "m", "repair": "random", "buffer_bytes": 65536,
           "lower_bound_bytes": 1}
    frame = pd.DataFrame([
        {**row, "scheme": "lbdf", "search": "ls", "graph_stages": "fuse", "dram_bytes": 5,
         "lbl_dram_bytes": 10},
        {**row, "scheme": "lbl", "search": None, "repair": None, "graph_stages": None,
         "dram_bytes": 20, "lbl_dram_bytes": 20},
    ])
    refs = tradeoff_data(frame)["references"].set_index("graph_stages")
    assert refs.loc["fuse", "lbl"] == 10 and refs.loc["none", "lbl"] == 20
    cells = compare_data(frame).set_index("graph_stages")
    assert cells.loc["fuse", "best"] == "lbdf" and pd.isna(cells.loc["fuse", "dram_lbl"])
    assert cells.loc["none", "best"] == "lbl"


def test_budget_figure_facets_one_panel_per_model_and_buffer(store):
    from fusion_dse.figure_style import OKABE_ITO
    from fusion_dse.sweep.plots import budget_figure

    fig, data = budget_figure(load_sweep(store, blobs=True))
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == [f"squeezenet1_0, buffer {b}"
                                                 for b in ("64 KiB", "256 KiB")]
    runs = {tuple(r) for r in data[["scheme", "search", "repair"]].itertuples(index=False)}
    for ax in panels:
        assert len(ax.get_lines()) <= len(runs)  # one line per run setting, never per seed
        assert ax.get_legend() is None  # the one legend sits outside the panels
        assert {line.get_color() for line in ax.get_lines()} <= set(OKABE_ITO)
        assert ax.get_ylabel() == "best DRAM traffic (MiB), fuseable ops"
    legend, = fig.legends
    assert len({t.get_text() for t in legend.get_texts()}) == len(runs)
    assert "LBDF, local search, random repair" in [t.get_text() for t in legend.get_texts()]
    assert "edge-npu" in fig.get_suptitle() and "64 KiB..256 KiB" in fig.get_suptitle()


def test_figures_draw_dram_in_mib_and_buffers_in_kib(store):
    from fusion_dse.sweep.plots import pareto_figure, tradeoff_figure

    frame = load_sweep(store, blobs=True)
    fig, data = pareto_figure(frame)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "buffer the fused groups need (KiB)"
    line = ax.get_lines()[0]
    front = data.sort_values("x")
    assert np.allclose(sorted(line.get_xdata()), sorted(front["x"] / 1024))
    assert np.allclose(sorted(line.get_ydata()), sorted(front["dram_bytes"] / 2**20))
    fig, data = tradeoff_figure(frame)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "DRAM traffic (MiB)"
    lbl = [line for line in ax.get_lines() if line.get_label() == "layer by layer"][0]
    assert np.allclose(lbl.get_ydata(), data["references"]["lbl"].astype(float) / 2**20)
    assert {"64 KiB", "256 KiB"} <= {t.get_text() for t in ax.get_xticklabels()}
