"""The bad-input corpus: its table (``cases.tsv``), its files and how one case is run.

Every case is one command line that must end in one line on stderr, exit status 2, no
traceback and no file left behind, within `TIME_LIMIT_S` seconds and (in a subprocess)
`MEMORY_LIMIT_BYTES` of address space. ``cases.tsv`` has four tab-separated columns:

* ``id``: the case's name;
* ``tier``: ``in`` runs in-process through `fusion_dse.cli.main` in the default test tier,
  ``sub`` in a subprocess with the limits (the resource-exhaustion cases); the slow tier runs
  every case in a subprocess;
* ``expected``: the first words of the stderr line;
* ``argv``: the arguments, split like a shell would, with ``{F}`` the committed files
  (``files/``, written by ``make_files.py``), ``{G}`` the generated ones (`generate_files`),
  ``{T}`` the case's own folder (its working directory) and ``{LONG}`` a 300-character name.
"""

from __future__ import annotations

import contextlib
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
TIME_LIMIT_S = 60
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
        """The command line with its placeholders filled in."""
        text = (self.argv.replace("{F}", str(FILES)).replace("{G}", str(generated))
                .replace("{T}", str(folder)).replace("{LONG}", LONG))
        return shlex.split(text)


@dataclass(frozen=True)
class Outcome:
    """What a case did: exit status, stdout, stderr, seconds and peak memory (KiB, subprocess
    only)."""

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
    100 MB written)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "deep.yaml").write_text("a: " + "[" * 20_000 + "]" * 20_000 + "\n")
    (folder / "deep-flow.yaml").write_text("{a: " * 20_000 + "1" + "}" * 20_000 + "\n")
    (folder / "deep-plan.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "deep-plan-objects.json").write_text('{"groups":' * 100_000 + "1" + "}" * 100_000)
    (folder / "deep-graph.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    fifo = folder / "fifo.json"
    if not fifo.exists():
        os.mkfifo(fifo)
    for name, size in (("huge-plan.json", 65 * 1024**2), ("huge-hw.yaml", 2 * 1024**2),
                       ("huge-graph.json", 257 * 1024**2)):
        with open(folder / name, "wb") as f:
            f.truncate(size)
    return folder


def prepare_folder(folder: Path) -> None:
    """The case's working directory: an existing folder (with a file no run writes), an
    existing file, and the model modules the ``module:callable`` cases import."""
    (folder / "existing-dir").mkdir(parents=True, exist_ok=True)
    (folder / "existing-dir" / "notes.txt").write_text("mine\n")
    (folder / "existing-file").write_text("mine\n")
    for name in MODULES:
        shutil.copy(FILES / name, folder / name)


def snapshot(folder: Path) -> set[str]:
    """Every path under `folder` (caches of imported modules excepted)."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if "__pycache__" not in p.parts}


def run_in_process(args: list[str], folder: Path) -> Outcome:
    """Run ``fusion_dse.cli.main(args)`` in `folder`, capturing its output."""
    from fusion_dse.cli import main

    out, err = io.StringIO(), io.StringIO()
    cwd, path = os.getcwd(), list(sys.path)
    start = time.perf_counter()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(cwd)
        sys.path[:] = path
    return Outcome(code, out.getvalue(), err.getvalue(), time.perf_counter() - start)


def subprocess_env() -> dict[str, str]:
    """The environment of a subprocess case: this checkout first on the Python path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def run_subprocess(args: list[str], folder: Path) -> Outcome:
    """Run ``python -m fusion_dse`` with `args` in `folder` under the time and memory limits;
    the peak resident memory comes from wait4."""
    env = subprocess_env()
    start = time.perf_counter()
    with open(folder / ".stdout", "w+b") as out, open(folder / ".stderr", "w+b") as err:
        proc = subprocess.Popen([sys.executable, "-m", "fusion_dse", *args], cwd=folder,
                                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                preexec_fn=_limit_memory)
        timer = threading.Timer(TIME_LIMIT_S, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    (folder / ".stdout").unlink()
    (folder / ".stderr").unlink()
    return Outcome(proc.returncode, stdout, stderr, time.perf_counter() - start,
                   usage.ru_maxrss)


def masked(line: str, generated: Path, folder: Path) -> str:
    """`line` with the corpus paths written as the table's placeholders."""
    for path, mark in ((FILES, "{F}"), (generated, "{G}"), (folder, "{T}")):
        line = line.replace(str(path), mark)
    return line.replace(LONG, "{LONG}").replace(LONG[:40], "{LONG40}")
