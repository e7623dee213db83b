"""The command line answers at once: ``models``, every ``--help``, ``--version`` and every input
check run in a fresh interpreter without importing torch, pandas, pymoo, dask,
torch_geometric or matplotlib (wall times: benchmarks/cli_startup.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

HEAVY = ("torch", "pandas", "pymoo", "dask", "distributed", "torch_geometric", "matplotlib")

# Runs each command of argv[2] (a JSON list of argument lists) through the console entry point
# in this one process, then writes each outcome and the heavy modules loaded to argv[1]. A
# heavy module none of the commands imported was imported by none of them alone either.
_RUNNER = """
import contextlib, io, json, sys
from fusion_dse.__main__ import run
report, commands, modules = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
outcomes = []
for argv in commands:
    sys.argv = ["fusion-dse", *argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = run()
        except SystemExit as stop:  # argparse: --help, --version, usage errors
            code = stop.code
    outcomes.append({"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue()})
heavy = sorted(m for m in modules if m in sys.modules)
with open(report, "w") as f:
    json.dump({"outcomes": outcomes, "heavy": heavy}, f)
"""


def _run(tmp_path: Path, *commands: list[str]) -> tuple[list[dict], list[str]]:
    """Run `commands` in one fresh interpreter (in `tmp_path`); their outcomes and the heavy
    modules loaded at the end."""
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-c", _RUNNER, str(report), json.dumps(commands),
                           json.dumps(HEAVY)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text())
    return doc["outcomes"], doc["heavy"]


def test_models_lists_the_zoo_without_building_it(tmp_path):
    (table, as_json), heavy = _run(tmp_path, ["models"], ["models", "--format", "json"])
    assert heavy == []
    assert table["code"] == 0 and table["err"] == ""
    assert "deeplabv3_mobilenet_v3_large" in table["out"] and "138,357,544" in table["out"]
    rows = {m["name"]: m for m in json.loads(as_json["out"])["models"]}
    assert len(rows) == 18 and rows["resnet50"]["params"] == 25_557_032


def test_help_and_version_answer_without_heavy_imports(tmp_path):
    from fusion_dse import cli_args

    commands = [["--help"], ["--version"],
                *([name, "--help"] for name in cli_args.surface()["commands"])]
    outcomes, heavy = _run(tmp_path, *commands)
    assert heavy == []
    assert all(o["code"] == 0 and o["err"] == "" for o in outcomes), outcomes
    assert outcomes[0]["out"].startswith("usage: fusion-dse")
    assert outcomes[1]["out"] == f"fusion-dse {version('fusion-dse')}\n"
    for o in outcomes[2:]:
        assert o["out"].startswith(f"usage: fusion-dse {o['argv'][0]}"), o


# (argv, what the one line on stderr says): bad input of every kind, each refused with exit
# status 2 before a heavy module is imported.
BAD = [
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["optimize", "--budget", "many"], "invalid int value: 'many'"),
    (["models", "--dtype-bytes", "0"], "--dtype-bytes must be positive"),
    (["inspect", "resnet5O"], "unknown model 'resnet5O'.*did you mean resnet50"),
    (["inspect", "resnet18", "--input-shape", "1,3,x"], "not a comma-separated"),
    (["inspect", "resnet18@12x3x4"], "unknown model 'resnet18@12x3x4'"),
    (["inspect", "bert_base@64x64"], "takes one sequence length"),
    (["evaluate", "nosuch"], "unknown model 'nosuch'"),
    (["evaluate", "resnet18", "--buffer", "lots"], "buffer"),
    (["evaluate", "resnet18", "--plan", "missing.json"], "missing.json"),
    (["simulate", "resnet18", "--hw", "nosuch"], "unknown hardware preset 'nosuch'"),
    (["simulate", "resnet18", "--plot", "out.bmp"], "unsupported format 'bmp'"),
    (["optimize", "nosuch"], "unknown model 'nosuch'"),
    (["optimize", "resnet18", "--buffer", "12XB"], "12XB"),
    (["optimize", "resnet18", "--hw", "missing.yaml"], "missing.yaml"),
    (["optimize", "resnet18", "--objectives", "speed"], "speed"),
    (["optimize", "resnet18", "--repair", "gnne", "--hw", "nosuch"], "nosuch"),
    (["optimize", "missing.onnx", "--hw", "nosuch"], "missing.onnx"),
    (["optimize", "resnet18", "--input-shape", "1,3,0,0"], "positive dimensions"),
    (["rewrite", "resnet18", "--hw", "nosuch", "--out", "g.json"], "nosuch"),
    (["rewrite", "resnet18", "--stages", "melt", "--out", "g.json"], "melt"),
    (["explain", "resnet18", "--group", "0:3", "--hw", "nosuch"], "nosuch"),
    (["explain", "nosuch", "--group", "0:3"], "unknown model 'nosuch'"),
    (["train-gnn", "--scheme", "lbdf", "--epochs", "0"], "--epochs must be positive"),
    (["train-gnn", "--scheme", "lbdf", "--samples-per-network", "x=y"], "expected N or NAME=N"),
    (["train-explainer", "--explainer", "pg", "--scheme", "lbdf", "--top", "0"],
     "--top must be positive"),
    (["sweep", "missing.yaml"], "missing.yaml"),
    (["sweep", "--models", "nosuch"], "unknown model 'nosuch'"),
    (["sweep", "export", "missing.sqlite"], "no sweep store"),
    (["plot", "tradeoff", "missing.sqlite"], "no sweep store"),
    (["plot", "tradeoff", "missing.sqlite", "--out", "fig.txt"], "use a .png, .svg or .pdf"),
    (["compare", "resnet18", "--out", "fig.txt"], "use a .png, .svg or .pdf"),
    (["compare", "nosuch"], "unknown model 'nosuch'"),
]


def test_every_input_check_answers_before_heavy_imports(tmp_path):
    import re

    outcomes, heavy = _run(tmp_path, *(argv for argv, _ in BAD))
    assert heavy == []
    for o, (_, message) in zip(outcomes, BAD, strict=True):
        lines = o["err"].strip().splitlines()
        assert o["code"] == 2 and len(lines) == 1 and o["out"] == "", o
        assert re.search(message, lines[0]), o
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # nothing written


@pytest.mark.parametrize("argv, code", [(["models"], 0), (["--version"], 0),
                                        (["inspect", "nosuch"], 2)])
def test_the_console_script_itself(argv, code):
    """The installed ``fusion-dse`` script, as users run it (``python -m fusion_dse``)."""
    check = ("import runpy, sys\n"
             f"sys.argv = ['fusion-dse', *{argv!r}]\n"
             "try:\n    runpy.run_module('fusion_dse', run_name='__main__')\n"
             "except SystemExit as stop:\n"
             f"    heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
             "    print('HEAVY', heavy, file=sys.stderr)\n    raise\n")
    proc = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.splitlines()[-1] == "HEAVY []", proc.stderr


def test_a_get_repair_loads_torch_when_a_run_uses_it(tmp_path):
    """Creating an explanation-guided repair (as `optimize` does before checking the rest)
    imports neither torch nor torch_geometric; asking it about a dataflow loads them."""
    check = ("import sys\n"
             "from search.registry import REPAIRS\n"
             "splitter = REPAIRS.create('gnne')\n"
             "before = [m for m in ('torch', 'torch_geometric') if m in sys.modules]\n"
             "supported = splitter.supports('lbdf')\n"
             "after = [m for m in ('torch', 'torch_geometric') if m in sys.modules]\n"
             "print(before, supported, after, splitter.name)\n")
    proc = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == "[] True ['torch', 'torch_geometric'] gnne"


def test_names_kept_for_the_parser_match_their_sources():
    """The plot kinds and matplotlib's file formats are named without importing matplotlib;
    they must stay what the plot module offers and formats matplotlib can write."""
    from matplotlib.backend_bases import FigureCanvasBase

    from fusion_dse.outputs import PLOT_FORMATS
    from fusion_dse.sweep.cli import PLOT_KINDS
    from fusion_dse.sweep.plots import KINDS

    assert PLOT_KINDS == tuple(KINDS)
    assert set(PLOT_FORMATS) <= set(FigureCanvasBase.get_supported_filetypes())  # writable
    assert {"png", "pdf", "svg"} <= set(PLOT_FORMATS)
