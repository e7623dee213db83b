"""Sweeps on Dask into the SQLite store: resume, crash safety, failures, determinism, export.

One 2-worker LocalCluster is shared by the module (`run_sweep(scheduler=...)`); the tests
that need their own cluster (1 worker, a client killed with SIGKILL) start one.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from fusion_dse.sweep import load_sweep
from fusion_dse.sweep.engine import run_sweep
from fusion_dse.sweep.spec import SweepSpec, expand
from fusion_dse.sweep.store import point_key

ROOT = Path(__file__).resolve().parents[2]
VARYING = ["started", "finished", "worker", "search_seconds"]
SMALL = {"model": "squeezenet1_0", "buffer": "64KiB,256KiB", "scheme": "lbdf,brr,lbl",
         "search": "ls", "seed": "0..1", "budget": 20}


@pytest.fixture(scope="module")
def scheduler():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def small_store(scheduler, tmp_path_factory):
    """A store of the SMALL sweep plus one two-objective point."""
    store = tmp_path_factory.mktemp("sweep") / "small.sqlite"
    spec = SweepSpec(name="small", axes=SMALL,
                     include=[{"scheme": "lbdf", "buffer": "256KiB", "seed": 0,
                               "objectives": "dram,mbu", "search": "nsga2"}])
    outcome = run_sweep(expand(spec), store, "small", scheduler=scheduler, quiet=True)
    assert outcome.done == outcome.total == 11 and outcome.failed == 0
    return store


def test_rows_hold_the_figures_and_the_blobs(small_store):
    frame = load_sweep(small_store, blobs=True)
    assert len(frame) == 11 and set(frame["status"]) == {"done"}
    assert frame["key"].is_unique
    searched = frame[frame["search"].notna()]
    assert (searched["budget_used"] == 20).all()
    assert (frame["dram_bytes"] >= frame["lower_bound_bytes"]).all()
    # the LBL reference bounds LBDF plans from above, not BRR plans (BRR re-reads halos and
    # streamed weights per tile: docs/cost-model.md section 4.3)
    lbdf = searched[searched["scheme"] == "lbdf"]
    assert len(lbdf) == 5 and (lbdf["dram_bytes"] <= lbdf["lbl_dram_bytes"]).all()
    lbl = frame[frame["scheme"] == "lbl"]
    assert len(lbl) == 2 and lbl["seed"].isna().all()
    assert (lbl["dram_bytes"] == lbl["lbl_dram_bytes"]).all()
    history = pd.read_json(__import__("io").StringIO(searched["history"].iloc[0]),
                           orient="split")
    assert list(history["evaluation"]) == list(range(1, 21))
    assert frame["pareto"].notna().sum() == 1


def test_rerun_skips_done_points(small_store, scheduler):
    spec = SweepSpec(name="small", axes=SMALL)
    before = load_sweep(small_store)
    outcome = run_sweep(expand(spec), small_store, "small", scheduler=scheduler, quiet=True)
    assert (outcome.total, outcome.skipped, outcome.done, outcome.failed) == (10, 10, 0, 0)
    pd.testing.assert_frame_equal(load_sweep(small_store), before)


def test_failing_point_is_recorded_and_the_rest_complete(scheduler, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not a graph")
    store = tmp_path / "f.sqlite"
    points = expand(SweepSpec(axes={"model": ["squeezenet1_0", str(broken)],
                                    "buffer": "128KiB", "budget": 20}))
    outcome = run_sweep(points, store, "f", scheduler=scheduler, quiet=True)
    assert (outcome.done, outcome.failed) == (1, 1)
    frame = load_sweep(store).set_index("model")
    assert frame.loc["squeezenet1_0", "status"] == "done"
    failed = frame.loc[str(broken)]
    assert failed["status"] == "failed" and "\n" not in failed["error"]
    assert failed["error"].split(":")[0].endswith("Error")
    # not retried unless asked; then retried (and failing again, still one row)
    assert run_sweep(points, store, "f", scheduler=scheduler, quiet=True).skipped == 2
    again = run_sweep(points, store, "f", scheduler=scheduler, retry_failed=True, quiet=True)
    assert (again.skipped, again.failed) == (1, 1) and len(load_sweep(store)) == 2


def test_the_embedded_cluster_prints_its_dashboard_address(tmp_path, capsys):
    pytest.importorskip("bokeh")  # the dashboard needs it (extra "dashboard", in "test")
    spec = SweepSpec(axes={"model": "squeezenet1_0", "buffer": "64KiB", "scheme": "lbl"})
    outcome = run_sweep(expand(spec), tmp_path / "one.sqlite", "dash", workers=1)
    assert outcome.done == 1 and outcome.dashboard.startswith("http://")
    assert outcome.dashboard.endswith("/status")
    assert f"fusion-dse: Dask dashboard at {outcome.dashboard}" in capsys.readouterr().err


@pytest.mark.slow
def test_one_and_two_workers_give_identical_rows(small_store, tmp_path):
    spec = SweepSpec(axes={**SMALL, "scheme": "lbdf,brr"})
    one = tmp_path / "one.sqlite"
    outcome = run_sweep(expand(spec), one, "small", workers=1, quiet=True)
    assert outcome.workers == 1 and outcome.done == 8
    frame_one = load_sweep(one, blobs=True).drop(columns=VARYING)
    frame_two = load_sweep(small_store, blobs=True).drop(columns=VARYING)
    frame_two = frame_two[frame_two["key"].isin(frame_one["key"])]
    assert len(frame_two) == 8

    def plain(frame: pd.DataFrame) -> pd.DataFrame:  # an all-NULL column reads as None
        frame = frame.sort_values("key").reset_index(drop=True).astype(object)
        return frame.where(frame.notna(), None)

    pd.testing.assert_frame_equal(plain(frame_one), plain(frame_two))


@pytest.mark.slow
def test_sigkill_mid_sweep_then_resume_loses_and_duplicates_nothing(scheduler, tmp_path):
    store = tmp_path / "k.sqlite"
    argv = ["--models", "squeezenet1_0", "--buffers", "64KiB..512KiB:x2", "--seeds", "0..2",
            "--budget", "20", "--store", str(store), "--quiet"]
    proc = subprocess.Popen([sys.executable, "-m", "fusion_dse", "sweep", *argv,
                             "--workers", "1"], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600  # generous: a saturated machine is slow
        while _done_rows(store) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        _kill_group(proc.pid)
    before = load_sweep(store)
    assert 2 <= len(before) < 12, "the client was killed mid-sweep"
    points = expand(SweepSpec(axes={"model": "squeezenet1_0", "buffer": "64KiB..512KiB:x2",
                                    "seed": "0..2", "budget": 20}))
    outcome = run_sweep(points, store, "sweep", scheduler=scheduler, quiet=True)
    after = load_sweep(store)
    assert outcome.skipped == len(before) and len(after) == 12 == outcome.total
    assert after["key"].is_unique and set(after["status"]) == {"done"}
    assert set(after["key"]) == {point_key(p) for p in points}
    kept = after.set_index("key").loc[before["key"]]
    assert list(kept["finished"]) == list(before["finished"])  # committed rows untouched
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _done_rows(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store, timeout=0.1) as db:
            return db.execute("SELECT COUNT(*) FROM points WHERE status='done'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _kill_group(pid: int) -> None:
    """End the worker processes the killed client left (they are in its session)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_load_sweep_and_export_round_trip(cli, small_store, tmp_path):
    frame = load_sweep(small_store)
    assert {"key", "model", "scheme", "buffer_bytes", "dram_bytes", "status"} <= set(frame)
    assert "history" not in frame and len(frame) == 11
    csv = tmp_path / "s.csv"
    code, out, _ = cli("sweep", "export", str(small_store), "--format", "csv", "--out",
                       str(csv))
    assert code == 0 and "11 points" in out
    back = pd.read_csv(csv)
    assert list(back["key"]) == list(frame["key"])
    assert list(back["dram_bytes"]) == list(frame["dram_bytes"])
    parquet = tmp_path / "s.parquet"
    code, _, _ = cli("sweep", "export", str(small_store), "--format", "parquet", "--out",
                     str(parquet))
    pd.testing.assert_frame_equal(pd.read_parquet(parquet), frame)


