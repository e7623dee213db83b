"""experiments/stores.py: a store's export (gzip'd SQL dump) is reproducible and reads back as
the same store, so the renderers give the same bytes from the export as from the store (and a
clean clone, which has only the exports, renders the committed results)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from fusion_dse import load_sweep
from fusion_dse.sweep.point import run_point
from fusion_dse.sweep.spec import SweepSpec, expand
from fusion_dse.sweep.store import SweepStore, keyed_config, point_key

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))

import provenance  # noqa: E402
import stores  # noqa: E402


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


rt = _script("render_tables")
rw = _script("render_workloads")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """SqueezeNet at 64 and 128 KiB, local search (6 plans) and layer by layer: a buffer
    sweep."""
    path = tmp_path_factory.mktemp("stores") / "tiny.sqlite"
    spec = SweepSpec(axes={"model": "squeezenet1_0", "buffer": "64KiB,128KiB", "scheme": "lbdf",
                           "search": "ls", "repair": "random", "seed": 0, "budget": 6,
                           "graph_stages": "none"}, include=[{"scheme": "lbl"}])
    with SweepStore(path) as opened:
        for p in expand(spec):
            row = run_point(p, point_key(p))
            assert row["status"] == "done", row["error"]
            opened.write(p, keyed_config(p), row, "tiny")
    return path


def test_an_export_is_reproducible_and_reads_back_as_the_store(store, tmp_path):
    first = stores.export(store, tmp_path / "a" / "tiny.sql.gz")
    again = stores.export(store, tmp_path / "b" / "tiny.sql.gz")
    assert first.read_bytes() == again.read_bytes()
    assert stores.is_export(first) and not stores.is_export(store)
    rebuilt = stores.resolve(first)
    assert rebuilt != store and rebuilt.suffix == ".sqlite" and stores.resolve(first) == rebuilt
    assert stores.resolve(store) == store
    want = load_sweep(store, blobs=True)
    assert len(want) == 4 and want["summary"].notna().all()
    pd.testing.assert_frame_equal(load_sweep(rebuilt, blobs=True), want)
    with pytest.raises(FileNotFoundError):
        stores.resolve(tmp_path / "missing.sql.gz")
    with pytest.raises(FileExistsError):
        stores.materialise(first, rebuilt)


def test_an_export_may_leave_out_the_blobs_no_renderer_needs(store, tmp_path):
    full = stores.export(store, tmp_path / "full.sql.gz")
    small = stores.export(store, tmp_path / "small.sql.gz", drop=["history", "plan"])
    assert small.stat().st_size < full.stat().st_size
    got, want = (load_sweep(stores.resolve(p), blobs=True) for p in (small, full))
    assert got["history"].isna().all() and got["plan"].isna().all()
    assert want["history"].notna().sum() == 2
    pd.testing.assert_frame_equal(got.drop(columns=["history", "plan"]),
                                  want.drop(columns=["history", "plan"]))
    with pytest.raises(ValueError, match="summary"):
        stores.export(store, tmp_path / "bad.sql.gz", drop=["summary"])


def test_an_export_keeps_the_budget_figures_histories_of_the_sweeps_named(store, tmp_path):
    from fusion_dse.sweep.plots import budget_data

    kept = stores.export(store, tmp_path / "kept.sql.gz", drop=["pareto"],
                         keep_history=["tiny"])
    full = stores.export(store, tmp_path / "full.sql.gz")
    assert kept.stat().st_size < full.stat().st_size
    got, want = (load_sweep(stores.resolve(p), blobs=True) for p in (kept, full))
    pd.testing.assert_frame_equal(budget_data(got), budget_data(want))  # the same figure
    histories = load_sweep(stores.resolve(kept), blobs=True, parse=True)["history"].dropna()
    assert len(histories) == 2
    assert all(list(h.columns) == list(stores.BUDGET_COLUMNS) for h in histories)
    with pytest.raises(ValueError, match="no point of these sweeps has a history"):
        stores.export(store, tmp_path / "none.sql.gz", keep_history=["other"])


def test_the_renderers_give_the_same_bytes_from_the_export(store, tmp_path):
    export = stores.export(store, tmp_path / "tiny.sql.gz")
    record = provenance.RECORD.read_bytes()
    out = {}
    for name, source in (("store", store), ("export", export)):
        out[name] = tmp_path / name
        assert rt.main([str(source), "--out", str(out[name])]) == 0
    files = sorted(p.name for p in out["store"].iterdir())
    assert files == ["buffer_sweep.md", "buffer_sweep_compare.csv", "buffer_sweep_compare.png",
                     "buffer_sweep_tradeoff.csv", "buffer_sweep_tradeoff.png"]
    for f in files:
        assert (out["export"] / f).read_bytes() == (out["store"] / f).read_bytes(), f
    assert provenance.RECORD.read_bytes() == record  # outputs outside the repository
    pd.testing.assert_frame_equal(rw.points(export), rw.points(store))
    assert rt.main([str(tmp_path / "missing.sql.gz"), "--out", str(tmp_path)]) == 2


def test_the_provenance_of_an_export_is_that_of_its_points(store, tmp_path, monkeypatch):
    export = stores.export(store, tmp_path / "tiny.sql.gz")
    rows = provenance.store_rows(export)
    assert list(rows["model"]) == ["squeezenet1_0"] * 4 and rows["config"].notna().all()
    record = {"fingerprints": {}, "results": {}}
    code = type("F", (), {"digest": "now", "scopes": {"all": "now", "cnn": "cnow"},
                          "version": "0.1.0"})()
    # the points ran with the cost-model source of this checkout: the current fingerprint
    assert provenance.data_fingerprint(rows, record, code, provenance._source_digest())[0] \
        == "now"
    assert provenance.data_fingerprint(rows, record, code, "another source")[0] is None
    assert provenance.scope_of(rows["model"]) == "cnn"
