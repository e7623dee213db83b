"""Sweeps against bad stores and a failing cluster (issue 30): a refused store is left byte for
byte as it was, a locked store is waited for a bounded time, reading a store writes nothing,
an export is written whole or not at all, a store made for a sweep that cannot start is
removed, points lost to a dead scheduler are stored as ``interrupted`` and run by a plain
rerun, and Ctrl-C during a sweep is one line.

The bad stores are the hardening corpus's (`tests/hardening/corpus.py`, `make_stores`).
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fusion_dse.sweep import load_sweep
from fusion_dse.sweep.engine import _result, plan_sweep, run_sweep
from fusion_dse.sweep.spec import SweepSpec, expand
from fusion_dse.sweep.store import SweepStore, point_key
from simulator import limits
from simulator.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("hardening_corpus_stores",
                                               ROOT / "tests" / "hardening" / "corpus.py")
corpus = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = corpus
_SPEC.loader.exec_module(corpus)

REFUSED = [s for s in corpus.STORES if s.endswith(".sqlite") and s != "ours.sqlite"]
POINTS = {"model": "squeezenet1_0", "buffer": "64KiB", "search": "ls", "budget": 5,
          "seed": "0..1"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("stores")
    corpus.make_stores(folder)
    return folder


def _state(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file of `folder` with its SHA-256 and modification time (ns)."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("name", REFUSED)
def test_a_refused_store_is_left_byte_identical(cli, stores, tmp_path, name):
    work = tmp_path / "w"
    work.mkdir()
    store = work / name
    store.write_bytes((stores / name).read_bytes())
    os.utime(store, ns=(1_000_000_000, 1_000_000_000))
    before = _state(work)
    writes = [
        ("sweep", "--models", "squeezenet1_0", "--budget", "5", "--store", str(store)),
        ("compare", "squeezenet1_0", "--store", str(store), "--out", str(tmp_path / "c.png")),
    ]
    reads = [
        ("sweep", "--models", "squeezenet1_0", "--dry-run", "--store", str(store)),
        ("sweep", "export", str(store), "--out", str(tmp_path / "x.csv")),
        ("plot", "tradeoff", str(store), "--out", str(tmp_path / "x.png")),
    ]
    readable = name == "newer-tool.sqlite"  # a newer tool's store of this schema is read
    for argv in writes + ([] if readable else reads):
        code, out, err = cli(*argv)
        assert code == 2 and out == "", (argv, err)
        assert len(err.strip().splitlines()) == 1 and str(store) in err, (argv, err)
        assert _state(work) == before, f"{argv} changed {name} or left a file beside it"
    calls = [lambda: SweepStore(store)]
    if not readable:
        calls += [lambda: SweepStore(store, read_only=True), lambda: load_sweep(store)]
    for call in calls:
        with pytest.raises(InputError):
            call()
        assert _state(work) == before
    if readable:
        assert load_sweep(store).empty
        assert _state(work) == before
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "x.png").exists()


def test_reading_a_store_writes_nothing(stores, tmp_path):
    store = tmp_path / "s.sqlite"
    store.write_bytes((stores / "ours.sqlite").read_bytes())
    before = _state(tmp_path)
    assert load_sweep(store).empty
    with SweepStore(store, read_only=True) as opened:
        assert opened.statuses() == {}
        with pytest.raises(InputError, match="reading only"):
            opened.write(None, {}, {}, "x")  # type: ignore[arg-type]
    assert _state(tmp_path) == before  # no -wal or -shm beside it either


def test_a_locked_store_is_waited_for_a_bounded_time_then_refused(cli, stores, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setattr(limits, "STORE_LOCK_WAIT_S", 0.5)
    store = tmp_path / "s.sqlite"
    store.write_bytes((stores / "ours.sqlite").read_bytes())
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        code, out, err = cli("sweep", "--models", "squeezenet1_0", "--budget", "5",
                             "--store", str(store), "--quiet")
        waited = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"fusion-dse: error: sweep store {str(store)!r} is locked by another writer; waited "
        "0.5 s (is another sweep writing to it?)"]
    assert 0.5 <= waited < 30
    assert load_sweep(store).empty  # nothing was written


def test_a_store_made_for_a_sweep_that_cannot_start_is_removed(tmp_path, monkeypatch):
    import fusion_dse.sweep.engine as engine

    def no_cluster(*args, **kwargs):
        raise InputError("no cluster today")

    monkeypatch.setattr(engine, "_client", no_cluster)
    store = tmp_path / "new" / "deeper" / "s.sqlite"
    with pytest.raises(InputError, match="no cluster today"):
        run_sweep(expand(SweepSpec(axes=POINTS)), store, "x", quiet=True)
    assert not (tmp_path / "new").exists()


def test_an_export_is_written_whole_or_not_at_all(cli, stores, tmp_path, monkeypatch):
    import pandas as pd

    store = tmp_path / "s.sqlite"
    store.write_bytes((stores / "ours.sqlite").read_bytes())
    out = tmp_path / "s.csv"
    out.write_text("an earlier export\n")

    def full_disk(self, path, **kwargs):
        Path(path).write_text("half a")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_disk)
    code, stdout, err = cli("sweep", "export", str(store), "--out", str(out))
    assert code == 2 and stdout == ""
    assert err.strip().splitlines() == [
        f"fusion-dse: error: cannot write {str(out)!r}: No space left on device (any earlier "
        "file there is left as it was)"]
    assert out.read_text() == "an earlier export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv", "s.sqlite"]


# --- points lost to the cluster -------------------------------------------------------------


class _Worker:
    address = "tcp://127.0.0.1:1"


class _Lost:
    """A finished future whose result raises `error` (a cluster failure or the point's own
    exit)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def result(self):
        raise self.error