def test_load_sweep_rejects_what_is_not_a_store(tmp_path):
    from simulator.errors import InputError

    junk = tmp_path / "junk.sqlite"
    junk.write_text("not sqlite at all, " * 100)
    with pytest.raises(InputError, match="not a sweep store|cannot open sweep store"):
        load_sweep(junk)


# --- seed-free points run once ---------------------------------------------------------------

SEEDED = {"model": "squeezenet1_0", "buffer": "128KiB,256KiB", "scheme": "lbdf",
          "search": "auto", "seed": "0..2"}


def test_seed_free_points_run_once_and_store_a_row_per_seed(scheduler, tmp_path):
    store = tmp_path / "seeds.sqlite"
    points = expand(SweepSpec(axes=SEEDED))
    rows: list[dict] = []
    outcome = run_sweep(points, store, "seeds", scheduler=scheduler, quiet=True,
                        on_row=rows.append)
    assert (outcome.total, outcome.done, outcome.failed, outcome.copied) == (6, 6, 0, 4)
    frame = load_sweep(store, blobs=True)
    assert len(frame) == 6 and sorted(frame["seed"]) == [0, 0, 1, 1, 2, 2]
    assert frame["key"].is_unique and set(frame["key"]) == {point_key(p) for p in points}
    # each configuration ran once, at its lowest seed: the others are its copies (the same
    # run's times and worker), marked by computed_seed
    assert sorted(r["computed_seed"] for r in rows) == [0] * 6
    assert list(frame[frame["computed_seed"] == frame["seed"]]["seed"]) == [0, 0]
    for _, cell in frame.groupby("buffer_bytes"):
        assert len(cell) == 3 and (cell["computed_seed"] == 0).all()
        for column in ("dram_bytes", "summary", "plan", "history", "started", "worker"):
            assert cell[column].nunique() == 1, column
        assert json.loads(cell["summary"].iloc[0])["search_report"]["auto_path"] == "exact"
    # resumed over more seeds: the stored seed-free rows serve, nothing runs
    more = expand(SweepSpec(axes={**SEEDED, "seed": "0..3"}))
    again = run_sweep(more, store, "seeds", scheduler=scheduler, quiet=True)
    assert (again.skipped, again.done, again.copied) == (6, 2, 2)
    after = load_sweep(store)
    seed3 = after[after["seed"] == 3]
    assert len(seed3) == 2 and (seed3["computed_seed"] == 0).all()
    assert set(seed3["started"]) <= set(frame["started"])


