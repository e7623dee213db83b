"""The sweep results store: one SQLite file, one row per point, written by the client only.

Table ``points`` (one row per point, primary key ``key``):

* ``key`` — SHA-256 of the point's full configuration (`point_key`): the point's axes, the
  resolved hardware (every field, so a preset edited later gives new keys), the model file's
  digest for ONNX / graph JSON models, the tool version, the digest of the cost-model source
  (``simulator/cost/``) and, for explanation-guided repairs, the digest of the GNN
  checkpoints (``explain/checkpoints/``);
* the configuration: ``sweep``, ``model``, ``hw``, ``scheme``, ``search``, ``repair``,
  ``objectives``, ``budget``, ``seed``, ``input_shape``, ``overrides`` (JSON),
  ``graph_stages`` (NULL: none; a store of an earlier release gains the column when opened),
  ``config`` (the whole keyed configuration, JSON);
* the figures: ``hw_name``, ``buffer_bytes``, `point.FIGURES`, ``budget_used``,
  ``search_status``, ``search_seconds``;
* ``status`` (``done`` | ``failed`` | ``interrupted``: the point was lost to a dead worker or
  scheduler, not failed by itself, and a plain rerun runs it), ``error`` (one line),
  ``started``, ``finished`` (Unix time), ``worker``;
* ``computed_seed``: the seed whose run computed the row: the point's own, or, for a point
  whose result cannot depend on the seed (`engine.seed_free`), the lowest seed of its group,
  whose row it copies (figures, blobs, times and worker); NULL for lbl points and rows of an
  earlier release;
* blobs (JSON text): ``summary``, ``plan``, ``history`` and ``pareto`` (pandas
  ``orient="split"``).

Table ``meta`` holds ``schema_version`` and ``tool_version`` (the newest fusion-dse that wrote
the store).

The file is in WAL mode and every row is committed in its own transaction, so killing the
client at any moment loses no committed row and leaves a store that opens; a rerun skips
``done`` keys (and ``failed`` ones unless asked to retry), so nothing is duplicated.

A store is checked before anything is written to it (`inspect_store`, which reads without
changing a byte or leaving a file beside it): a file that is not SQLite, a database without
the ``points`` and ``meta`` tables of a store, a ``points`` table of other columns, a store of
a newer schema or written by a newer fusion-dse is refused with one line and left as it was.
Readers (`SweepStore(path, read_only=True)`: export, plots, `load_sweep`) never write. A store
another writer has locked is waited for `simulator.limits.STORE_LOCK_WAIT_S` seconds, then
refused with one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat
import urllib.parse
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from fusion_dse.sweep.point import FIGURES
from fusion_dse.sweep.spec import Point
from simulator import limits
from simulator.errors import InputError

__all__ = ["BLOB_COLUMNS", "SCHEMA_VERSION", "STATUSES", "SweepStore", "inspect_store",
           "point_key", "source_digests"]

SCHEMA_VERSION = 1
STATUSES = ("done", "failed", "interrupted")
"""A row's ``status``: the point finished, failed by itself (its error stored), or was lost
to a dead worker or scheduler (run again by a plain rerun)."""
BLOB_COLUMNS = ("config", "summary", "plan", "history", "pareto")
_CONFIG_COLUMNS = ("sweep", "model", "hw", "scheme", "search", "repair", "objectives",
                   "budget", "seed", "input_shape", "overrides", "graph_stages")
_RESULT_COLUMNS = ("hw_name", "buffer_bytes", *FIGURES, "budget_used", "search_status",
                   "search_seconds", "status", "error", "started", "finished", "worker",
                   "computed_seed", "summary", "plan", "history", "pareto")
COLUMNS = ("key", *_CONFIG_COLUMNS, *_RESULT_COLUMNS, "config")
LATER_COLUMNS = ("graph_stages", "computed_seed")
"""Columns a store of schema 1 made by an earlier release may lack (it gains them when a sweep
writes to it; readers see NULL)."""
_SQLITE_HEADER = b"SQLite format 3\x00"
_REAL = {"cycles", "energy_pj", "search_seconds", "started", "finished"}
_INT = ({"budget", "seed", "buffer_bytes", "budget_used", "computed_seed"}
        | (set(FIGURES) - _REAL))


def _column_type(name: str) -> str:
    return "REAL" if name in _REAL else "INTEGER" if name in _INT else "TEXT"


def _digest_files(files: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def source_digests() -> dict[str, str]:
    """Tool version and digests of the cost-model source and the GNN checkpoints."""
    import explain
    import fusion_dse
    import simulator.cost

    cost_dir = Path(simulator.cost.__file__).parent
    ckpt_dir = Path(explain.__file__).parent / "checkpoints"
    checkpoints = [p for p in ckpt_dir.glob("*") if p.suffix in (".pt", ".json")]
    return {"version": fusion_dse.__version__,
            "cost_model": _digest_files(cost_dir.rglob("*.py")),
            "checkpoints": _digest_files(checkpoints)}


def _model_digest(model: str) -> str | None:
    path = Path(model)
    if path.suffix.lower() in (".onnx", ".json") and path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return None


def keyed_config(point: Point) -> dict[str, Any]:
    """The configuration a point's key hashes (see the module docstring)."""
    from search.registry import REPAIRS
    from simulator.hw import load_hw

    digests = dict(source_digests())
    if point.repair is None or not REPAIRS.get(point.repair).target.startswith("explain."):
        digests.pop("checkpoints")  # only explanation-guided repairs read the checkpoints
    return {**point.to_dict(), "hardware": load_hw(point.hw, dict(point.overrides)).to_dict(),
            "model_digest": _model_digest(point.model), **digests}


