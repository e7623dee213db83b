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

Nothing is created before the sweep can start: the points are validated, the store checked
without writing (`store.inspect_store`: a foreign or newer store is refused and left as it
was), the scheduler's address checked (`check_scheduler`) and answered; a store this run
created is removed again when the cluster cannot start or the run is interrupted before its
first row. The embedded cluster's workers are forked from a server started with SIGINT
ignored, so Ctrl-C in a terminal reaches the client only: it closes the cluster quietly and
the command line prints one line. A point lost to a dead worker or scheduler (``KilledWorker``,
a lost connection, a cancelled future) is stored as ``interrupted``, not ``failed``: it is no
result of the point, and a plain rerun runs it again.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fusion_dse.sweep.point import run_point
from fusion_dse.sweep.spec import Point, validate_points
from fusion_dse.sweep.store import SweepStore, inspect_store, keyed_config, point_key
from simulator import limits
from simulator.errors import InputError

__all__ = ["SCHEDULER_PROTOCOLS", "SEED_FREE_SEARCHES", "Plan", "SweepOutcome",
           "check_scheduler", "check_workers", "estimate_seconds", "plan_sweep", "run_sweep",
           "seed_free", "seed_group"]

SCHEDULER_PROTOCOLS = ("tcp", "tls", "ws", "wss", "ucx")
"""The protocols of a ``--scheduler`` address (distributed's comm backends)."""
CONNECT_TIMEOUT_S = 20
"""Seconds the client waits for a scheduler that answers (one that refuses the connection is
reported at once)."""
_ADDRESS = re.compile(r"^(?:(?P<proto>[A-Za-z][A-Za-z0-9+.-]*)://)?"
                      r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?)"
                      r"(?::(?P<port>[0-9]+))?$")

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
    interrupted: int = 0
    """Points lost to a dead worker or scheduler (stored as ``interrupted``; a rerun runs
    them)."""


def plan_sweep(points: Sequence[Point], store: SweepStore | None,
               retry_failed: bool = False) -> Plan:
    """Key the (validated) `points` and pick those the store (None: none yet) does not hold
    as done: absent, ``interrupted`` and, with `retry_failed`, ``failed`` points run."""
    configs = tuple(keyed_config(p) for p in points)
    keys = tuple(point_key(p) for p in points)
    stored = store.statuses() if store is not None else {}
    redo = {"interrupted", "failed"} if retry_failed else {"interrupted"}
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


def check_workers(workers: int | None, scheduler: str | None, dry_run: bool = False,
                  flag: str = "--workers") -> int | None:
    """`workers` if it is a worker count this machine (or, for a `dry_run`'s estimate, a
    cluster) can hold: 1 to `limits.max_workers()` processes of the embedded cluster, 1 to
    `limits.MAX_CLUSTER_WORKERS` for an estimate on `scheduler`'s cluster; with a scheduler
    and no dry run the cluster's own workers run the points, so a count is refused.

    Raises:
        InputError: one line with the bound.
    """
    if workers is None:
        return None
    if scheduler and not dry_run:
        raise InputError(f"{flag} sizes the embedded cluster; with --scheduler the cluster's "
                         "own workers run the points (leave out --workers)")
    most = limits.MAX_CLUSTER_WORKERS if scheduler else limits.max_workers()
    if workers <= 0:
        raise InputError(f"{flag} must be positive, got {workers}")
    if workers > most:
        where = ("a cluster estimate" if scheduler else
                 f"this machine ({os.cpu_count() or 1} CPU cores x "
                 f"{limits.WORKERS_PER_CORE})")
        raise InputError(f"{flag} {workers:,} is over the limit of {most:,} for {where}")
    return workers


