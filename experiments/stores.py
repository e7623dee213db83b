"""Committed exports of the sweep stores the renderers read, so they run from a clean clone.

    python experiments/stores.py export STORE [STORE...] [--out-dir experiments/results/stores]
                                        [--drop history,pareto] [--keep-history SWEEP,...]
    python experiments/stores.py materialise EXPORT --out STORE.sqlite

A sweep store (`fusion_dse.sweep.store`, SQLite) is git-ignored (``experiments/results/*.sqlite``):
it can be large and is written while a sweep runs. Its export, ``NAME.sql.gz``, is the store's
SQL dump (``sqlite3.Connection.iterdump``: the ``points`` and ``meta`` tables, every column and
blob), gzip'd with a zero timestamp so that the same store always gives the same bytes;
``--drop`` empties blob columns the renderers do not read, to keep the export small (a history
is about 85 bytes a plan: 2,000 plans x 300 points is 50 MB before gzip; only Fig. 5 reads
histories, no renderer reads ``plan`` or ``pareto``); ``--keep-history`` keeps the histories
of the named sweeps (Fig. 5's) with only the columns the budget figure reads (`BUDGET_COLUMNS`:
a few hundred kB for 36 runs of 5,000 plans), so the figure is drawn again from the export, and
empties every other history. Reading
an export rebuilds the store in a temporary file and reads it with the store's own reader, so a
renderer sees exactly the frame the store gives (types, NULLs, blobs), with no second parser.

`resolve(path)` is what the renderers call on each STORE argument: a store is returned as
is, an export is rebuilt (once per process) and the rebuilt store's path returned. Every export
written is recorded in the provenance record (`experiments/provenance.py`) with the cost-model
fingerprint of the points it holds.
"""

from __future__ import annotations

import argparse
import atexit
import gzip
import json
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["BUDGET_COLUMNS", "DROPPABLE", "EXPORT_DIR", "SUFFIX", "export", "is_export",
           "materialise", "resolve"]

ROOT = Path(__file__).resolve().parents[1]
EXPORT_DIR = ROOT / "experiments" / "results" / "stores"
SUFFIX = ".sql.gz"


def is_export(path: str | Path) -> bool:
    """True when `path` names an export (``.sql.gz``) rather than a store."""
    return str(path).endswith(SUFFIX)


DROPPABLE = ("history", "pareto", "plan")
"""Blob columns `export` may empty (``summary`` and ``config`` are read by every renderer)."""


BUDGET_COLUMNS = ("evaluation", "best_dram_bytes_fuseable")
"""The history columns the budget figure (`fusion_dse.sweep.plots.budget_data`) reads."""


def export(store: str | Path, out: str | Path | None = None,
           drop: Sequence[str] = (), keep_history: Sequence[str] = ()) -> Path:
    """Write the SQL dump of `store` (gzip'd, reproducible) to `out` (default:
    ``EXPORT_DIR/<store name>.sql.gz``), with the blob columns `drop` emptied (NULL); returns
    the path. `keep_history` names sweeps whose histories are kept (trimmed to
    `BUDGET_COLUMNS`) while every other point's history is emptied.

    Raises:
        FileNotFoundError: `store` does not exist.
        ValueError: a column of `drop` is not one of `DROPPABLE`.
    """
    store = Path(store)
    if not store.is_file():
        raise FileNotFoundError(f"{store}: no such sweep store")
    bad = sorted(set(drop) - set(DROPPABLE))
    if bad:
        raise ValueError(f"--drop {','.join(bad)}: only {', '.join(DROPPABLE)} may be dropped")
    target = Path(out) if out else EXPORT_DIR / (store.stem + SUFFIX)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    source = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    con = sqlite3.connect(":memory:")
    try:
        source.backup(con)  # a consistent copy, even while a sweep writes the store
        if drop:
            con.execute(f"UPDATE points SET {', '.join(f'{c} = NULL' for c in drop)}")
            con.commit()
        if keep_history:
            _keep_histories(con, keep_history)
        with open(tmp, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9,
                              mtime=0) as gz:
            for line in con.iterdump():
                gz.write(line.encode() + b"\n")
    finally:
        source.close()
        con.close()
    tmp.replace(target)
    return target


