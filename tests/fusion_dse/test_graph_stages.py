"""Graph stages in a run: `optimize(..., graph_stages=...)`, plan.json's graph record and its
replay by `evaluate`, `fusion-dse rewrite`, the sweep axis, and bad input (one line, exit 2)."""

from __future__ import annotations

import json

import pytest

from fusion_dse.api import evaluate
from fusion_dse.cli import main
from fusion_dse.optimization import optimize, write_outputs
from fusion_dse.sweep.spec import SweepError, SweepSpec, expand, validate_points
from search.substitution.stages import graph_digest, parse_stages, run_stages
from simulator.errors import InputError
from simulator.hw import load_hw
from simulator.plan import PlanError
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.loader import load

FAST = {"search": "exact", "exact_time_limit": 60, "overrides": {"buffer": "128KiB"}}


@pytest.fixture(scope="module")
def fused_run():
    return optimize("squeezenet1_0", graph_stages="fuse", **FAST)


def test_parse_stages_accepts_lists_and_refuses_unknown_names():
    assert parse_stages("none") == ()
    assert parse_stages(None) == ()
    assert parse_stages("all") == ("fuse", "fission", "substitute")
    assert parse_stages("substitute,fuse") == ("fuse", "substitute")  # run order
    assert parse_stages("fuse+fission") == ("fuse", "fission")
    with pytest.raises(InputError, match="'fusion' is not one of"):
        parse_stages("fuse,fusion")


def test_fuse_stage_folds_activations_and_never_raises_the_optimum(fused_run):
    plain = optimize("squeezenet1_0", graph_stages="none", **FAST)
    record = fused_run.summary.graph_stages
    assert record["stages"] == ["fuse"]
    assert record["ops_before"] == len(plain.graph) > record["ops_after"] == len(fused_run.graph)
    assert fused_run.graph.count(OpKind.ELTWISE_UNARY) == 0
    assert len(record["rewrites"]) == record["per_stage"][0]["rewrites"] > 0
    # every plan of the fused graph is a plan of the original with each activation grouped
    # with its producer: the optimum cannot get worse
    assert fused_run.cost.dram_bytes <= plain.cost.dram_bytes
    assert plain.summary.graph_stages is None and "graph_stages" not in plain.summary.to_dict()


def test_plan_of_a_rewritten_graph_replays_on_the_model_and_loads_with_graph_json(
        fused_run, tmp_path):
    files = write_outputs(fused_run, tmp_path / "run")
    assert "graph.json" in files
    doc = json.loads(files["plan.json"].read_text())
    assert doc["graph"]["digest"] == graph_digest(fused_run.graph)
    replayed = evaluate("squeezenet1_0", plan=files["plan.json"])
    assert replayed.cost.dram_bytes == fused_run.cost.dram_bytes
    assert replayed.graph == fused_run.graph
    direct = evaluate(str(files["graph.json"]), plan=files["plan.json"])
    assert direct.cost.dram_bytes == fused_run.cost.dram_bytes and not direct.notes
    assert ComputeGraph.from_json(files["graph.json"].read_text()) == fused_run.graph


def test_a_plan_whose_rewrites_give_another_graph_is_refused(fused_run, tmp_path):
    files = write_outputs(fused_run, tmp_path / "run")
    doc = json.loads(files["plan.json"].read_text())
    doc["graph"]["digest"] = "0" * 16
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(PlanError, match="give another graph"):
        evaluate("squeezenet1_0", plan=bad)
    doc["graph"]["rewrites"][0]["ops"] = ["features.0", "no.such.op"]
    bad.write_text(json.dumps(doc))
    with pytest.raises(PlanError, match="do not replay"):
        evaluate("squeezenet1_0", plan=bad)


def test_fission_stage_needs_a_machine():
    with pytest.raises(InputError, match="need the hardware"):
        run_stages(load("squeezenet1_0"), "fission")


def test_rewrite_command_writes_a_loadable_graph_and_lists_rewrites(tmp_path, capsys):
    out = tmp_path / "sq.json"
    assert main(["rewrite", "squeezenet1_0", "--stages", "fuse", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "65 ops -> 39 ops" in text and "fuse-one-to-one: features.0, features.1" in text
    graph = load(str(out))
    assert len(graph) == 39 and graph.name == "squeezenet1_0"
    assert main(["rewrite", "squeezenet1_0", "--out", str(out), "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["ops_after"] == 39 and record["digest"] == graph_digest(graph)


@pytest.mark.parametrize("argv, message", [
    (["rewrite", "squeezenet1_0", "--stages", "fussion", "--out", "x.json"], "'fussion'"),
    (["rewrite", "squeezenet1_0", "--out", "x.txt"], "unsupported format 'txt'"),
    (["optimize", "squeezenet1_0", "--graph-stages", "all,fuse"], "'all' stands alone"),
])
def test_bad_stage_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path,
                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_sweep_axis_graph_stages_is_canonical_and_validated():
    points = expand(SweepSpec(name="s", axes={"model": "resnet18",
                                              "graph_stages": ["none", "fission+fuse", "all"]}))
    assert [p.graph_stages for p in points] == ["none", "fuse+fission",
                                                "fuse+fission+substitute"]
    assert "graph_stages" not in points[0].to_dict()  # keys of earlier stores unchanged
    assert points[1].to_dict()["graph_stages"] == "fuse+fission"
    bad = expand(SweepSpec(name="s", axes={"model": "resnet18", "graph_stages": "fusion"}))
    with pytest.raises(SweepError, match="graph_stages"):
        validate_points(bad)


def test_run_stages_records_a_replayable_sequence():
    hw = load_hw("edge-npu", {"buffer": "128KiB"})
    staged = run_stages(load("mobilenet_v2"), "fuse", hw, "lbdf")
    from search.substitution.stages import replay_rewrites

    assert replay_rewrites(staged.source, staged.rewrites) == staged.graph


def test_simulate_runs_a_plan_of_the_fused_graph_with_the_analytic_dram(fused_run, tmp_path):
    from fusion_dse.api import simulate

    files = write_outputs(fused_run, tmp_path / "run")
    sim = simulate("squeezenet1_0", plan=files["plan.json"])
    assert sim.evaluation.graph == fused_run.graph
    assert sim.report.totals()["dram_bytes"] == fused_run.cost.dram_bytes