def point_key(point: Point) -> str:
    """The SHA-256 (hex) of `keyed_config(point)`."""
    text = json.dumps(keyed_config(point), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _where(path: Path) -> str:
    return f"sweep store {str(path)!r}"


def _read_uri(path: Path) -> str:
    """A read-only URI of `path`: ``immutable`` unless a writer's journal lies beside it, so
    that reading a store never leaves a ``-wal`` or ``-shm`` file behind."""
    full = path.resolve()
    busy = any(Path(f"{full}{suffix}").exists() for suffix in ("-wal", "-journal"))
    return f"file:{urllib.parse.quote(str(full))}?mode=ro{'' if busy else '&immutable=1'}"


def _locked(err: BaseException) -> bool:
    return isinstance(err, sqlite3.OperationalError) and "locked" in str(err).lower()


def _locked_error(path: Path) -> InputError:
    return InputError(f"{_where(path)} is locked by another writer; waited "
                      f"{limits.STORE_LOCK_WAIT_S:g} s (is another sweep writing to it?)")


def _newer(version: str, than: str) -> bool:
    from packaging.version import Version

    return Version(version) > Version(than)


def inspect_store(path: str | Path, writing: bool = False) -> tuple[str, ...] | None:
    """The columns of the ``points`` table of the store at `path`, or None when there is no
    store yet (no file, or an empty one); checked without changing a byte of the file or
    leaving one beside it.

    Raises:
        InputError: one line: a folder or special file, a file that is not SQLite or is
            damaged, a database that is not a sweep store (no ``points`` and ``meta`` tables,
            ``points`` of other columns), a newer schema, a store last written by a newer
            fusion-dse (when `writing`), a store locked past `limits.STORE_LOCK_WAIT_S`.
    """
    path = Path(path)
    where = _where(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise InputError(f"cannot read {where}: {err.strerror or err}") from err
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{where} is a folder, not a store file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{where} is not a regular file")
    if st.st_size == 0:
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(len(_SQLITE_HEADER))
    except OSError as err:
        raise InputError(f"cannot read {where}: {err.strerror or err}") from err
    if head != _SQLITE_HEADER:
        raise InputError(f"{where} is not a sweep store (not an SQLite database); it is left "
                         "as it was")
    try:
        db = sqlite3.connect(_read_uri(path), uri=True, timeout=limits.STORE_LOCK_WAIT_S)
        try:
            tables = {name for (name,) in
                      db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"points", "meta"} <= tables:
                raise InputError(f"{where} is not a sweep store (no 'points' and 'meta' "
                                 "tables: another program's database?); it is left as it was")
            info = list(db.execute("PRAGMA table_info(points)"))
            try:
                meta = {str(k): str(v) for k, v in db.execute("SELECT name, value FROM meta")}
            except sqlite3.OperationalError:
                meta = {}
        finally:
            db.close()
    except sqlite3.DatabaseError as err:
        if _locked(err):
            raise _locked_error(path) from err
        raise InputError(f"{where} cannot be read as a sweep store ({err}); it is left as it "
                         "was") from err
    columns = tuple(str(row[1]) for row in info)
    _check_meta(meta, where, writing)
    foreign = sorted(set(columns) - set(COLUMNS))
    missing = sorted(set(COLUMNS) - set(columns) - set(LATER_COLUMNS))
    keyed = any(row[1] == "key" and row[5] == 1 for row in info)
    if foreign or missing or not keyed:
        what = (f"columns no sweep store has ({', '.join(map(limits.shown, foreign[:3]))})"
                if foreign else f"no {', '.join(missing[:3])} column" if missing
                else "no 'key' primary key")
        raise InputError(f"{where} is not a sweep store: its 'points' table has {what}; it is "
                         "left as it was")
    return columns


def _check_meta(meta: dict[str, str], where: str, writing: bool) -> None:
    import fusion_dse

    text = meta.get("schema_version")
    try:
        schema = int(text) if text is not None and len(text) < 10 else None
    except ValueError:
        schema = None
    if schema is None or schema < 1:
        raise InputError(f"{where} is not a sweep store (its 'meta' table has no schema "
                         "version); it is left as it was")
    if schema > SCHEMA_VERSION:
        raise InputError(f"{where} was made by a newer fusion-dse (store schema {schema}; "
                         f"this version {fusion_dse.__version__} reads schema "
                         f"{SCHEMA_VERSION}); it is left as it was")
    tool = meta.get("tool_version")
    if tool is None:
        return  # a store of a release before the tool version was recorded
    try:
        newer = _newer(tool, fusion_dse.__version__)
    except ValueError:  # packaging's InvalidVersion
        raise InputError(f"{where} is not a sweep store (its tool version "
                         f"{limits.shown(tool, 30)} is none fusion-dse writes); it is left as "
                         "it was") from None
    if newer and writing:
        raise InputError(f"{where} was last written by fusion-dse {limits.shown(tool, 30)}, "
                         f"newer than this {fusion_dse.__version__}; it is left as it was "
                         "(use that version, or another --store)")


class SweepStore:
    """An open sweep store: the client's only writer, or a reader (`read_only`).

    Opening checks the file first (`inspect_store`): a store it refuses is left byte for
    byte as it was. A writer creates the file when there is none (`discard` removes a store
    this writer created and never wrote a row to); a reader never writes.
    """

    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.created = False
        self._wrote = False
        self._made = []
        if str(path) == ":memory:":
            self._db = sqlite3.connect(":memory:", isolation_level=None)
            self._create()
            self._columns = COLUMNS
            return
        columns = inspect_store(self.path, writing=not read_only)
        if read_only:
            if columns is None:
                raise InputError(f"no sweep store at {str(self.path)!r}")
            self._columns = columns
            try:
                self._db = sqlite3.connect(_read_uri(self.path), uri=True,
                                           timeout=limits.STORE_LOCK_WAIT_S)
            except sqlite3.Error as err:
                raise InputError(f"cannot open {_where(self.path)}: {err}") from err
            return
        self.created = not self.path.exists()
        self._made: list[Path] = [d for d in self.path.parents if not d.exists()][::-1]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None,
                                       timeout=limits.STORE_LOCK_WAIT_S)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._create()
        except (OSError, sqlite3.Error) as err:
            with contextlib.suppress(Exception):
                self._db.close()
            if self.created:
                self._remove_files()
            if _locked(err):
                raise _locked_error(self.path) from err
            raise InputError(f"cannot open {_where(self.path)}: {err}") from err
        self._columns = COLUMNS

    def _create(self) -> None:
        import fusion_dse

        cols = ", ".join(f"{c} {_column_type(c)}" for c in COLUMNS[1:])
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(f"CREATE TABLE IF NOT EXISTS points (key TEXT PRIMARY KEY, {cols})")
            have = {row[1] for row in self._db.execute("PRAGMA table_info(points)")}
            for c in COLUMNS[1:]:  # a store of an earlier release gains the newer columns
                if c not in have:
                    self._db.execute(f"ALTER TABLE points ADD COLUMN {c} {_column_type(c)}")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                             (str(SCHEMA_VERSION),))
            row = self._db.execute("SELECT value FROM meta WHERE name = 'tool_version'")
            stored = row.fetchone()
            if stored is None or _newer(fusion_dse.__version__, str(stored[0])):
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('tool_version', ?)",
                                 (fusion_dse.__version__,))

    def _remove_files(self) -> None:
        """Remove the store this writer created, and the folders it made for it."""
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}{suffix}")
        for folder in reversed(getattr(self, "_made", [])):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty

    def close(self) -> None:
        """Close the connection (checkpoints the WAL)."""
        self._db.close()

    def discard(self) -> None:
        """Close; and remove the file when this writer created it and stored no row (a sweep
        that could not start leaves nothing behind)."""
        self.close()
        if self.created and not self._wrote and str(self.path) != ":memory:":
            self._remove_files()

    def __enter__(self) -> SweepStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._db.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as err:
            if _locked(err):
                raise _locked_error(self.path) from err
            raise InputError(f"{_where(self.path)} cannot be read ({err})") from err

    def statuses(self) -> dict[str, str]:
        """Status by key of every stored point."""
        return dict(self._query("SELECT key, status FROM points"))

    def _select(self, columns: Iterable[str]) -> str:
        return ", ".join(c if c in self._columns else f"NULL AS {c}" for c in columns)

    def row(self, key: str) -> dict[str, Any] | None:
        """The stored row of `key` (every column), or None."""
        found = self._query(f"SELECT {self._select(COLUMNS)} FROM points WHERE key = ?", (key,))
        return None if not found else dict(zip(COLUMNS, found[0], strict=True))

    def write(self, point: Point, config: dict[str, Any], row: dict[str, Any],
              sweep: str) -> None:
        """Store the result `row` of `point` in one transaction (replacing a failed row)."""
        if self.read_only:
            raise InputError(f"{_where(self.path)} is open for reading only")
        values = {**{c: None for c in COLUMNS}, **row, "sweep": sweep,
                  **{k: v for k, v in point.to_dict().items() if k in _CONFIG_COLUMNS},
                  "config": json.dumps(config, sort_keys=True, default=str)}
        values["overrides"] = json.dumps(dict(point.overrides), sort_keys=True)
        marks = ", ".join("?" for _ in COLUMNS)
        update = ", ".join(f"{c}=excluded.{c}" for c in COLUMNS[1:])
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            if _locked(err):
                raise _locked_error(self.path) from err
            raise
        try:
            self._db.execute(f"INSERT INTO points ({', '.join(COLUMNS)}) VALUES ({marks}) "
                             f"ON CONFLICT(key) DO UPDATE SET {update}",
                             [values[c] for c in COLUMNS])
            self._db.execute("COMMIT")
            self._wrote = True
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def frame(self, blobs: bool = False, summary: bool = False):  # noqa: ANN201 - a DataFrame
        """All points as a DataFrame (without the JSON blobs unless `blobs`; with `summary`,
        the summary blob alone)."""
        import pandas as pd

        cols = COLUMNS if blobs else tuple(c for c in COLUMNS if c not in BLOB_COLUMNS
                                           or (summary and c == "summary"))
        try:
            frame = pd.read_sql_query(f"SELECT {self._select(cols)} FROM points ORDER BY rowid",
                                      self._db)
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as err:
            if _locked(err.__cause__ or err):
                raise _locked_error(self.path) from err
            raise InputError(f"{_where(self.path)} cannot be read ({err})") from err
        ints = [c for c in frame.columns if c in _INT]
        return frame.astype(dict.fromkeys(ints, "Int64"))  # lbl points have no seed
