"""Outputs are written whole or not at all; output paths are checked before the work; a plan
file's scheme, hardware and buffer are used unless overridden."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusion_dse.outputs import atomic_dir, atomic_file, check_out_dir, check_out_file
from simulator.errors import InputError


def test_atomic_dir_replaces_an_earlier_result_whole(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "pareto.csv").write_text("old\n")
    (out / "plan.json").write_text("old\n")
    with atomic_dir(out, ("plan.json", "pareto.csv")) as tmp:
        (tmp / "plan.json").write_text("new\n")
    assert sorted(p.name for p in out.iterdir()) == ["plan.json"]
    assert (out / "plan.json").read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_atomic_dir_leaves_the_old_result_when_writing_fails(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "plan.json").write_text("old\n")
    with pytest.raises(OSError), atomic_dir(out, ("plan.json",)) as tmp:
        (tmp / "plan.json").write_text("new\n")
        raise OSError("disk full")
    assert (out / "plan.json").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_atomic_dir_refuses_a_foreign_folder_unless_forced(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(InputError, match="--force"), atomic_dir(tmp_path / ".", ("plan.json",)):
        pass
    out = tmp_path / "sub"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    with atomic_dir(out, ("plan.json",), force=True) as tmp:
        (tmp / "plan.json").write_text("{}\n")
    assert sorted(p.name for p in out.iterdir()) == ["plan.json"]


def test_atomic_file_keeps_the_old_file_on_failure(tmp_path):
    target = tmp_path / "t.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_file(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


@pytest.mark.parametrize("check, path, message", [
    (lambda p: check_out_file(p / "x.xyz", "--plot", ("png", "pdf")), "", "unsupported format"),
    (lambda p: check_out_file(p, "--plot"), "", "is a folder"),
    (lambda p: check_out_file(p / "no" / "x.png", "--plot"), "", "does not exist"),
    (lambda p: check_out_dir(p / "f", "--out"), "f", "is a file"),
    (lambda p: check_out_dir(p / "f" / "sub", "--out"), "f", "is not a folder"),
])
def test_output_paths_are_checked(tmp_path, check, path, message):
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match=message):
        check(tmp_path)


def test_optimize_into_an_earlier_two_objective_run_leaves_no_stale_files(cli, tmp_path):
    out = tmp_path / "run"
    code, _, err = cli("optimize", "resnet18", "--search", "rs", "--budget", "6", "--objectives",
                       "dram,mbu", "--out", str(out), "-q")
    assert code == 0, err
    assert (out / "pareto.csv").exists()
    code, _, err = cli("optimize", "resnet18", "--search", "rs", "--budget", "6", "--out",
                       str(out), "-q")
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["budget.png", "graph.json", "history.csv",
                                                      "plan.json", "search_plan.json",
                                                      "summary.json"]  # 6 random plans: the
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # optimum beat the search


def test_evaluate_uses_the_plan_context_and_notes_overrides(cli, tmp_path):
    out = tmp_path / "run"
    code, _, err = cli("optimize", "resnet18", "--scheme", "brr", "--buffer", "128KiB",
                       "--search", "rs", "--budget", "6", "--out", str(out), "-q")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    code, stdout, err = cli("evaluate", "resnet18", "--plan", str(out / "plan.json"),
                            "--format", "json")
    assert code == 0 and err == ""
    doc = json.loads(stdout)
    assert doc["hw"]["buffer_bytes"] == 128 * 1024
    assert doc["totals"]["dram_bytes"] == plan["totals"]["dram_bytes"]
    code, _, err = cli("simulate", "resnet18", "--plan", str(out / "plan.json"), "--buffer",
                       "256KiB", "--format", "json")
    assert code == 0
    assert "fusion-dse: note: buffer 262,144 B overrides the plan's 131,072 B" in err


def test_a_plan_from_a_custom_hardware_file_is_costed_on_that_hardware(cli, tmp_path):
    hw = tmp_path / "my-npu.yaml"
    preset = (Path(__file__).resolve().parents[2] / "hwconfigs" / "edge-npu.yaml").read_text()
    hw.write_text(preset.replace("name: edge-npu", "name: my-npu")
                  .replace("dram_bandwidth: ", "dram_bandwidth: 3 # "))
    out = tmp_path / "run"
    code, _, err = cli("optimize", "squeezenet1_0", "--hw", str(hw), "--buffer", "128KiB",
                       "--search", "ls", "--budget", "10", "--no-optimum", "--out", str(out),
                       "--quiet")
    assert code == 0, err
    code, text, err = cli("evaluate", "squeezenet1_0", "--plan", str(out / "plan.json"),
                          "--format", "json")
    assert code == 0 and err == ""
    doc = json.loads(text)
    assert doc["hw"]["name"] == "my-npu" and doc["hw"]["dram_bandwidth"] == 3
    assert doc["hw"]["buffer_bytes"] == 131072
    plan = json.loads((out / "plan.json").read_text())
    assert doc["totals"]["dram_bytes"] == plan["totals"]["dram_bytes"]


def test_results_get_the_mode_a_direct_write_would(tmp_path):
    import os
    import stat

    from fusion_dse.outputs import atomic_dir, atomic_file

    old = os.umask(0o022)
    try:
        with atomic_file(tmp_path / "f.txt") as tmp:
            tmp.write_text("x")
        with atomic_dir(tmp_path / "run", ("a.txt",)) as tmp:
            (tmp / "a.txt").write_text("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "run").stat().st_mode) == 0o755
