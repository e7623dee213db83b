"""Every ```python block of README.md and docs/*.md runs as written, each in a fresh namespace in
an empty working directory (the outputs it writes land there). Blocks that run a search or a
sweep are in the slow tier."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SLOW_CALLS = ("optimize(", ".sweep(", ".compare(", "run_search(")
"""A block calling one of these runs a search or a sweep: slow tier."""


def _blocks() -> list:
    params = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            code = match[1]
            marks = [pytest.mark.slow] if any(c in code for c in SLOW_CALLS) else []
            params.append(pytest.param(code, id=f"{path.relative_to(ROOT)}:{line}",
                                       marks=marks))
    return params


def test_docs_have_python_blocks():
    assert len(_blocks()) >= 6


@pytest.mark.parametrize("code", _blocks())
def test_block_runs_as_written(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    started = time.perf_counter()
    exec(compile(code, "<doc block>", "exec"), {"__name__": "__doc_block__"})  # noqa: S102
    assert time.perf_counter() - started < 600
