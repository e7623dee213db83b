"""The Python API's views: `fusion_dse.sweep` and `fusion_dse.compare` return DataFrames,
`load_sweep` parses its JSON columns and adds the optimum and the gap, and results print short
(a line, and a small table in notebooks) with their plan by op name."""

from __future__ import annotations

import re

import pandas as pd
import pytest

import fusion_dse
from fusion_dse.sweep import OPTIMUM_COLUMNS, load_sweep
from fusion_dse.sweep.point import run_point
from fusion_dse.sweep.spec import SweepSpec, expand
from fusion_dse.sweep.store import SweepStore, keyed_config, point_key

AXES = {"model": "squeezenet1_0", "buffer": "64KiB,256KiB", "scheme": "lbdf,brr",
        "search": "ls", "budget": 10}


@pytest.fixture(scope="module")
def result():
    return fusion_dse.optimize("squeezenet1_0", search="rs", budget=12,
                               overrides={"buffer": "128KiB"})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("api") / "s.sqlite"
    with SweepStore(path) as opened:
        for p in expand(SweepSpec(name="s", axes=AXES)):
            opened.write(p, keyed_config(p), run_point(p, point_key(p)), "s")
    return path


def test_results_print_short(result):
    text = repr(result)
    assert len(text) < 300 and text.startswith("SearchResult(squeezenet1_0 (1x3x224x224)")
    summary = repr(result.summary)
    assert len(summary) < 400 and "edge-npu, buffer 128 KiB" in summary
    assert "<table>" in result._repr_html_() and "<table>" in result.summary._repr_html_()


def test_plan_by_op_name(result):
    names = result.groups_by_name
    assert [len(g) for g in names] == [len(g) for g in result.plan.groups]
    assert names[0][0] == result.graph[result.plan.groups[0].ops[0]].name


def test_load_sweep_adds_the_optimum_and_parses_json(store):
    frame = load_sweep(store)
    assert set(OPTIMUM_COLUMNS) <= set(frame.columns) and "summary" not in frame.columns
    parsed = load_sweep(store, parse=True)
    for _, row in parsed.iterrows():
        summary = row["summary"]
        assert isinstance(summary, dict) and isinstance(row["plan"], dict)
        assert isinstance(row["history"], pd.DataFrame) and len(row["history"]) == 10
        assert row["optimum_dram_bytes"] == summary["optimum"]["dram_bytes"]
        assert row["gap_to_optimum"] == pytest.approx(summary["best"]["gap_to_optimum"])
        assert row["dram_bytes"] >= row["optimum_dram_bytes"] or not row["optimal"]


def test_sweep_returns_its_points(store):
    frame = fusion_dse.sweep(AXES["model"], buffers=AXES["buffer"], schemes=["lbdf", "brr"],
                             searches="ls", budget=10, name="s", store=store)  # all stored
    assert len(frame) == 4 and set(frame["scheme"]) == {"lbdf", "brr"}
    assert frame["key"].tolist() == load_sweep(store)["key"].tolist()
    with pytest.raises(fusion_dse.sweep.InputError, match="unknown model"):
        fusion_dse.sweep("nosuch", name="s", store=store)


@pytest.mark.slow
def test_compare_runs_and_names_the_best(tmp_path):
    table = fusion_dse.compare("squeezenet1_0", buffers="128KiB", schemes="lbdf,lbl",
                               store=tmp_path / "c.sqlite", workers=1)
    assert list(table["scheme"]) == ["lbdf", "lbl"] and table["best"].sum() == 1
    assert table.loc[table["best"], "scheme"].item() == "lbdf"


def test_a_sweep_prints_its_results_not_only_counts(store):
    from fusion_dse.sweep.cli import results_text

    points = expand(SweepSpec(name="s", axes=AXES))
    table, where = results_text(store, points)
    frame = load_sweep(store)
    lines = table.splitlines()
    assert len(lines) == 1 + frame.groupby(["buffer_bytes", "scheme"]).ngroups
    least = frame[frame["scheme"] == "lbdf"]["dram_bytes"].min() / 2**20
    assert any(f"{least:.3f}" in line and "LBDF" in line for line in lines)
    assert f"fusion-dse report {store}" in where


def test_a_sweep_without_a_name_gets_a_store_of_its_own(cli, tmp_path, monkeypatch):
    from fusion_dse.sweep.cli import default_name

    a = default_name({"model": "squeezenet1_0", "buffer": "64KiB"})
    assert a == default_name({"buffer": "64KiB", "model": "squeezenet1_0"})
    assert a != default_name({"model": "squeezenet1_0", "buffer": "128KiB"})
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("sweep", "--models", "squeezenet1_0", "--buffers", "64KiB",
                         "--dry-run")
    assert code == 0, err
    assert re.search(r"fusion-dse-out/sweeps/sweep-[0-9a-f]{6}\.sqlite", out)
