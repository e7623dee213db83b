"""Running a sweep on Dask: an embedded LocalCluster by default, or an existing cluster.

`run_sweep` validates the points, skips those already in the store, submits the rest to
Dask workers (`point.run_point`, a pure function returning a row) and writes each row into
the store as it completes (`distributed.as_completed`): the client is the only writer. The
default cluster is a `distributed.LocalCluster` of N single-threaded worker processes
(N = CPU cores); ``scheduler="tcp://host:port"`` connects to a running scheduler instead
(dask-jobqueue, Kubernetes, ``dask scheduler`` + ``dask worker``), whose workers need this
package installed. One tqdm bar shows points done and failed with the ETA (on a terminal
only).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusion_dse.sweep.point import run_point
from fusion_dse.sweep.spec import Point, validate_points
from fusion_dse.sweep.store import SweepStore, keyed_config, point_key
from simulator.errors import InputError

__all__ = ["Plan", "SweepOutcome", "estimate_seconds", "plan_sweep", "run_sweep"]


@dataclass(frozen=True)
class Plan:
    """What a sweep would do: every point with its key and configuration, and what to skip."""

    points: tuple[Point, ...]
    keys: tuple[str, ...]
    configs: tuple[dict[str, Any], ...]
    todo: tuple[int, ...]

    @property
    def skipped(self) -> int:
        """Points already in the store that will not run."""
        return len(self.points) - len(self.todo)


@dataclass(frozen=True)
class SweepOutcome:
    """What a sweep did."""

    total: int
    skipped: int
    done: int
    failed: int
    seconds: float
    workers: int
    dashboard: str | None


def plan_sweep(points: Sequence[Point], store: SweepStore, retry_failed: bool = False) -> Plan:
    """Key the (validated) `points` and pick those the store does not hold yet."""
    configs = tuple(keyed_config(p) for p in points)
    keys = tuple(point_key(p) for p in points)
    stored = store.statuses()
    redo = {"failed"} if retry_failed else set()
    first = {k: i for i, k in reversed(list(enumerate(keys)))}  # one run per distinct key
    todo = tuple(i for i, k in enumerate(keys)
                 if first[k] == i and (k not in stored or stored[k] in redo))
    return Plan(tuple(points), keys, configs, todo)


def estimate_seconds(plan: Plan, workers: int, samples: int = 2) -> tuple[float, int]:
    """Estimated sweep time: `samples` points of the plan timed here, scaled to the rest.

    Returns:
        (estimated seconds on `workers` workers, points timed).
    """
    chosen = plan.todo[:: max(1, len(plan.todo) // samples)][:samples]
    if not chosen:
        return 0.0, 0
    started = time.perf_counter()
    for i in chosen:
        run_point(plan.points[i], plan.keys[i])
    per_point = (time.perf_counter() - started) / len(chosen)
    return per_point * len(plan.todo) / max(1, workers), len(chosen)


@contextmanager
def _client(workers: int | None, scheduler: str | None):  # noqa: ANN202
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as err:
            raise InputError(f"cannot connect to the Dask scheduler {scheduler!r}: "
                             f"{err}") from err
        try:
            yield client
        finally:
            client.close()
        return
    n = workers or os.cpu_count() or 1
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def _dashboard(client: Any) -> str | None:
    try:
        import bokeh  # noqa: F401 - the dashboard needs bokeh
    except ImportError:
        return None
    return client.dashboard_link


def _progress(total: int, quiet: bool):  # noqa: ANN202 - a tqdm bar
    from tqdm import tqdm

    return tqdm(total=total, unit="point", desc="sweep", file=sys.stderr,
                disable=quiet or not sys.stderr.isatty(), dynamic_ncols=True)


def run_sweep(points: Sequence[Point], store_path: str | Path, name: str,
              workers: int | None = None, scheduler: str | None = None,
              retry_failed: bool = False, quiet: bool = False,
              on_row: Callable[[dict[str, Any]], None] | None = None) -> SweepOutcome:
    """Run the points the store lacks on Dask and store each row as it completes.

    Args:
        points: The sweep (`spec.expand`).
        store_path: The SQLite store (created if missing).
        name: The sweep's name, stored with each row.
        workers: Worker processes of the embedded cluster (default: CPU cores).
        scheduler: Address of an existing Dask scheduler (then `workers` is ignored).
        retry_failed: Also rerun points stored as failed.
        quiet: No progress bar and no dashboard line.
        on_row: Called with each stored row (tests, live reports).

    Raises:
        InputError: bad points (nothing is started), an unusable store or scheduler.
    """
    from distributed import as_completed

    validate_points(points)  # before the store or a cluster exists
    with SweepStore(store_path) as store:
        plan = plan_sweep(points, store, retry_failed)
        started = time.perf_counter()
        done = failed = 0
        dashboard, n_workers = None, 0
        if plan.todo:
            with _client(workers, scheduler) as client:
                n_workers = len(client.scheduler_info()["workers"])
                dashboard = _dashboard(client)
                if dashboard and not quiet:
                    print(f"fusion-dse: Dask dashboard at {dashboard}", file=sys.stderr)
                futures = {client.submit(run_point, plan.points[i], plan.keys[i],
                                         key=f"point-{plan.keys[i]}", pure=False): i
                           for i in plan.todo}
                with _progress(len(futures), quiet) as bar:
                    for future in as_completed(futures):
                        i = futures.pop(future)
                        row = _result(future, plan.keys[i])
                        store.write(plan.points[i], plan.configs[i], row, name)
                        done += row["status"] == "done"
                        failed += row["status"] == "failed"
                        bar.set_postfix_str(f"done {done}, failed {failed}", refresh=False)
                        bar.update(1)
                        if on_row is not None:
                            on_row(row)
                        future.release()
    return SweepOutcome(len(plan.points), plan.skipped, done, failed,
                        time.perf_counter() - started, n_workers, dashboard)


def _result(future: Any, key: str) -> dict[str, Any]:
    """The row of a finished future; a worker that died is a failed point."""
    try:
        return future.result()
    except Exception as err:  # noqa: BLE001 - e.g. KilledWorker: record, go on
        now = time.time()
        return {"key": key, "status": "failed", "started": now, "finished": now,
                "error": f"{type(err).__name__}: {' '.join(str(err).split())}",
                "worker": None}
