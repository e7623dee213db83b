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


@pytest.mark.parametrize("delay", [0.3, 1.5, 8.0])
def test_ctrl_c_while_importing_or_running_is_one_line_and_130(delay, tmp_path):
    import signal
    import subprocess
    import time

    argv = ["optimize", "resnet18", "--search", "ls", "--budget", "100000", "--no-optimum",
            "--quiet", "--out", "out"]  # runs for minutes: the signal always comes first
    # SIGINT back to its default in the child: a test run started in the background (nohup,
    # `cmd &` without job control) passes SIGINT ignored, and Python keeps it ignored
    proc = subprocess.Popen([sys.executable, "-m", "fusion_dse", *argv],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=corpus.subprocess_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=corpus.TIME_LIMIT_S)
    assert proc.returncode == 130
    assert not (tmp_path / "out").exists()
    assert err.decode().strip().splitlines() == ["fusion-dse: interrupted"]