def check_scheduler(address: str) -> tuple[str, str, int]:
    """(protocol, host, port) of a Dask scheduler address such as ``tcp://host:8786``
    (protocol `SCHEDULER_PROTOCOLS`, default tcp; port 1-65535, default 8786), checked
    without connecting.

    Raises:
        InputError: one line quoting (the start of) the address.
    """
    shown = limits.shown(address, 80)
    if not isinstance(address, str) or not address.strip() or len(address) > 300 \
            or not address.isprintable():
        raise InputError(f"--scheduler {shown} is not an address such as tcp://host:8786")
    m = _ADDRESS.match(address.strip())
    if m is None:
        raise InputError(f"--scheduler {shown} is not an address such as tcp://host:8786")
    proto = (m["proto"] or "tcp").lower()
    if proto not in SCHEDULER_PROTOCOLS:
        raise InputError(f"--scheduler {shown}: unknown protocol {limits.shown(proto, 20)} "
                         f"(use {', '.join(SCHEDULER_PROTOCOLS)})")
    port = int(m["port"]) if m["port"] and len(m["port"]) <= 5 else 8786 if not m["port"] \
        else 0
    if not 1 <= port <= 65535:
        raise InputError(f"--scheduler {shown}: port {limits.shown(m['port'], 12)[1:-1]} is "
                         "outside 1-65535")
    return proto, m["host"], port


def _probe(address: str) -> None:
    """Refuse at once a tcp/ws scheduler that cannot be reached (distributed would retry a
    refused connection until its timeout)."""
    import socket

    proto, host, port = check_scheduler(address)
    if proto not in ("tcp", "ws"):
        return
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=5):
            pass
    except OSError as err:
        why = err.strerror or str(err) or type(err).__name__
        raise InputError(f"cannot connect to the Dask scheduler {limits.shown(address, 80)}: "
                         f"{why}") from None


def _start_forkserver() -> None:
    """Workers of the embedded cluster are forked from a multiprocessing fork server started
    with SIGINT ignored: they inherit it, so Ctrl-C in a terminal (sent to the whole process
    group) reaches the client alone, which closes the cluster; no worker prints a traceback.
    The client ignores SIGINT only while it starts the server (milliseconds)."""
    import multiprocessing.forkserver

    import dask
    from distributed.utils import get_mp_context

    dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})
    get_mp_context()  # sets the server's preloads
    # the resource tracker (started with the server, from these interpreter flags) warns of
    # "leaked semaphores" when an interrupted client exits before the cluster's queues are
    # collected: noise after the one line an interrupt prints
    quiet = "ignore::UserWarning:multiprocessing.resource_tracker"
    if quiet not in sys.warnoptions:
        sys.warnoptions.append(quiet)
    if threading.current_thread() is not threading.main_thread():
        multiprocessing.forkserver.ensure_running()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _client(workers: int | None, scheduler: str | None):  # noqa: ANN202
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
        except Exception as err:  # noqa: BLE001 - OSError, TimeoutError, CommClosedError, ...
            text = " ".join(str(err).split())[:200] or type(err).__name__
            raise InputError(f"cannot connect to the Dask scheduler "
                             f"{limits.shown(scheduler, 80)}: {text}") from None
        with _closing(client):
            yield client
        return
    n = workers or os.cpu_count() or 1
    _start_forkserver()
    with _closing() as closing:
        with _sigint_deferred():  # a cluster half started cannot be closed quietly
            closing.append(LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                        dashboard_address=":0",
                                        silence_logs=logging.CRITICAL))
            closing.insert(0, Client(closing[0]))
        yield closing[0]


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Ctrl-C during the block is raised as KeyboardInterrupt when the block ends (starting
    the embedded cluster: a few seconds), so that what it started can be closed whole; a
    second Ctrl-C is raised at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def defer(signum: int, frame: Any) -> None:
        if caught:
            raise KeyboardInterrupt
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, defer)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


@contextmanager
def _closing(*opened: Any) -> Iterator[list[Any]]:
    """Run the block, then close what it opened (a client, then its cluster), with
    distributed's loggers silenced throughout: a lost scheduler, a dead worker or an
    interrupt make it log reconnection attempts, cancelled calls and lost workers as errors
    with tracebacks, while the sweep stores what happened (``interrupted`` rows) and says it
    in one line. After an exception the loggers stay silent (the process is ending)."""
    items = list(opened)
    levels = _silence_dask()
    failed = False
    try:
        yield items
    except BaseException:
        failed = True
        raise
    finally:
        try:
            for item in items:
                item.close()
        finally:
            if not failed:
                for logger, level in levels.items():
                    logger.setLevel(level)


