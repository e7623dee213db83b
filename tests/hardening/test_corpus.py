"""The bad-input corpus: every case ends in one stderr line and exit status 2, with no
traceback, nothing left behind and bounded time and memory (cases in ``cases.tsv``, the runner
in ``corpus.py``).

The default tier runs the ``in`` and ``slow`` cases in-process through `fusion_dse.cli.main`
(fast) and the ``sub`` cases in a subprocess under an address-space limit; the slow tier runs
every ``sub`` and ``slow`` case (the resource-exhaustion ones) in a subprocess.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("hardening_corpus",
                                               Path(__file__).with_name("corpus.py"))
corpus = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = corpus
_SPEC.loader.exec_module(corpus)

CASES = corpus.load_cases()
WAIT_S = 600
"""How long the Ctrl-C test waits for the next line of the run or for its end (a bound on
a hang, not on speed: a saturated machine slows the run many times over)."""
_IDS = [c.id for c in CASES]


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    return corpus.generate_files(tmp_path_factory.mktemp("generated"))


def _check(case, outcome, generated: Path, folder: Path, before: dict[str, str]) -> None:
    lines = outcome.stderr.strip().splitlines()
    shown = f"{case.id}: exit {outcome.code}, stderr {outcome.stderr[-2000:]!r}"
    assert outcome.code == 2, shown
    assert len(lines) == 1, shown
    assert "Traceback" not in outcome.stderr, shown
    assert corpus.masked(lines[0], generated, folder).startswith(case.expected), shown
    assert len(lines[0]) <= corpus.MAX_LINE and lines[0].isprintable(), shown
    assert outcome.stdout == "", shown
    after = corpus.snapshot(folder)
    assert after.keys() == before.keys(), f"{case.id} left files behind or removed some"
    assert after == before, f"{case.id} changed a file"
    assert outcome.seconds < corpus.TIME_LIMIT_S, shown


def _run(case, generated: Path, folder: Path, subprocess: bool) -> None:
    corpus.prepare_folder(folder, generated if case.needs_stores else None)
    before = corpus.snapshot(folder)
    run = corpus.run_subprocess if subprocess else corpus.run_in_process
    outcome = run(case.args(generated, folder), folder, case.stdout(generated, folder))
    _check(case, outcome, generated, folder, before)


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_bad_input_is_one_line_and_exit_2(case, generated, tmp_path):
    _run(case, generated, tmp_path, subprocess=case.tier == "sub")


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c.tier in ("sub", "slow")],
                         ids=[c.id for c in CASES if c.tier in ("sub", "slow")])
def test_resource_cases_in_a_subprocess_under_limits(case, generated, tmp_path):
    _run(case, generated, tmp_path, subprocess=True)


def test_the_corpus_is_well_formed():
    assert len(CASES) >= 450
    assert len(set(_IDS)) == len(_IDS)
    assert {c.tier for c in CASES} <= {"in", "sub", "slow"}
    assert all(c.expected.startswith("fusion-dse") for c in CASES)
    for case in CASES:
        for word in case.argv.split():
            if "{F}/" in word:
                name = word.split("{F}/", 1)[1]
                assert (corpus.FILES / name).exists(), f"{case.id}: missing file {name}"


def _imported(line: str) -> str | None:
    """The module an ``-X importtime`` line reports imported, indented by its nesting (None
    for another line)."""
    if not line.startswith("import time:") or line.rstrip().endswith("imported package"):
        return None
    return line.rstrip("\n").rsplit("|", 1)[1][1:]


def _after_package(modules: list[str]) -> bool:
    """An import completed after the ``fusion_dse`` package: ``fusion_dse/__main__.py`` runs
    only once the package is imported and imports nothing before its ``try``, so any later
    import is inside it (importing the command line)."""
    return "fusion_dse" in modules[:-1]


def _after_cli(modules: list[str]) -> bool:
    """An import completed after the command line module: `fusion_dse.cli.main` is running
    (inside its ``try``) and builds its parser."""
    return "fusion_dse.cli" in modules[:-1]


def _in_torch(modules: list[str]) -> bool:
    """A module of torch imported before torch itself: torch (its C extension loading) is
    being imported."""
    return modules[-1].strip().startswith("torch.") and all(m.strip() != "torch"
                                                            for m in modules)


def _searching(modules: list[str]) -> bool:
    """The search has started: `search.driver` is imported when a search runs (see
    `fusion_dse.pipeline.search_stage`), and this one runs for minutes."""
    return modules[-1].strip() == "search.driver"


# When the signal is sent: on a line the child prints (``-X importtime`` reports each import
# as it completes), never after a fixed delay, which a loaded machine turns into another point
# of the run (or into the interpreter's own start-up, where no program can handle Ctrl-C).
MOMENTS = {"importing the command line": _after_package,
           "parsing the command line": _after_cli,
           "importing torch": _in_torch,
           "searching": _searching}


@pytest.mark.parametrize("moment", MOMENTS)
def test_ctrl_c_while_importing_or_running_is_one_line_and_130(moment, tmp_path):
    import queue
    import signal
    import subprocess
    import threading

    argv = ["optimize", "resnet18", "--search", "ls", "--budget", "100000", "--no-optimum",
            "--quiet", "--out", "out"]  # searches for minutes: the signal always comes first
    # SIGINT back to its default in the child: a test run started in the background (nohup,
    # `cmd &` without job control) passes SIGINT ignored, and Python keeps it ignored
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "fusion_dse", *argv],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=corpus.subprocess_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    err, modules, sent = [], [], False
    try:
        while not sent:
            line = lines.get(timeout=WAIT_S)  # queue.Empty: nothing printed for minutes
            assert line is not None, f"the run ended before {moment}: {''.join(err)[-2000:]}"
            err.append(line)
            module = _imported(line)
            if module is not None:
                modules.append(module)
                if MOMENTS[moment](modules):
                    proc.send_signal(signal.SIGINT)
                    sent = True
        proc.wait(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=WAIT_S)
    while (line := lines.get_nowait()) is not None:
        err.append(line)
    modules = [m.strip() for m in map(_imported, err) if m is not None]
    said = [line.rstrip("\n") for line in err if not line.startswith("import time:")]
    shown = f"{moment}: exit {proc.returncode}, stderr {said}"
    assert proc.returncode == 130, shown
    assert said == ["fusion-dse: interrupted"], shown
    assert not (tmp_path / "out").exists()
    # where the signal landed: before the search, but for the last moment
    assert ("search.driver" in modules) == (moment == "searching"), shown