def _keep_histories(con: sqlite3.Connection, sweeps: Sequence[str]) -> None:
    """Empty the history of every point outside `sweeps` and trim the others' to
    `BUDGET_COLUMNS` (the blob's ``orient="split"`` JSON, rows in order)."""
    marks = ", ".join("?" * len(sweeps))
    con.execute(f"UPDATE points SET history = NULL WHERE sweep NOT IN ({marks})", tuple(sweeps))
    rows = con.execute(f"SELECT rowid, history FROM points WHERE sweep IN ({marks}) "
                       "AND history IS NOT NULL", tuple(sweeps)).fetchall()
    if not rows:
        raise ValueError(f"--keep-history {','.join(sweeps)}: no point of these sweeps has a "
                         "history")
    for rowid, blob in rows:
        table = json.loads(blob)
        index = [table["columns"].index(c) for c in BUDGET_COLUMNS]
        trimmed = {"columns": list(BUDGET_COLUMNS),
                   "data": [[r[i] for i in index] for r in table["data"]]}
        con.execute("UPDATE points SET history = ? WHERE rowid = ?",
                    (json.dumps(trimmed, separators=(",", ":")), rowid))
    con.commit()


def materialise(path: str | Path, out: str | Path) -> Path:
    """Rebuild the store an export holds into the new SQLite file `out`; returns `out`."""
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} exists")
    with gzip.open(path, "rt") as f:
        script = f.read()
    con = sqlite3.connect(out)
    try:
        con.executescript(script)
    finally:
        con.close()
    return out


_REBUILT: dict[Path, Path] = {}


def _cleanup(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def resolve(path: str | Path) -> Path:
    """A store's path for `path`: a store itself, or the store an export holds (rebuilt in a
    temporary folder once per process, removed at exit).

    Raises:
        FileNotFoundError: `path` does not exist.
    """
    path = Path(path)
    if not is_export(path):
        return path
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such store export")
    key = path.resolve()
    if key not in _REBUILT:
        folder = tempfile.mkdtemp(prefix="fusion-dse-export-")
        atexit.register(_cleanup, folder)
        _REBUILT[key] = materialise(path, Path(folder) / (path.name[:-len(SUFFIX)] + ".sqlite"))
    return _REBUILT[key]


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write STORE.sql.gz exports and record their provenance")
    e.add_argument("stores", nargs="+", metavar="STORE")
    e.add_argument("--out-dir", type=Path, default=EXPORT_DIR)
    e.add_argument("--drop", default="", help=f"blob columns to empty: {', '.join(DROPPABLE)}")
    e.add_argument("--keep-history", default="", metavar="SWEEP,...",
                   help="sweeps whose histories are kept, trimmed to the budget figure's "
                        "columns (every other history is emptied)")
    m = sub.add_parser("materialise", help="rebuild the store an export holds")
    m.add_argument("export", metavar="EXPORT")
    m.add_argument("--out", required=True, help="the new store (SQLite)")
    args = p.parse_args(argv)
    try:
        if args.command == "materialise":
            print(materialise(args.export, args.out))
            return 0
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import provenance

        command = ["python", "experiments/stores.py", *(sys.argv[1:] if argv is None else argv)]
        for store in args.stores:
            written = export(store, args.out_dir / (Path(store).stem + SUFFIX),
                             [c.strip() for c in args.drop.split(",") if c.strip()],
                             [c.strip() for c in args.keep_history.split(",") if c.strip()])
            provenance.record_outputs([written], argv=command, inputs=[store],
                                      rows=provenance.store_rows(store))
            print(f"{store} -> {written} ({written.stat().st_size:,} bytes)")
    except (OSError, ValueError, KeyError, sqlite3.Error) as err:
        print(f"stores: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
