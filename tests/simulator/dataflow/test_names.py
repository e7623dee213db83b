"""No room outside a dataflow's own modules and the registry names LBDF or BRR: the rest of the
code asks a scheme's capabilities or its `simulator.dataflow.Dataflow`."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LIBRARY = ("simulator", "search", "explain", "fusion_dse")
OWN = {
    "simulator/scheme.py",  # the registry of names and capabilities
    "simulator/dataflow/__init__.py", "simulator/dataflow/lbdf.py", "simulator/dataflow/brr.py",
    "simulator/cost/lbdf.py", "simulator/cost/_lbdf_kernels.py",  # LBDF's cost model
    "simulator/cost/brr.py", "simulator/cost/_brr_kernels.py",  # BRR's cost model
    "simulator/engine/lbdf.py", "simulator/engine/brr.py",  # their simulator runners
}
NAMED = re.compile(r"Scheme\.(LBDF|BRR)\b")
COMPARED = re.compile(r"""(==|!=|\bis(\s+not)?|\bin)\s*[\[({]?\s*["'](lbdf|brr)["']"""
                      r"""|["'](lbdf|brr)["']\s*(==|!=)""")


def _library_files():
    for package in LIBRARY:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in OWN:
                yield rel, path.read_text(encoding="utf-8")


def test_only_the_dataflows_and_the_registry_name_lbdf_or_brr():
    found = [f"{rel}:{n}: {line.strip()}" for rel, text in _library_files()
             for n, line in enumerate(text.splitlines(), 1)
             if NAMED.search(line) or COMPARED.search(line)]
    assert not found, "\n".join(found)


def test_the_check_sees_what_it_looks_for():
    assert NAMED.search("if scheme is Scheme.BRR:")
    assert COMPARED.search('if scheme == "lbdf":') and COMPARED.search("x in ('brr', 'lbl')")
    assert COMPARED.search('"brr" != s') and not COMPARED.search('Case("brr", "brr")')
