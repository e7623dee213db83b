"""The bad-input corpus: its table (``cases.tsv``), its files and how one case is run.

Every case is one command line that must end in one line on stderr, exit status 2, no
traceback and no file left behind, within `TIME_LIMIT_S` seconds of CPU time and (in a
subprocess) `MEMORY_LIMIT_BYTES` of address space. ``cases.tsv`` has four tab-separated
columns:

* ``id``: the case's name;
* ``tier``: ``in`` runs in-process through `fusion_dse.cli.main` in the default test tier,
  ``sub`` in a subprocess with the limits (the resource-exhaustion cases); the slow tier runs
  every case in a subprocess;
* ``expected``: the first words of the stderr line;
* ``argv``: the arguments, split like a shell would, with ``{F}`` the committed files
  (``files/``, written by ``make_files.py``), ``{G}`` the generated ones (`generate_files`),
  ``{T}`` the case's own folder (its working directory), ``{LONG}`` a 300-character name,
  ``{HUGE}`` a 100,000-character value, ``{ESC}`` the escape character and ``{BIDI}`` a
  right-to-left override (U+202E); a last word ``>PATH`` sends stdout to PATH (``>/dev/full``:
  a full disk).

Nothing under the case's folder may be left behind or changed: every file there (the sweep
stores of `STORES` among them, copied in by `prepare_folder`) is compared byte for byte, and
the stderr line must be at most `MAX_LINE` characters, all printable.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import resource
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = HERE / "files"
TABLE = HERE / "cases.tsv"
LONG = "m" * 300
HUGE = "a" * 100_000  # under Linux's 128 KiB limit on one argument of a subprocess
MAX_LINE = 1_100
"""Longest stderr line a case may print (`simulator.limits.MAX_ERROR_CHARS` and the
prefix)."""
TIME_LIMIT_S = 60
"""CPU seconds a case may take: the work it does, the same on an idle or a saturated machine
(a blow-up takes minutes of it). A subprocess is stopped by the kernel past it (RLIMIT_CPU) and
killed after `HANG_LIMIT_S` seconds of wall-clock time, for a case that waits instead of
working (a FIFO without a writer)."""
HANG_LIMIT_S = 600
MEMORY_LIMIT_BYTES = 4 * 1024**3
"""Address-space limit of a subprocess case. Importing torch, scipy and matplotlib maps much
more virtual memory than it touches: ``fusion-dse optimize resnet18 --budget 5`` fails to load
scipy under 1 GiB and runs under 1.5 GiB (measured); 4 GiB leaves room for the cases that
import a zoo network at its default size."""
MODULES = ("hardening_exit7.py", "hardening_exit_on_import.py", "hardening_bad_factory.py")


@dataclass(frozen=True)
class Case:
    """One row of ``cases.tsv``."""

    id: str
    tier: str
    expected: str
    argv: str

    def args(self, generated: Path, folder: Path) -> list[str]:
        """The command line with its placeholders filled in (without a ``>PATH`` word)."""
        text = (self.argv.replace("{F}", str(FILES)).replace("{G}", str(generated))
                .replace("{T}", str(folder)))
        words = shlex.split(text)
        if words and words[-1].startswith(">"):
            words.pop()
        return [w.replace("{LONG}", LONG).replace("{HUGE}", HUGE).replace("{ESC}", "\x1b")
                .replace("{BIDI}", "\u202e") for w in words]

    @property
    def needs_stores(self) -> bool:
        """Whether the case reads the stores `prepare_folder` copies into ``{T}/stores``."""
        return "{T}/stores" in self.argv

    def stdout(self, generated: Path, folder: Path) -> str | None:
        """Where the case sends stdout (its last word ``>PATH``), or None (captured)."""
        words = shlex.split(self.argv.replace("{G}", str(generated)).replace("{T}",
                                                                              str(folder)))
        return words[-1][1:] if words and words[-1].startswith(">") else None


@dataclass(frozen=True)
class Outcome:
    """What a case did: exit status, stdout, stderr, CPU seconds and peak memory (KiB,
    subprocess only)."""

    code: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_kib: int | None = None


def load_cases() -> list[Case]:
    """The rows of ``cases.tsv`` (lines starting with # are comments)."""
    cases = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        case_id, tier, expected, argv = (line.split("\t") + [""])[:4]
        cases.append(Case(case_id, tier, expected, argv))
    return cases


def generate_files(folder: Path) -> Path:
    """Write the large or special corpus files into `folder` (cheap: sparse files, no
    100 MB written), and the sweep stores (`make_stores`)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "deep-spec.yaml").write_text("axes: " + "[" * 20_000 + "]" * 20_000 + "\n")
    (folder / "huge-spec.yaml").write_text("axes: {models: [resnet18]}\n# " + "x" * (2 * 1024**2)
                                           + "\n")
    (folder / "long-models-spec.yaml").write_text(
        "axes:\n  models: [" + ", ".join(f"m{k}" for k in range(12_000)) + "]\n")
    make_stores(folder / "stores")
    (folder / "deep.yaml").write_text("a: " + "[" * 20_000 + "]" * 20_000 + "\n")
    (folder / "deep-flow.yaml").write_text("{a: " * 20_000 + "1" + "}" * 20_000 + "\n")
    (folder / "deep-plan.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "deep-plan-objects.json").write_text('{"groups":' * 100_000 + "1" + "}" * 100_000)
    (folder / "deep-graph.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    for name in ("fifo.json", "fifo.yaml", "fifo.sqlite"):
        if not (folder / name).exists():
            os.mkfifo(folder / name)
    for name, size in (("huge-plan.json", 65 * 1024**2), ("huge-hw.yaml", 2 * 1024**2),
                       ("huge-graph.json", 257 * 1024**2)):
        with open(folder / name, "wb") as f:
            f.truncate(size)
    return folder


STORES = ("ours.sqlite", "foreign-tables.sqlite", "foreign-points.sqlite",
          "missing-columns.sqlite", "no-meta.sqlite", "no-key.sqlite", "newer-schema.sqlite",
          "newer-tool.sqlite", "bad-tool.sqlite", "bad-schema.sqlite", "corrupt.sqlite",
          "truncated.sqlite", "not-sqlite.sqlite", "export.csv")
"""The sweep stores every case finds in ``{T}/stores`` (and an earlier export beside them)."""


def make_stores(folder: Path) -> None:
    """Write the `STORES`: a store of this version (empty), databases that are no sweep store,
    stores of a newer schema or tool version, damaged and foreign files."""
    import sqlite3

    from fusion_dse.sweep.store import SweepStore

    folder.mkdir(parents=True, exist_ok=True)
    SweepStore(folder / "ours.sqlite").close()

    def db(name: str, *sql: str) -> None:
        path = folder / name
        path.unlink(missing_ok=True)
        con = sqlite3.connect(path)
        for statement in sql:
            con.execute(statement)
        con.commit()
        con.close()

    def ours(name: str, *sql: str) -> None:
        path = folder / name
        shutil.copy(folder / "ours.sqlite", path)
        con = sqlite3.connect(path)
        for statement in sql:
            con.execute(statement)
        con.commit()
        con.execute("PRAGMA journal_mode=DELETE")
        con.close()

    db("foreign-tables.sqlite", "CREATE TABLE customers (id INTEGER, name TEXT)",
       "INSERT INTO customers VALUES (1, 'ada')")
    db("foreign-points.sqlite", "CREATE TABLE points (x REAL, y REAL)",
       "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)",
       "INSERT INTO meta VALUES ('schema_version', '1')", "INSERT INTO points VALUES (1, 2)")
    db("missing-columns.sqlite", "CREATE TABLE points (key TEXT PRIMARY KEY, model TEXT)",
       "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)",
       "INSERT INTO meta VALUES ('schema_version', '1')")
    ours("no-meta.sqlite", "DROP TABLE meta")
    db("no-key.sqlite", "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)",
       "INSERT INTO meta VALUES ('schema_version', '1')")
    from fusion_dse.sweep.store import COLUMNS

    con = sqlite3.connect(folder / "no-key.sqlite")
    con.execute(f"CREATE TABLE points ({', '.join(COLUMNS)})")
    con.commit()
    con.close()
    ours("newer-schema.sqlite", "UPDATE meta SET value = '2' WHERE name = 'schema_version'")
    ours("newer-tool.sqlite", "UPDATE meta SET value = '99.0' WHERE name = 'tool_version'")
    ours("bad-tool.sqlite", "UPDATE meta SET value = 'banana' WHERE name = 'tool_version'")
    ours("bad-schema.sqlite", "UPDATE meta SET value = 'x' WHERE name = 'schema_version'")
    data = bytearray((folder / "ours.sqlite").read_bytes())
    data[100:] = b"\xde\xad" * ((len(data) - 100) // 2)
    (folder / "corrupt.sqlite").write_bytes(bytes(data))
    (folder / "truncated.sqlite").write_bytes(bytes(data[:100]))
    (folder / "not-sqlite.sqlite").write_text("name,dram\nresnet18,1\n")
    (folder / "export.csv").write_text("an earlier export\n")


def prepare_folder(folder: Path, generated: Path | None = None) -> None:
    """The case's working directory: an existing folder (with a file no run writes), an
    existing file, the model modules the ``module:callable`` cases import and (from
    `generated`) the sweep stores under ``stores/``."""
    (folder / "existing-dir").mkdir(parents=True, exist_ok=True)
    (folder / "existing-dir" / "notes.txt").write_text("mine\n")
    (folder / "existing-file").write_text("mine\n")
    for name in MODULES:
        shutil.copy(FILES / name, folder / name)
    if generated is not None:
        (folder / "stores").mkdir(exist_ok=True)
        for name in STORES:
            shutil.copy(generated / "stores" / name, folder / "stores" / name)


def snapshot(folder: Path) -> dict[str, str]:
    """Every path under `folder` with the SHA-256 of its bytes (a folder: ``dir``; caches of
    imported modules excepted), so that a case that changes a file fails like one that
    leaves a file behind."""
    found = {}
    for p in folder.rglob("*"):
        if "__pycache__" in p.parts:
            continue
        found[str(p.relative_to(folder))] = (
            "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "special")
    return found


def run_in_process(args: list[str], folder: Path, stdout: str | None = None) -> Outcome:
    """Run ``fusion_dse.cli.main(args)`` in `folder`, capturing its output (stdout into the
    file `stdout` when given, e.g. /dev/full)."""
    from fusion_dse.cli import main

    err = io.StringIO()
    cwd, path = os.getcwd(), list(sys.path)
    start = time.process_time()
    os.chdir(folder)
    with contextlib.ExitStack() as stack:
        out = open(stdout, "w", encoding="utf-8") if stdout else io.StringIO()  # noqa: SIM115
        stack.callback(_close_quietly, out)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(args)
                except SystemExit as exc:  # argparse
                    code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os.chdir(cwd)
            sys.path[:] = path
        text = out.getvalue() if isinstance(out, io.StringIO) else ""
    return Outcome(code, text, err.getvalue(), time.process_time() - start)


def _close_quietly(stream: io.IOBase) -> None:
    with contextlib.suppress(OSError):
        stream.close()


def subprocess_env() -> dict[str, str]:
    """The environment of a subprocess case: this checkout first on the Python path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}


