"""`fusion_dse.optimization` and `fusion-dse optimize`: outputs written and readable, stable keys,
determinism, progress, and every kind of bad input (one line, exit status 2) or no-fusion case
(the layer-by-layer plan with a note)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from fusion_dse.api import evaluate
from fusion_dse.optimization import optimize, write_outputs
from search.registry import REPAIRS, SEARCHES
from search.result import HISTORY_COLUMNS
from simulator.errors import InputError
from simulator.plan import layer_by_layer, load_plan
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import OpKind

SUMMARY_KEYS = {"format", "version", "model", "hw", "buffer_bytes", "scheme", "search",
                "repair", "objectives", "budget", "budget_used", "distinct_plans",
                "diversified_repairs", "best",
                "search_space", "caches", "status", "message", "notes", "seconds", "seed",
                "hardware", "baselines", "baseline_seconds", "optimum", "graph_stages",
                "search_best", "model_spec", "input_shapes"}
BASELINES = {"lbl", "lower_bound", "segment_dp", "greedy", "greedy_fit"}
PNG = b"\x89PNG\r\n\x1a\n"
FAST = {"overrides": {"buffer": "128KiB"}, "budget": 40}


@pytest.fixture
def run_cli(cli):
    """`fusion-dse ARGV...` in-process (the shared `cli` fixture)."""
    return cli


@pytest.fixture(scope="module")
def resnet_result():
    return optimize("resnet18", search="ls", seed=1, **FAST)


def test_result_summary_has_the_stable_keys_and_every_baseline(resnet_result):
    s = resnet_result.summary.to_dict()
    assert set(s) == SUMMARY_KEYS and s["format"] == "fusion-dse.search"
    assert set(s["baselines"]) == BASELINES
    assert s["budget_used"] == 40 and s["seed"] == 1 and s["status"] == "ok"
    best = s["best"]
    assert best["dram_bytes"] == resnet_result.cost.dram_bytes and best["valid"]
    assert best["dram_bytes"] >= s["baselines"]["lower_bound"]["dram_bytes"]
    assert best["dram_bytes"] < s["baselines"]["lbl"]["dram_bytes"]
    assert json.loads(json.dumps(s)) == s


def test_outputs_are_written_and_read_back(resnet_result, tmp_path):
    files = write_outputs(resnet_result, tmp_path / "out")
    own = ["search_plan.json"] if resnet_result.summary.best_source != "search" else []
    assert sorted(files) == sorted(["budget.png", "graph.json", "history.csv", "plan.json",
                                    "summary.json", *own])  # graph.json: the fused graph
    if own:  # the search's own best, beside the better plan the run computed
        assert load_plan(files["search_plan.json"], resnet_result.graph) == \
            resnet_result.search_plan
    graph = resnet_result.graph
    assert load_plan(files["plan.json"], graph) == resnet_result.plan
    doc = json.loads(files["plan.json"].read_text())
    assert doc["format"] == "fusion-dse.plan" and doc["scheme"] == "lbdf"
    assert {"ops", "buffer_bytes", "dram_bytes", "unfusable"} <= set(doc["groups"][0])
    assert sum(g["dram_bytes"] for g in doc["groups"]) == resnet_result.cost.dram_bytes
    again = evaluate("resnet18", plan=files["plan.json"], overrides={"buffer": "128KiB"})
    assert again.cost.dram_bytes == resnet_result.cost.dram_bytes and again.cost.valid
    history = pd.read_csv(files["history.csv"])
    assert list(history.columns) == list(HISTORY_COLUMNS) and len(history) == 40
    assert (history["dram_bytes"] == resnet_result.history["dram_bytes"]).all()
    assert json.loads(files["summary.json"].read_text())["budget_used"] == 40
    assert files["budget.png"].read_bytes().startswith(PNG)


def test_two_objectives_write_the_pareto_front(tmp_path):
    result = optimize("resnet18", search="nsga2", objectives="dram,mbu", **FAST)
    files = write_outputs(result, tmp_path)
    front = pd.read_csv(files["pareto.csv"])
    assert list(front.columns) == ["evaluation", "dram_bytes", "fused_mbu_bytes",
                                   "dram_bytes_fuseable", "mbu_bytes", "groups"]
    assert len(front) == len(result.front) >= 1
    assert files["pareto.png"].read_bytes().startswith(PNG)


def test_same_seed_same_outputs(tmp_path):
    a = optimize("squeezenet1_1", search="nsga2", seed=5, **FAST)
    b = optimize("squeezenet1_1", search="nsga2", seed=5, **FAST)
    fa, fb = write_outputs(a, tmp_path / "a"), write_outputs(b, tmp_path / "b")
    for name in ("plan.json", "history.csv"):
        assert fa[name].read_bytes() == fb[name].read_bytes()


def test_progress_callback_sees_every_plan():
    seen = []
    optimize("resnet18", search="rs", progress=lambda n, best: seen.append((n, best)), **FAST)
    counts = [n for n, _ in seen]
    assert counts == sorted(counts) and counts[-1] == 40
    assert all(best is not None for _, best in seen)


@pytest.mark.parametrize("kwargs,match", [
    ({"budget": 0}, "budget must be a positive number of plans, got 0"),
    ({"budget": -2}, "budget must be a positive"),
    ({"search": "annealing"}, "unknown search algorithm 'annealing'"),
    ({"scheme": "ws"}, "unknown scheme 'ws'"),
    ({"scheme": "lbl"}, "nothing to search"),
    ({"repair": "get"}, "unknown repair 'get'"),
    ({"objectives": "dram,energy"}, "unknown objective 'energy'"),
    ({"objectives": "mbu"}, "the first must be 'dram'"),
    ({"seed": -1}, "seed must be a non-negative integer"),
    ({"hw": "no-such-npu"}, "no-such-npu"),
])
def test_bad_arguments_raise_input_errors(kwargs, match):
    args = {"model": "resnet18", "budget": 10, **kwargs}
    with pytest.raises(InputError, match=match):
        optimize(**args)


def broadcast_graph_file(tmp_path):
    b = GraphBuilder("broadcast")
    b.add_input("x", (1, 8, 16, 16))
    b.add_op("gp", OpKind.GLOBAL_POOL, "avg", ["x"], (1, 8, 1, 1), kernel=(16, 16),
             stride=(16, 16))
    b.add_op("mul", OpKind.ELTWISE_BINARY, "mul", ["gp", "x"], (1, 8, 16, 16))
    path = tmp_path / "broadcast.json"
    path.write_text(b.build(["mul"]).to_json())
    return path


def test_cli_writes_outputs_and_prints_a_summary(run_cli, tmp_path):
    out = tmp_path / "run"
    code, stdout, stderr = run_cli("optimize", "resnet18", "--buffer", "128KiB", "--budget",
                                   "30", "--search", "nsga2", "--objectives", "dram,cycles",
                                   "--seed", "2", "--out", str(out))
    assert code == 0, stderr
    assert "plans evaluated     30 of 30" in stdout and "segment_dp" in stdout
    assert "search: nsga2" in stdout and str(out) in stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["objectives"] == ["dram", "cycles"]
    # 30 NSGA-II plans end above the optimum the run computes: plan.json is the optimum, the
    # search's own best is search_plan.json, and the front's least-DRAM end is the plan written
    assert summary["best"]["source"] == "optimum" and "best plan (optimum)" in stdout
    assert {p.name for p in out.iterdir()} == {"plan.json", "history.csv", "summary.json",
                                               "budget.png", "pareto.csv", "pareto.png",
                                               "graph.json", "search_plan.json"}
    front = pd.read_csv(out / "pareto.csv")
    assert front["dram_bytes"].min() == summary["best"]["dram_bytes"]
    assert (front["evaluation"] == 0).sum() == 1  # the incumbent: not a plan of the search
    assert stderr == ""  # no progress bar when stderr is not a terminal


def test_cli_choices_are_the_registry_names(run_cli):
    for flag, registry in (("--search", SEARCHES), ("--repair", REPAIRS)):
        code, _, stderr = run_cli("optimize", "resnet18", flag, "nope")
        assert code == 2 and f"choose from {', '.join(map(repr, registry.names()))}" in stderr


def test_cli_default_output_folder(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ("optimize", "resnet18@160", "--budget", "10", "--scheme", "brr", "--search", "rs",
            "--quiet", "--buffer", "64KiB")
    code, stdout, _ = run_cli(*argv)
    assert code == 0
    folders = sorted((tmp_path / "fusion-dse-out").iterdir())
    assert len(folders) == 1
    assert re.fullmatch(r"resnet18@160-edge-npu-64KiB-brr-rs-[0-9a-f]{6}", folders[0].name)
    plan = json.loads((folders[0] / "plan.json").read_text())
    summary = json.loads((folders[0] / "summary.json").read_text())
    for doc in (plan, summary):
        assert doc["model_spec"] == "resnet18@160"
        assert doc["input_shapes"] == [[1, 3, 160, 160]]
    assert stdout.startswith("resnet18@160 (1x3x160x160) on edge-npu (buffer 64 KiB")
    code, _, _ = run_cli(*argv[:-1], "128KiB")  # another run: another folder
    assert code == 0 and len(list((tmp_path / "fusion-dse-out").iterdir())) == 2


def test_cli_says_when_it_replaces_another_run(run_cli, tmp_path):
    out = tmp_path / "out"
    argv = ("optimize", "resnet18@160", "--budget", "5", "--search", "rs", "--quiet",
            "--out", str(out))
    assert run_cli(*argv)[0] == 0
    code, _, stderr = run_cli(*argv)  # the same run again: replaced without a word
    assert code == 0 and "replaced" not in stderr
    code, _, stderr = run_cli(*argv, "--seed", "1")
    assert code == 0
    assert "note: replaced the earlier run in" in stderr and "seed 0" in stderr


@pytest.mark.parametrize("argv,match", [
    (["--budget", "0"], "budget must be a positive number of plans, got 0"),
    (["--budget", "ten"], "invalid int value: 'ten'"),
    (["--search", "sa"], "invalid choice: 'sa'"),
    (["--scheme", "lbl"], "invalid choice: 'lbl'"),
    (["--repair", "get"], "invalid choice: 'get'"),
    (["--objectives", "dram,energy"], "unknown objective 'energy'"),
    (["--seed", "-4"], "seed must be a non-negative integer"),
    (["--buffer", "lots"], "lots"),
])
def test_cli_bad_input_is_one_line_and_exit_2(run_cli, tmp_path, argv, match):
    code, stdout, stderr = run_cli("optimize", "resnet18", "--out", str(tmp_path), *argv)
    assert code == 2 and stdout == ""
    assert match in stderr and len(stderr.strip().splitlines()) == 1
    assert "Traceback" not in stderr


def test_cli_unknown_model_and_unwritable_output(run_cli, tmp_path):
    code, _, stderr = run_cli("optimize", "resnet19", "--budget", "5")
    assert code == 2 and "resnet19" in stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, stderr = run_cli("optimize", "resnet18", "--budget", "5", "--out",
                              str(blocker / "sub"))
    assert code == 2 and "is not a folder" in stderr  # checked before the search


def test_cli_buffer_too_small_for_any_fusion_gives_the_lbl_plan(run_cli, tmp_path):
    # whole-row line buffers: 4 KiB holds no two adjacent ops of resnet18, while every conv
    # still runs layer by layer, tiled (pixel line buffers stream a relu or an add in a few
    # hundred bytes, and a buffer below a conv's smallest tile runs no plan at all)
    code, stdout, stderr = run_cli("optimize", "resnet18", "--buffer", "4096", "--set",
                                   "lbdf_buffer=row", "--budget", "50", "--out", str(tmp_path))
    assert code == 0, stderr
    assert "note: no two adjacent ops of resnet18 are both fuseable" in stderr
    assert "no search" in stdout and "plans evaluated     0 of 50" in stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "nothing_to_fuse" and summary["budget_used"] == 0
    graph = optimize("resnet18", budget=5,
                     overrides={"buffer": 4096, "lbdf_buffer": "row"}).graph
    assert load_plan(tmp_path / "plan.json", graph) == layer_by_layer(graph)
    assert (tmp_path / "budget.png").read_bytes().startswith(PNG)


def test_cli_brr_with_every_group_incompatible_says_so(run_cli, tmp_path):
    graph = broadcast_graph_file(tmp_path)
    code, stdout, stderr = run_cli("optimize", str(graph), "--scheme", "brr", "--budget", "20",
                                   "--out", str(tmp_path / "out"))
    assert code == 0
    assert "no two adjacent ops of broadcast fit one brr group" in stderr
    assert "BRR-incompatible" in stderr and "squeeze-and-excitation" in stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["status"] == "no_fusable_pair"


@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_guarded_get_repair_never_costs_more_than_random_repair_plan_by_plan(scheme):
    # random search proposes the same plans whatever the repair (a split draws from its own
    # generator), and the baseline guard keeps the cheaper split of every group: so with the
    # same seed every recorded plan costs at most what it costs under the random repair
    args = dict(search="rs", budget=80, seed=4, scheme=scheme, overrides={"buffer": "128KiB"})
    rand = optimize("mobilenet_v2", repair="random", **args)
    get = optimize("mobilenet_v2", repair="alledges", explained_edges=2, **args)
    pure = optimize("mobilenet_v2", repair="alledges", explained_edges=2, keep_baseline=False,
                    **args)
    a, b = rand.history["dram_bytes"], get.history["dram_bytes"]
    assert len(a) == len(b) == 80 and (b <= a).all() and (b < a).any()
    assert get.cost.dram_bytes <= rand.cost.dram_bytes
    assert (get.history["dram_bytes"] <= pure.history["dram_bytes"]).all()
    assert get.summary.splitter["keep_baseline"] is True
    assert pure.summary.splitter["keep_baseline"] is False
    assert pure.summary.splitter["baseline_kept"] == 0


@pytest.mark.parametrize("search", ["ls", "nsga2"])
def test_known_plans_are_repaired_with_the_baseline_only_when_guarded(search):
    # a deterministic DRAM-minimising repair often turns an edit back into a known plan; the
    # guarded GET repair then tries the random repair's pieces for the same edit. Whole-row
    # line buffers: with pixel ones nearly every plan of the budget is new even unguarded at
    # 128 KiB (300 of 300 for ls), which leaves the guard nothing to add
    args = dict(search=search, budget=300, seed=1,
                overrides={"buffer": "128KiB", "lbdf_buffer": "row"})
    rand = optimize("mobilenet_v2", repair="random", **args)
    get = optimize("mobilenet_v2", repair="alledges", explained_edges=2, **args)
    pure = optimize("mobilenet_v2", repair="alledges", explained_edges=2, keep_baseline=False,
                    **args)
    assert rand.summary.diversified_repairs == 0
    assert pure.summary.diversified_repairs == 0
    assert get.summary.diversified_repairs > 0
    assert get.summary.distinct_plans >= pure.summary.distinct_plans


def test_cli_prints_the_get_repair_counters(run_cli, tmp_path):
    code, stdout, stderr = run_cli("optimize", "mobilenet_v2", "--buffer", "128KiB",
                                   "--budget", "200", "--repair", "alledges", "--search", "ls",
                                   "--out", str(tmp_path / "run"))
    assert code == 0, stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    line = next(s for s in stdout.splitlines() if "rectify rate" in s)
    assert f"{summary['splitter']['requests']:,} invalid groups" in line
    assert f"random repair of {summary['diversified_repairs']:,} known plans" in line
