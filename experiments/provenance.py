"""The provenance record of the committed results: which cost models made each one.

    python experiments/provenance.py check [--strict]        # what the test checks; exit 1 if not
    python experiments/provenance.py status                  # every result, current or stale
    python experiments/provenance.py record PATH... --command "HOW IT WAS MADE" [--inputs X...]
                                            [--no-hash] [--scope cnn|all] [--dram-only]
        (inputs that are stores or exports give the fingerprint of their points, as the
        renderers do; without any, the files are taken as made now by the current code)
    python experiments/provenance.py mark-stale --reason "WHY" [PATH...]

One file, `RECORD` (``experiments/results/provenance.json``), maps every committed result (the
files under ``experiments/results/``, ``docs/images/`` and the docs of `DOCS` whose figures come
from runs) to::

    {"fingerprint": "<digest of the cost models' figures the result was made with, or null>",
     "scope": "cnn" | "all" | "cnn/dram" | "all/dram",
         # the fingerprint scope its networks and figures need (simulator.fingerprint.SCOPES:
         # /dram for results that show DRAM, buffer use and fit only, not cycles or energy)
     "version": "<tool version>", "command": "<the command that wrote it>",
     "date": "<UTC time it was recorded>", "data_finished": "<UTC time of its newest point>",
     "inputs": ["<stores or exports it was rendered from>"],
     "sha256": "<the file's content, for files a script writes>",
     "unknown": "<why the fingerprint is null>",                # only then
     "stale": "<why it is known not to match the code>"}        # only when marked stale

and keeps, under ``"fingerprints"``, each fingerprint a result names: tool version, scopes,
part digests, the reference totals (`simulator.fingerprint`) and the cost-model source digests
(``fusion_dse.sweep.store.source_digests``) seen with it, so points computed before a
refactor that left the figures alone are still recognised.

The renderers (``render_tables.py``, ``render_workloads.py``, ``orderings.py --out``,
``stores.py export``) call `record_outputs` for every file they write inside the repository.
The fingerprint of a result is that of the code that computed its *points*, not of the
renderer: a point's keyed configuration (the store's ``config`` column) holds the digest of the
cost-model source it ran with; when that is the current source, the result gets the current
fingerprint; when it is a source recorded earlier, that source's fingerprint; otherwise the
fingerprint is unknown (null, with the reason). A renderer never marks anything stale: a result
whose fingerprint is not the code's fails the check until it is regenerated or someone marks it
stale, with the reason, on purpose.

`check` (tests/experiments/test_provenance.py) fails for a recorded file that is missing or
whose content differs from its record, a result file without a record, and a result whose
fingerprint is not the code's (in its scope) unless it is marked stale. After the cost models
change: regenerate (experiments/README.md, "Regenerating the committed results") and the renderers
re-record, or mark what is not regenerated stale in one command (``mark-stale``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["DOCS", "RECORD", "ROOT", "check", "current", "data_fingerprint", "expected",
           "load_record", "mark_stale", "record_outputs", "scope_of", "store_rows"]

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "experiments" / "results" / "provenance.json"
RESULT_DIRS = ("experiments/results", "docs/images")
"""Every file under these (but the stores and the record itself) is a committed result."""
DOCS = ("docs/graph-stages.md", "docs/hardware.md", "docs/workloads.md")
"""Docs whose tables hold figures of runs (recorded without a content digest: prose changes)."""
_NOT_RESULTS = (".sqlite", ".sqlite-wal", ".sqlite-shm")


def current(version: str | None = None):  # noqa: ANN201 - simulator.fingerprint.Fingerprint
    """The fingerprint of the cost models as the code is now (computed once per process)."""
    from simulator.fingerprint import fingerprint

    if version is None:
        import fusion_dse

        version = fusion_dse.__version__
    return fingerprint(version)


def _source_digest() -> str:
    from fusion_dse.sweep.store import source_digests

    return source_digests()["cost_model"]


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the record -----------------------------------------------------------------------------


def load_record(path: Path = RECORD) -> dict[str, Any]:
    """The record (an empty one when `path` does not exist)."""
    if not path.exists():
        return {"fingerprints": {}, "results": {}}
    return json.loads(path.read_text())


def _known(record: dict[str, Any], digest: str | None) -> dict[str, Any] | None:
    """The recorded fingerprint that `digest` is (in any scope) of, or None."""
    for d, f in record["fingerprints"].items():
        if digest == d or digest in f.get("scopes", {}).values():
            return f
    return None


def _save(record: dict[str, Any], path: Path) -> None:
    used = {e["fingerprint"] for e in record["results"].values() if e.get("fingerprint")}
    record["fingerprints"] = {d: f for d, f in sorted(record["fingerprints"].items())
                              if used & {d, *f.get("scopes", {}).values()}}
    record["results"] = dict(sorted(record["results"].items()))
    about = "experiments/README.md (Provenance); experiments/provenance.py"
    text = json.dumps({"about": about, **record}, indent=1, sort_keys=False) + "\n"
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]",  # a list of numbers on one line
                  lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


TOTALS = ("dram_bytes", "mbu_bytes", "cycles", "energy_pj")
"""The columns of a recorded fingerprint's reference totals."""