def _silence_dask() -> dict[logging.Logger, int]:
    """Set distributed's loggers (``distributed`` and each of its children that has its own
    level) above CRITICAL; returns their levels before."""
    names = ["distributed", *(n for n in logging.root.manager.loggerDict
                              if n.startswith("distributed."))]
    levels = {}
    for name in names:
        logger = logging.getLogger(name)
        levels[logger] = logger.level
        logger.setLevel(logging.CRITICAL + 1)
    return levels


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
        InputError: bad points, a worker count over the machine's limit, a foreign or newer
            store, a malformed or unreachable scheduler (nothing is created or started);
            a store locked by another writer.
    """
    validate_points(points)  # before the store or a cluster exists (or dask is imported)
    if scheduler:
        check_scheduler(scheduler)
    else:
        check_workers(workers, None)
    started = time.perf_counter()
    if inspect_store(store_path, writing=True) is None:  # refuses a foreign or newer store
        plan = plan_sweep(points, None, retry_failed)
    else:
        with SweepStore(store_path, read_only=True) as reader:
            plan = plan_sweep(points, reader, retry_failed)
    counts = {"done": 0, "failed": 0, "copied": 0, "interrupted": 0}
    dashboard, n_workers = None, 0
    if plan.todo:
        if scheduler:
            _probe(scheduler)  # a scheduler that refuses: said before anything is created
        store = SweepStore(store_path)  # created here when missing; removed if nothing starts
        try:
            with _client(workers, scheduler) as client:
                n_workers = len(client.scheduler_info()["workers"])
                dashboard = _dashboard(client)
                if dashboard and not quiet:
                    print(f"fusion-dse: Dask dashboard at {dashboard}", file=sys.stderr)
                _run(client, store, plan, name, counts, quiet, on_row)
        except BaseException:
            store.discard()
            raise
        store.close()
    return SweepOutcome(len(plan.points), plan.skipped, counts["done"], counts["failed"],
                        time.perf_counter() - started, n_workers, dashboard, counts["copied"],
                        counts["interrupted"])


def _run(client: Any, store: SweepStore, plan: Plan, name: str, counts: dict[str, int],
         quiet: bool, on_row: Callable[[dict[str, Any]], None] | None) -> None:
    """Submit the plan's points to `client` and store each row as it completes."""
    from distributed import as_completed

    with _progress(len(plan.todo), quiet) as bar:
        def record(i: int, row: dict[str, Any]) -> None:
            store.write(plan.points[i], plan.configs[i], row, name)
            counts[row["status"]] = counts.get(row["status"], 0) + 1
            copied = row["status"] == "done" \
                and row.get("computed_seed") != plan.points[i].seed
            counts["copied"] += copied
            lost = f", interrupted {counts['interrupted']}" if counts["interrupted"] else ""
            bar.set_postfix_str(f"done {counts['done']}, failed {counts['failed']}, copied "
                                f"{counts['copied']}{lost}", refresh=False)
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
            elif others and row["status"] == "interrupted":
                for j in others:  # the cluster is failing: run them on a rerun
                    record(j, _lost_row(plan.keys[j], plan.points[j].seed, row["error"]))
            else:
                for j in others:
                    new = submit(j)
                    futures[new] = j
                    running.add(new)


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
    """The row of a finished future. `point.run_point` returns a point's own failure as a
    row, so an exception here is the cluster's (a worker that died, ``KilledWorker``; a lost
    scheduler: a cancelled future, a closed connection): the point is ``interrupted`` and a
    plain rerun runs it. A point that exits its worker (``SystemExit``) failed by itself."""
    try:
        return future.result()
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # noqa: BLE001 - record, go on
        row = _lost_row(key, seed, f"{type(err).__name__}: {' '.join(str(err).split())}"[:500])
        if isinstance(err, SystemExit):
            row["status"] = "failed"
        return row


def _lost_row(key: str, seed: int | None, error: str) -> dict[str, Any]:
    now = time.time()
    return {"key": key, "status": "interrupted", "started": now, "finished": now,
            "error": error, "worker": None, "computed_seed": seed}
