"""The optimize outputs stay bit-identical to the golden files made before the [architecture]
refactor (``tests/golden/make_golden.py``): plan.json, history.csv and the summary figures,
on MobileNetV2, SqueezeNet 1.0 and ResNet-50, LBDF and BRR, rs/ls/nsga2, random and rg repair.

The default tier checks one case per (model, scheme) pair, cycling through the searches and
repairs; the slow tier checks all 36.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("make_golden",
                                               Path(__file__).with_name("make_golden.py"))
_golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_golden)
CASES, GOLDEN, case_name, run_case = (_golden.CASES, _golden.GOLDEN, _golden.case_name,
                                      _golden.run_case)

FAST = [c for k, c in enumerate(CASES) if k % 7 == 0]


def _compare(case: tuple[str, str, str, str], tmp_path: Path) -> None:
    name = case_name(*case)
    run_case(*case, tmp_path)
    for file in ("plan.json", "history.csv"):
        assert (tmp_path / file).read_bytes() == (GOLDEN / name / file).read_bytes(), file
    got = json.loads((tmp_path / "summary.json").read_text())
    want = json.loads((GOLDEN / name / "summary.json").read_text())
    assert got == want


@pytest.mark.parametrize("case", FAST, ids=[case_name(*c) for c in FAST])
def test_optimize_matches_golden(case, tmp_path):
    _compare(case, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[case_name(*c) for c in CASES])
def test_optimize_matches_golden_all(case, tmp_path):
    _compare(case, tmp_path)