def test_a_seeded_search_and_an_auto_front_run_every_seed(scheduler, tmp_path):
    store = tmp_path / "rs.sqlite"
    spec = SweepSpec(axes={"model": "squeezenet1_0", "buffer": "128KiB", "search": "rs",
                           "seed": "0..2", "budget": 20},
                     include=[{"search": "auto", "objectives": "dram,mbu", "seed": "0..1"}])
    outcome = run_sweep(expand(spec), store, "rs", scheduler=scheduler, quiet=True)
    assert (outcome.done, outcome.copied) == (5, 0)
    frame = load_sweep(store, blobs=True)
    assert (frame["computed_seed"] == frame["seed"]).all()
    assert frame["started"].nunique() == 5
    # auto for a front takes its local-search path: seeded, so both seeds ran
    front = frame[frame["search"] == "auto"]
    assert {json.loads(s)["search_report"]["auto_path"] for s in front["summary"]} == {"ls"}


def test_which_points_may_be_seed_free():
    from dataclasses import replace

    from fusion_dse.sweep.engine import seed_free, seed_group

    auto = expand(SweepSpec(axes={**SEEDED, "buffer": "128KiB", "seed": 1}))[0]
    assert seed_group(auto) == replace(auto, seed=None)
    assert seed_group(replace(auto, search="exact")) is not None
    assert seed_group(replace(auto, search="ls")) is None
    assert seed_group(replace(auto, graph_stages="fuse+substitute")) is None  # seeded stage
    lbl = expand(SweepSpec(axes={"model": "squeezenet1_0", "scheme": "lbl"}))[0]
    assert seed_group(lbl) is None
    done = {"status": "done", "summary": json.dumps({"search_report": {"auto_path": "exact"}})}
    assert seed_free(auto, done)
    assert not seed_free(auto, {**done, "status": "failed"})
    assert not seed_free(auto, {**done, "summary": json.dumps({"search_report":
                                                                {"auto_path": "ls"}})})
    assert seed_free(replace(auto, search="exact"), {"status": "done", "summary": "{}"})
    assert not seed_free(replace(auto, graph_stages="substitute"), done)