def _totals(fp: Any) -> dict[str, list[Any]]:  # noqa: ANN401
    return {k: [v[c] for c in TOTALS] for k, v in sorted(fp.totals.items())}


def _note_current(record: dict[str, Any], fp: Any, source: str | None) -> None:  # noqa: ANN401
    """Add the current fingerprint (and the cost-model source seen with it) to `record`."""
    entry = record["fingerprints"].setdefault(fp.digest, {
        "version": fp.version, "scopes": dict(fp.scopes), "parts": dict(sorted(fp.parts.items())),
        "totals_columns": list(TOTALS), "totals": _totals(fp), "sources": []})
    entry["scopes"] = {**entry["scopes"], **fp.scopes}  # scopes added since it was recorded
    if source and source not in entry["sources"]:
        entry["sources"] = sorted([*entry["sources"], source])


# --- which fingerprint a result's points were made with --------------------------------------


def store_rows(store: str | Path):  # noqa: ANN201 - pandas.DataFrame
    """The ``model`` and ``config`` columns of a store's done points (an export is rebuilt)."""
    import sqlite3

    import pandas as pd
    import stores

    path = stores.resolve(store)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return pd.read_sql("SELECT model, config, finished FROM points WHERE status = 'done'",
                           con)


def scope_of(models: Iterable[str]) -> str:
    """``cnn`` when every model is a CNN of the zoo, else ``all``."""
    from simulator.workload.loader import resolve_zoo_name
    from simulator.workload.zoo import get_entry

    for model in set(models):
        name = resolve_zoo_name(str(model).partition("@")[0])
        if name is None or get_entry(name).kind != "cnn":
            return "all"
    return "cnn"


def data_fingerprint(rows: Any, record: dict[str, Any], fp: Any,  # noqa: ANN401
                     source: str) -> tuple[str | None, str | None, str]:
    """(fingerprint, reason it is unknown, tool version) of the points `rows` (``config``
    column: their keyed configurations) against the current fingerprint `fp` and the current
    cost-model source digest `source`."""
    configs = [json.loads(c) for c in rows["config"] if isinstance(c, str) and c]
    if len(configs) < len(rows):
        return None, "points without their keyed configuration (no cost-model digest)", fp.version
    versions = sorted({str(c.get("version")) for c in configs})
    version = ", ".join(versions) or fp.version
    recorded = {c["fingerprint"] for c in configs if c.get("fingerprint")}
    if recorded and len(recorded) == len(configs) or len(recorded) > 1:
        if len(recorded) == 1:
            return recorded.pop(), None, version
        return None, f"points made with {len(recorded)} cost-model fingerprints", version
    sources = {c.get("cost_model") for c in configs}
    known = {src: d for d, f in record["fingerprints"].items() for src in f.get("sources", [])}
    known[source] = fp.digest
    found = {known.get(s) for s in sources}
    if None in found:
        missing = sorted(str(s) for s in sources if s not in known)
        return None, (f"points made with cost-model source {', '.join(missing)}, whose "
                      f"fingerprint is not recorded"), version
    if len(found) > 1:
        return None, f"points made with {len(found)} cost-model fingerprints", version
    return found.pop(), None, version


