"""The built wheel, installed non-editable into a fresh virtual environment, runs
``fusion-dse --version``, ``models`` and ``optimize`` on the default preset from outside the
repository.

Nothing is downloaded: the wheel is built with ``--no-build-isolation`` (this environment's
setuptools) and installed with ``--no-deps --no-index`` by this environment's pip (the fresh
environment has none); the fresh environment sees this
environment's third-party packages through a ``.pth`` path line, which adds their folder to
``sys.path`` without running this environment's editable-install hook, so fusion-dse itself
can only come from the wheel.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run(*argv: str | Path, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"{argv}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def source_copy(dest: Path) -> Path:
    """The files the distribution is built from (pyproject's package patterns), so the build
    writes nothing into the working tree."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["packages"]["find"]["include"]
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for folder in ROOT.iterdir():
        if folder.is_dir() and any(fnmatch.fnmatch(folder.name, p) for p in patterns):
            shutil.copytree(folder, dest / folder.name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def fresh_venv(path: Path) -> Path:
    run(sys.executable, "-m", "venv", "--without-pip", path, cwd=path.parent)
    python = path / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
               cwd=path.parent).strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "_test_third_party.pth").write_text("\n".join(sorted(ours)) + "\n")
    return python


def test_wheel_installs_and_optimizes_on_the_default_preset(tmp_path):
    src = source_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
        "-w", dist, src, cwd=tmp_path)
    (wheel,) = dist.glob("fusion_dse-*.whl")
    python = fresh_venv(tmp_path / "venv")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
        wheel, cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = json.loads(run(python, "-c", "import json, hwconfigs, simulator, explain.checkpoint "
                           "as c; from simulator.hw import list_presets; print(json.dumps("
                           "[simulator.__file__, hwconfigs.__file__, str(c.CHECKPOINT_DIR), "
                           "list_presets()]))", cwd=elsewhere))
    venv = tmp_path / "venv"
    assert all(Path(p).resolve().is_relative_to(venv.resolve()) for p in where[:3])
    assert "edge-npu" in where[3]

    script = venv / "bin" / "fusion-dse"
    release = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run(script, "--version", cwd=elsewhere) == f"fusion-dse {release}\n"
    assert "resnet152" in run(script, "models", cwd=elsewhere)  # the zoo catalog is package data

    out = elsewhere / "run"
    run(venv / "bin" / "fusion-dse", "optimize", "--budget", "50", "--out", out, "--quiet",
        cwd=elsewhere)
    for name in ("plan.json", "history.csv", "summary.json", "budget.png"):
        assert (out / name).stat().st_size > 0, name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["hw"] == "edge-npu"
