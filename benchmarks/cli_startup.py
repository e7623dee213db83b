"""How fast the command line answers: wall time and peak memory of short commands.

Prints, for each command, the median wall time and the median peak resident memory of
``--runs`` fresh runs of ``python -m fusion_dse ARGS`` (what the ``fusion-dse`` script runs),
each in its own process with the output thrown away:

* ``models`` (the zoo table, read from the zoo catalog),
* a bad argument (``inspect nosuch``: an unknown model),
* a bad hardware preset for a real run (``optimize resnet18 --hw nosuch``),
* ``--help`` and ``optimize --help``,
* ``--version``.

The load average before and after is printed with them: the machine may be shared, and a
figure taken under load says so. ``--root`` runs another checkout of the repository (the
process starts in it, so its packages are imported), e.g. a ``git worktree`` of an older
commit, to measure a before and an after with the same interpreter.

Usage: .venv/bin/python benchmarks/cli_startup.py [--runs 5] [--root DIR] [--only models,...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS: dict[str, list[str]] = {
    "models": ["models"],
    "bad-argument": ["inspect", "nosuch"],
    "bad-hw": ["optimize", "resnet18", "--hw", "nosuch"],
    "help": ["--help"],
    "optimize-help": ["optimize", "--help"],
    "version": ["--version"],
}


def run_once(args: list[str], root: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MiB, exit status) of one ``python -m fusion_dse ARGS``."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "fusion_dse", *args], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, proc.returncode  # ru_maxrss: KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per command (median)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="checkout to run (default: this one)")
    parser.add_argument("--only", help="comma list of commands: " + ", ".join(COMMANDS))
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(COMMANDS)
    print(f"{os.cpu_count()} cores; load average {_load()} before; {args.runs} runs each; "
          f"python -m fusion_dse in {args.root}")
    print(f"{'command':<45} {'wall s (median)':>16} {'min-max':>13} {'peak RSS MiB':>13} "
          f"{'exit':>5}")
    for name in names:
        argv = COMMANDS[name]
        runs = [run_once(argv, args.root) for _ in range(args.runs)]
        walls = [r[0] for r in runs]
        shown = "fusion-dse " + " ".join(argv)
        print(f"{shown:<45} {statistics.median(walls):>16.2f} "
              f"{min(walls):>6.2f}-{max(walls):<6.2f} "
              f"{statistics.median(r[1] for r in runs):>13.0f} "
              f"{','.join(sorted({str(r[2]) for r in runs})):>5}")
    print(f"load average {_load()} after")


def _load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


if __name__ == "__main__":
    main()