# --- recording --------------------------------------------------------------------------------


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def record_outputs(paths: Iterable[str | Path], *, argv: Sequence[str],
                   inputs: Iterable[str | Path] = (), rows: Any = None,  # noqa: ANN401
                   scope: str | None = None, dram_only: bool = False, hashed: bool = True,
                   record_path: Path = RECORD, root: Path = ROOT, fp: Any = None,  # noqa: ANN401
                   quiet: bool = False) -> list[str]:
    """Record `paths` (those inside `root`; others are left out) as made by the command `argv`
    from `inputs`.

    Args:
        rows: The points the outputs were rendered from (columns ``model``, ``config``,
            optionally ``finished``): their fingerprint and scope are recorded. None: the
            outputs were computed now, by the current code (scope ``all`` unless given).
        scope: ``cnn`` or ``all`` (default: from the rows' models).
        dram_only: The outputs show only figures of the ``/dram`` scopes (DRAM, buffer use,
            fit: `simulator.fingerprint.DRAM_KINDS`), so a change of the timing or energy
            model leaves them current: the scope recorded is ``<scope>/dram``.
        hashed: Record each file's SHA-256 (files a script writes whole).
        fp: The current fingerprint (default: `current`).

    Returns:
        The paths recorded, relative to `root`.
    """
    names = [n for n in (_relative(Path(p), root) for p in paths) if n is not None]
    if not names:
        return []
    fp = fp or current()
    source = _source_digest()
    record = load_record(record_path)
    _note_current(record, fp, source)
    reason = None
    finished = None
    if rows is None:
        digest, version = fp.digest, fp.version
        scope = scope or "all"
    else:
        digest, reason, version = data_fingerprint(rows, record, fp, source)
        scope = scope or scope_of(rows["model"])
        if "finished" in rows and len(rows):
            finished = dt.datetime.fromtimestamp(float(rows["finished"].max()), dt.UTC)
            finished = finished.replace(microsecond=0).isoformat()
    if dram_only and not scope.endswith("/dram"):
        scope = f"{scope}/dram"
    if digest is not None and scope != "all":
        digest = record["fingerprints"].get(digest, {}).get("scopes", {}).get(scope) \
            if digest != fp.digest else fp.scopes[scope]
        if digest is None:
            reason = f"the {scope} scope of the points' fingerprint is not recorded"
    command = shlex.join(str(a) for a in argv)
    for name in names:
        entry: dict[str, Any] = {"fingerprint": digest, "scope": scope, "version": version,
                                 "command": command, "date": _now()}
        if finished:
            entry["data_finished"] = finished
        entry["inputs"] = [_relative(Path(i), root) or str(i) for i in inputs]
        if hashed:
            entry["sha256"] = _sha256(root / name)
        if reason:
            entry["unknown"] = reason
        record["results"][name] = entry
    if not quiet and (reason or digest != fp.scopes[scope]):
        print(f"provenance: {', '.join(names)}: "
              f"{reason or f'made with fingerprint {digest}, the code has {fp.scopes[scope]}'}"
              f"; the check fails until they are regenerated or marked stale "
              f"(python experiments/provenance.py mark-stale --reason ...)", file=sys.stderr)
    _save(record, record_path)
    return names


def mark_stale(reason: str, paths: Iterable[str] = (), record_path: Path = RECORD,
               fp: Any = None) -> list[str]:  # noqa: ANN401
    """Mark `paths` (default: every result whose fingerprint is not the code's) stale."""
    record = load_record(record_path)
    fp = fp or current()
    chosen = list(paths) or [n for n, e in record["results"].items()
                             if not e.get("stale") and e.get("fingerprint")
                             != fp.scopes[e.get("scope", "all")]]
    for name in chosen:
        if name not in record["results"]:
            raise KeyError(f"{name}: not in the record")
        record["results"][name]["stale"] = reason
    _save(record, record_path)
    return chosen


# --- checking ---------------------------------------------------------------------------------


def expected(root: Path = ROOT) -> list[str]:
    """Every committed result that must have a record (files of `RESULT_DIRS`, `DOCS`)."""
    found = [p.relative_to(root).as_posix() for d in RESULT_DIRS for p in (root / d).rglob("*")
             if p.is_file() and not p.name.startswith(".") and p.name != RECORD.name
             and not p.name.endswith(_NOT_RESULTS)]
    return sorted({*found, *(d for d in DOCS if (root / d).exists())})


def _what_changed(record: dict[str, Any], digest: str | None, fp: Any) -> str:  # noqa: ANN401
    old = _known(record, digest)
    if not old:
        return ""
    parts = [k for k, v in fp.parts.items() if old.get("parts", {}).get(k) != v]
    before = old.get("totals", {})
    moved = [f"{k} {name} {was:,} -> {now:,}" for k, v in _totals(fp).items() if k in before
             for name, was, now in zip(TOTALS, before[k], v, strict=True) if was != now]
    text = f": parts changed: {', '.join(parts) or 'none'}"
    if moved:
        text += f"; {len(moved)} reference totals moved, e.g. {moved[0]}"
    return text