def _limit_resources() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (TIME_LIMIT_S + 1, TIME_LIMIT_S + 2))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU dumps no core in the folder


def run_subprocess(args: list[str], folder: Path, stdout: str | None = None) -> Outcome:
    """Run ``python -m fusion_dse`` with `args` in `folder` under the time and memory limits
    (stdout into the file `stdout` when given); the peak resident memory comes from
    wait4."""
    env = subprocess_env()
    with open(stdout or folder / ".stdout", "w+b") as out, \
            open(folder / ".stderr", "w+b") as err:
        proc = subprocess.Popen([sys.executable, "-m", "fusion_dse", *args], cwd=folder,
                                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                preexec_fn=_limit_resources)
        timer = threading.Timer(HANG_LIMIT_S, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        text = ""
        if stdout is None:
            out.seek(0)
            text = out.read().decode(errors="replace")
    if stdout is None:
        (folder / ".stdout").unlink()
    (folder / ".stderr").unlink()
    return Outcome(proc.returncode, text, stderr, usage.ru_utime + usage.ru_stime,
                   usage.ru_maxrss)


def masked(line: str, generated: Path, folder: Path) -> str:
    """`line` with the corpus paths written as the table's placeholders."""
    for path, mark in ((FILES, "{F}"), (generated, "{G}"), (folder, "{T}")):
        line = line.replace(str(path), mark)
    return line.replace(LONG, "{LONG}").replace(LONG[:40], "{LONG40}").replace(
        HUGE[:40], "{HUGE40}")


def measure(ids: list[str]) -> None:
    """Run the cases `ids` (all when empty) in a subprocess under the limits and print each
    one's CPU seconds and peak resident memory, slowest and largest last:
    ``.venv/bin/python tests/hardening/corpus.py [ID ...]`` (``--from ID``: that case and
    every one after it)."""
    import tempfile

    cases = load_cases()
    if ids[:1] == ["--from"]:
        start = [c.id for c in cases].index(ids[1])
        cases = cases[start:]
    elif ids:
        cases = [c for c in cases if c.id in set(ids)]
    with tempfile.TemporaryDirectory() as top:
        generated = generate_files(Path(top) / "generated")
        rows = []
        for k, case in enumerate(cases):
            folder = Path(top) / f"case{k}"
            folder.mkdir()
            prepare_folder(folder, generated if case.needs_stores else None)
            outcome = run_subprocess(case.args(generated, folder), folder,
                                     case.stdout(generated, folder))
            rows.append((outcome.seconds, outcome.max_rss_kib or 0, outcome.code, case.id))
            print(f"{case.id}\t{outcome.code}\t{outcome.seconds:.2f} s CPU\t"
                  f"{(outcome.max_rss_kib or 0) / 1024:.0f} MiB", flush=True)
            shutil.rmtree(folder, ignore_errors=True)
    slowest, largest = max(rows), max(rows, key=lambda r: r[1])
    print(f"{len(rows)} cases; slowest {slowest[3]} {slowest[0]:.2f} s CPU; largest "
          f"{largest[3]} {largest[1] / 1024:.0f} MiB peak resident memory; exit statuses "
          f"{sorted({r[2] for r in rows})}")


if __name__ == "__main__":
    measure(sys.argv[1:])