def test_a_point_lost_to_the_cluster_is_interrupted_not_failed():
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    for error in (KilledWorker("point-1", _Worker(), 3),
                  FutureCancelledError("point-1", reason="scheduler-connection-lost"),
                  CommClosedError("in <TCP>: Stream is closed"), OSError("connection reset")):
        row = _result(_Lost(error), "k", 3)
        assert (row["status"], row["key"], row["computed_seed"]) == ("interrupted", "k", 3)
        assert type(error).__name__ in row["error"]
    assert _result(_Lost(SystemExit(7)), "k", 3)["status"] == "failed"  # the point's own
    with pytest.raises(KeyboardInterrupt):
        _result(_Lost(KeyboardInterrupt()), "k", 3)


def test_a_plain_rerun_runs_interrupted_points_and_not_failed_ones(tmp_path):
    points = expand(SweepSpec(axes=POINTS))
    store = tmp_path / "s.sqlite"
    with SweepStore(store) as opened:
        for point, status in zip(points, ("interrupted", "failed"), strict=True):
            opened.write(point, {}, {"key": point_key(point), "status": status}, "x")
    with SweepStore(store, read_only=True) as opened:
        assert plan_sweep(points, opened).todo == (0,)
        assert plan_sweep(points, opened, retry_failed=True).todo == (0, 1)


@pytest.mark.slow
def test_a_lost_scheduler_leaves_points_interrupted_and_a_plain_rerun_runs_them(tmp_path):
    port = _free_port()
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                          os.environ.get("PYTHONPATH", "")])}
    scheduler = subprocess.Popen([*dask, "--port", str(port), "--no-dashboard"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True, env=env)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                               f"tcp://127.0.0.1:{port}", "--nthreads", "1", "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True, env=env)
    store = tmp_path / "s.sqlite"
    points = expand(SweepSpec(axes={**POINTS, "buffer": "64KiB..512KiB:x2", "seed": "0..2",
                                    "budget": 2000}))
    try:
        _wait_for_port(port)

        def kill_after_first_row() -> None:
            while not store.exists() or _rows(store) < 1:
                time.sleep(0.2)
            os.killpg(scheduler.pid, signal.SIGKILL)

        threading.Thread(target=kill_after_first_row, daemon=True).start()
        outcome = run_sweep(points, store, "lost", scheduler=f"tcp://127.0.0.1:{port}",
                            quiet=True)
    finally:
        for proc in (scheduler, worker):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    frame = load_sweep(store)
    assert outcome.interrupted >= 1 and outcome.done >= 1 and outcome.failed == 0
    assert outcome.done + outcome.interrupted == len(points) == len(frame)
    assert set(frame["status"]) == {"done", "interrupted"}
    lost = frame[frame["status"] == "interrupted"]
    assert lost["error"].str.contains("scheduler|Cancelled|Comm", regex=True).all()
    again = run_sweep(points, store, "lost", workers=1, quiet=True)  # a plain rerun
    assert again.skipped == outcome.done and again.done == outcome.interrupted
    assert set(load_sweep(store)["status"]) == {"done"}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, seconds: float = 600) -> None:
    import socket

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                time.sleep(3)  # the worker registers
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the scheduler did not start")


def _rows(store: Path) -> int:
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=0.1) as db:
            return db.execute("SELECT COUNT(*) FROM points").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_ctrl_c_during_a_sweep_is_one_line_and_keeps_the_stored_rows(tmp_path):
    store = tmp_path / "s.sqlite"
    argv = ["sweep", "--models", "squeezenet1_0", "--buffers", "64KiB..1MiB:x2", "--searches",
            "ls", "--budget", "3000", "--seeds", "0..3", "--workers", "1", "--store",
            str(store), "--quiet"]
    # a terminal's Ctrl-C goes to the whole process group: the client and its workers
    proc = subprocess.Popen([sys.executable, "-m", "fusion_dse", *argv], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env=corpus.subprocess_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 600  # generous: a saturated machine is slow
        while _rows(store) < 1 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=600)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 130, err.decode()[-3000:]
    assert err.decode().strip().splitlines() == ["fusion-dse: interrupted"]
    assert out == b""
    frame = load_sweep(store)
    assert 1 <= len(frame) < 20 and set(frame["status"]) == {"done"}
