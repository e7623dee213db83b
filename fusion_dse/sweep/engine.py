"""Running a sweep on Dask: an embedded LocalCluster by default, or an existing cluster.

`run_sweep` validates the points, skips those already in the store, submits the rest to
Dask workers (`point.run_point`, a pure function returning a row) and writes each row into
the store as it completes (`distributed.as_completed`): the client is the only writer.

Points whose result cannot depend on the seed run once (`seed_group`, `seed_free`): the
points that differ only in seed and may be seed-free (search ``exact``, or ``auto``; not with
the seeded ``substitute`` graph stage) form a group; its lowest seed runs first, and when its
row shows the result is seed-free (``exact``; ``auto`` whose path was the proven optimum,
summary ``search_report.auto_path``) the other seeds are stored as copies of it, their
``computed_seed`` naming the seed that ran; otherwise they are submitted then. A stored
seed-free row of the group (an earlier run) serves the same way, so a resumed sweep runs
nothing it can copy. The
default cluster is a `distributed.LocalCluster` of N single-threaded worker processes
(N = CPU cores); ``scheduler="tcp://host:port"`` connects to a running scheduler instead
(dask-jobqueue, Kubernetes, ``dask scheduler`` + ``dask worker``), whose workers need this
package installed. One tqdm bar shows points done and failed with the ETA (on a terminal
only).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fusion_dse.sweep.point import run_point
from fusion_dse.sweep.spec import Point, validate_points
from fusion_dse.sweep.store import SweepStore, keyed_config, point_key
from simulator.errors import InputError

__all__ = ["SEED_FREE_SEARCHES", "Plan", "SweepOutcome", "estimate_seconds", "plan_sweep",
           "run_sweep", "seed_free", "seed_group"]

SEED_FREE_SEARCHES = ("exact", "auto")
"""Searches whose result may not depend on the seed: ``exact`` never reads it; ``auto`` does
not when its exact path proves the optimum (`seed_free` reads which path it took)."""


def seed_group(point: Point) -> Point | None:
    """The point without its seed, naming the group of points that differ only in seed and
    whose result may not depend on it; None when it may (a seeded search, the seeded
    ``substitute`` graph stage) or the point has no seed (lbl)."""
    if point.seed is None or point.search not in SEED_FREE_SEARCHES \
            or "substitute" in point.graph_stages.split("+"):
        return None
    return replace(point, seed=None)


def seed_free(point: Point, row: Mapping[str, Any]) -> bool:
    """Whether the stored or returned `row` of `point` (a member of a `seed_group`) holds a
    result no seed can change: ``done``, and search ``exact``, or ``auto`` whose path was the
    proven exact optimum."""
    if seed_group(point) is None or row.get("status") != "done":
        return False
    if point.search == "exact":
        return True
    try:
        report = json.loads(row.get("summary") or "{}").get("search_report") or {}
    except (TypeError, ValueError, AttributeError):
        return False
    return isinstance(report, dict) and report.get("auto_path") == "exact"


def copied_row(row: Mapping[str, Any], key: str) -> dict[str, Any]:
    """`row` (the run of a seed-free group's lowest seed) as the row of another seed's point:
    the same figures, blobs, times and worker, keyed `key`, ``computed_seed`` unchanged."""
    return {**row, "key": key}


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

    def seed_groups(self) -> tuple[list[int], dict[Point, list[int]]]:
        """The points to run at once (indices into `points`), and the todo points of each
        `seed_group`, lowest seed first."""
        alone: list[int] = []
        groups: dict[Point, list[int]] = {}
        for i in self.todo:
            group = seed_group(self.points[i])
            if group is None:
                alone.append(i)
            else:
                groups.setdefault(group, []).append(i)
        for members in groups.values():
            members.sort(key=lambda i: self.points[i].seed)
        return alone, groups


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
    copied: int = 0
    """Of `done`, rows stored as copies of a lower seed's seed-free result (not run)."""


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
    validate_points(points)  # before the store or a cluster exists (or dask is imported)
    from distributed import as_completed

    with SweepStore(store_path) as store:
        plan = plan_sweep(points, store, retry_failed)
        started = time.perf_counter()
        counts = {"done": 0, "failed": 0, "copied": 0}
        dashboard, n_workers = None, 0
        if plan.todo:
            with _client(workers, scheduler) as client:
                n_workers = len(client.scheduler_info()["workers"])
                dashboard = _dashboard(client)
                if dashboard and not quiet:
                    print(f"fusion-dse: Dask dashboard at {dashboard}", file=sys.stderr)
                with _progress(len(plan.todo), quiet) as bar:
                    def record(i: int, row: dict[str, Any]) -> None:
                        store.write(plan.points[i], plan.configs[i], row, name)
                        counts["done"] += row["status"] == "done"
                        counts["failed"] += row["status"] == "failed"
                        copied = row["status"] == "done" \
                            and row.get("computed_seed") != plan.points[i].seed
                        counts["copied"] += copied
                        bar.set_postfix_str(f"done {counts['done']}, failed "
                                            f"{counts['failed']}, copied {counts['copied']}",
                                            refresh=False)
                        bar.update(1)
                        if on_row is not None:
                            on_row(row)

                    def submit(i: int) -> Any:
                        return client.submit(run_point, plan.points[i], plan.keys[i],
                                             key=f"point-{plan.keys[i]}", pure=False)

                    alone, groups = plan.seed_groups()
                    futures = {submit(i): i for i in alone}
                    waiting: dict[int, list[int]] = {}  # a running lowest seed -> the others
                    for group, members in groups.items():
                        stored = _stored_seed_free(store, plan, group)
                        if stored is not None:  # an earlier run's seed-free row serves
                            for i in members:
                                record(i, copied_row(stored, plan.keys[i]))
                            continue
                        futures[submit(members[0])] = members[0]
                        waiting[members[0]] = members[1:]
                    running = as_completed(list(futures))
                    for future in running:
                        i = futures.pop(future)
                        row = _result(future, plan.keys[i], plan.points[i].seed)
                        record(i, row)
                        future.release()
                        others = waiting.pop(i, [])
                        if others and seed_free(plan.points[i], row):
                            for j in others:
                                record(j, copied_row(row, plan.keys[j]))
                        else:
                            for j in others:
                                new = submit(j)
                                futures[new] = j
                                running.add(new)
    return SweepOutcome(len(plan.points), plan.skipped, counts["done"], counts["failed"],
                        time.perf_counter() - started, n_workers, dashboard, counts["copied"])


def _stored_seed_free(store: SweepStore, plan: Plan, group: Point) -> dict[str, Any] | None:
    """A stored row of `group` (a point of the plan not to run) that is seed-free, if any:
    the lowest seed's."""
    stored = sorted((p.seed, k) for p, k in zip(plan.points, plan.keys, strict=True)
                    if seed_group(p) == group)
    todo = {plan.keys[i] for i in plan.todo}
    for seed, key in stored:
        if key in todo:
            continue
        row = store.row(key)
        if row is not None and seed_free(replace(group, seed=seed), row):
            ran = row.get("computed_seed")  # NULL in a row of an earlier release
            return {**row, "computed_seed": seed if ran is None else ran}
    return None


def _result(future: Any, key: str, seed: int | None) -> dict[str, Any]:
    """The row of a finished future; a worker that died is a failed point."""
    try:
        return future.result()
    except Exception as err:  # noqa: BLE001 - e.g. KilledWorker: record, go on
        now = time.time()
        return {"key": key, "status": "failed", "started": now, "finished": now,
                "error": f"{type(err).__name__}: {' '.join(str(err).split())}",
                "worker": None, "computed_seed": seed}