def check(record_path: Path = RECORD, root: Path = ROOT, fp: Any = None,  # noqa: ANN401
          strict: bool = False) -> list[str]:
    """The problems of the record against the files and the code (empty: all is well).

    A problem: a recorded file missing or changed since recorded (SHA-256), a result file not
    recorded, a result whose fingerprint (in its scope) is not the code's and that is not
    marked stale; with `strict`, every stale result too."""
    record = load_record(record_path)
    fp = fp or current()
    problems = []
    mismatched: dict[str, list[str]] = {}
    for name, e in record["results"].items():
        path = root / name
        if not path.exists():
            problems.append(f"{name}: recorded but missing")
            continue
        if e.get("sha256") and _sha256(path) != e["sha256"]:
            problems.append(f"{name}: changed since it was recorded; re-run its command: "
                            f"{e['command']}")
        want = fp.scopes[e.get("scope", "all")]
        if e.get("stale"):
            if strict:
                problems.append(f"{name}: stale: {e['stale']}")
        elif e.get("fingerprint") != want:
            problems.append(f"{name}: made with cost-model fingerprint {e.get('fingerprint')} "
                            f"({e.get('scope', 'all')} scope), the code's is {want}")
            mismatched.setdefault(e.get("fingerprint") or "", []).append(name)
    for digest in mismatched:
        problems.append(
            f"fingerprint {digest or 'unknown'} -> {fp.digest}"
            f"{_what_changed(record, digest, fp)}; regenerate them (experiments/README.md; "
            f"python experiments/provenance.py status lists each command) or mark them "
            f"stale (python experiments/provenance.py mark-stale --reason ...)")
    for name in expected(root):
        if name not in record["results"]:
            problems.append(f"{name}: a committed result without a provenance record "
                            f"(python experiments/provenance.py record {name} --command ...)")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="exit 1 when a result does not match the code")
    c.add_argument("--strict", action="store_true", help="stale results fail too")
    sub.add_parser("status", help="every result: current or stale")
    r = sub.add_parser("record", help="record files made now by the current code")
    r.add_argument("paths", nargs="+", metavar="PATH")
    r.add_argument("--command", required=True, dest="how", help="the command that made them")
    r.add_argument("--inputs", nargs="*", default=[])
    r.add_argument("--scope", choices=("cnn", "all"),
                   help="default: from the input stores' models, else all")
    r.add_argument("--dram-only", action="store_true",
                   help="the files show DRAM, buffer use and fit only (not cycles or energy): "
                        "a change of the timing or energy model leaves them current")
    r.add_argument("--no-hash", action="store_true", help="docs edited by hand: no SHA-256")
    m = sub.add_parser("mark-stale", help="mark results stale (default: every mismatch)")
    m.add_argument("paths", nargs="*", metavar="PATH")
    m.add_argument("--reason", required=True)
    args = p.parse_args(argv)
    if args.command == "record":
        missing = [x for x in args.paths if not Path(x).exists()]
        if missing:
            print(f"provenance: no such file: {', '.join(missing)}", file=sys.stderr)
            return 2
        sources = [i for i in args.inputs if str(i).endswith((".sqlite", ".sql.gz"))]
        rows = None
        if sources:
            import pandas as pd

            rows = pd.concat([store_rows(i) for i in sources], ignore_index=True)
        done = record_outputs(args.paths, argv=shlex.split(args.how), inputs=args.inputs,
                              rows=rows, scope=args.scope, dram_only=args.dram_only,
                              hashed=not args.no_hash)
        entries = load_record()["results"]
        for name in done:
            print(f"recorded {name}: fingerprint {entries[name]['fingerprint']} "
                  f"({entries[name]['scope']} scope)")
        return 0
    if args.command == "mark-stale":
        for name in mark_stale(args.reason, args.paths):
            print(f"stale: {name}")
        return 0
    fp = current()
    if args.command == "status":
        record = load_record()
        for name, e in record["results"].items():
            state = (f"stale ({e['stale']})" if e.get("stale") else "current"
                     if e.get("fingerprint") == fp.scopes[e.get("scope", "all")]
                     else "MISMATCH")
            print(f"{name}: {state}\n    {e['command']}")
        print(f"code: fingerprint {fp.digest} (cnn {fp.scopes['cnn']}), tool {fp.version}, "
              f"{fp.seconds:.1f} s")
        return 0
    problems = check(strict=args.strict)
    for line in problems:
        print(line)
    print(f"{len(problems)} problem(s); code fingerprint {fp.digest} (cnn {fp.scopes['cnn']})",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
