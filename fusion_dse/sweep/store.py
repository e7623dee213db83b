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
* ``status`` (``done`` | ``failed``), ``error`` (one line), ``started``, ``finished`` (Unix
  time), ``worker``;
* ``computed_seed``: the seed whose run computed the row: the point's own, or, for a point
  whose result cannot depend on the seed (`engine.seed_free`), the lowest seed of its group,
  whose row it copies (figures, blobs, times and worker); NULL for lbl points and rows of an
  earlier release;
* blobs (JSON text): ``summary``, ``plan``, ``history`` and ``pareto`` (pandas
  ``orient="split"``).

The file is in WAL mode and every row is committed in its own transaction, so killing the
client at any moment loses no committed row and leaves a store that opens; a rerun skips
``done`` keys (and ``failed`` ones unless asked to retry), so nothing is duplicated.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from fusion_dse.sweep.point import FIGURES
from fusion_dse.sweep.spec import Point
from simulator.errors import InputError

__all__ = ["BLOB_COLUMNS", "SCHEMA_VERSION", "SweepStore", "point_key", "source_digests"]

SCHEMA_VERSION = 1
BLOB_COLUMNS = ("config", "summary", "plan", "history", "pareto")
_CONFIG_COLUMNS = ("sweep", "model", "hw", "scheme", "search", "repair", "objectives",
                   "budget", "seed", "input_shape", "overrides", "graph_stages")
_RESULT_COLUMNS = ("hw_name", "buffer_bytes", *FIGURES, "budget_used", "search_status",
                   "search_seconds", "status", "error", "started", "finished", "worker",
                   "computed_seed", "summary", "plan", "history", "pareto")
COLUMNS = ("key", *_CONFIG_COLUMNS, *_RESULT_COLUMNS, "config")
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


class SweepStore:
    """An open sweep store (the client's only writer)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._create()
        except (OSError, sqlite3.Error) as err:
            raise InputError(f"cannot open sweep store {str(self.path)!r}: {err}") from err

    def _create(self) -> None:
        cols = ", ".join(f"{c} {_column_type(c)}" for c in COLUMNS[1:])
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(f"CREATE TABLE IF NOT EXISTS points (key TEXT PRIMARY KEY, {cols})")
            have = {row[1] for row in self._db.execute("PRAGMA table_info(points)")}
            for c in COLUMNS[1:]:  # a store of an earlier release gains the newer columns
                if c not in have:
                    self._db.execute(f"ALTER TABLE points ADD COLUMN {c} {_column_type(c)}")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                             (str(SCHEMA_VERSION),))

    def close(self) -> None:
        """Close the connection (checkpoints the WAL)."""
        self._db.close()

    def __enter__(self) -> SweepStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def statuses(self) -> dict[str, str]:
        """Status by key of every stored point."""
        return dict(self._db.execute("SELECT key, status FROM points"))

    def row(self, key: str) -> dict[str, Any] | None:
        """The stored row of `key` (every column), or None."""
        cursor = self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM points WHERE key = ?",
                                  (key,))
        found = cursor.fetchone()
        return None if found is None else dict(zip(COLUMNS, found, strict=True))

    def write(self, point: Point, config: dict[str, Any], row: dict[str, Any],
              sweep: str) -> None:
        """Store the result `row` of `point` in one transaction (replacing a failed row)."""
        values = {**{c: None for c in COLUMNS}, **row, "sweep": sweep,
                  **{k: v for k, v in point.to_dict().items() if k in _CONFIG_COLUMNS},
                  "config": json.dumps(config, sort_keys=True, default=str)}
        values["overrides"] = json.dumps(dict(point.overrides), sort_keys=True)
        marks = ", ".join("?" for _ in COLUMNS)
        update = ", ".join(f"{c}=excluded.{c}" for c in COLUMNS[1:])
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute(f"INSERT INTO points ({', '.join(COLUMNS)}) VALUES ({marks}) "
                             f"ON CONFLICT(key) DO UPDATE SET {update}",
                             [values[c] for c in COLUMNS])
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def frame(self, blobs: bool = False):  # noqa: ANN201 - pandas.DataFrame, imported lazily
        """All points as a DataFrame (without the JSON blobs unless `blobs`)."""
        import pandas as pd

        cols = COLUMNS if blobs else tuple(c for c in COLUMNS if c not in BLOB_COLUMNS)
        frame = pd.read_sql_query(f"SELECT {', '.join(cols)} FROM points ORDER BY rowid",
                                  self._db)
        ints = [c for c in frame.columns if c in _INT]
        return frame.astype(dict.fromkeys(ints, "Int64"))  # lbl points have no seed
