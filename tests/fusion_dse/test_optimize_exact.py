"""`optimize` and `fusion-dse optimize` with the exact solver: ``--search exact`` and the
default ``auto`` end to end, the optimum and the gap to it in every summary, the optimum line of
the budget plot, the capped path reported honestly, and ``--no-optimum``."""

from __future__ import annotations

import json

import pytest

from fusion_dse.optimization import optimize, write_outputs
from fusion_dse.plots import budget_data
from simulator.plan import load_plan

FAST = {"overrides": {"buffer": "128KiB"}}
OPTIMUM_KEYS = {"status", "dram_bytes", "dram_bytes_fuseable", "mbu_bytes", "cycles",
                "energy_pj", "groups", "candidates", "costed", "states", "seconds", "optimal",
                "cap_reason", "bound_bytes", "reused", "source", "reproducible", "caps"}


def _optimum_lines(result) -> list[str]:
    refs = budget_data(result)["references"]
    return [f"{r.label} ({r.dram_bytes_fuseable / 2**20:.3f} MiB)"
            for r in refs.itertuples() if r.name == "optimum"]


@pytest.fixture(scope="module")
def exact_result():
    return optimize("resnet18", search="exact", **FAST)


def test_exact_search_gives_the_optimum_in_one_plan(exact_result, tmp_path):
    s = exact_result.summary.to_dict()
    assert s["search"] == "exact" and s["budget_used"] == 1 and s["budget"] == 2000
    assert set(s["optimum"]) == OPTIMUM_KEYS and s["optimum"]["status"] == "optimal"
    assert s["optimum"]["optimal"] is True and s["optimum"]["cap_reason"] == ""
    assert s["optimum"]["dram_bytes"] == s["best"]["dram_bytes"] == exact_result.cost.dram_bytes
    assert s["optimum"]["dram_bytes_fuseable"] == s["best"]["dram_bytes_fuseable"]
    assert s["best"]["gap_to_optimum"] == 0.0
    assert s["best"]["dram_bytes"] <= s["baselines"]["segment_dp"]["dram_bytes"]
    files = write_outputs(exact_result, tmp_path)
    assert load_plan(files["plan.json"], exact_result.graph) == exact_result.plan
    assert json.loads(files["summary.json"].read_text())["optimum"] == s["optimum"]
    mib = s["optimum"]["dram_bytes_fuseable"] / 2**20
    assert _optimum_lines(exact_result) == [f"optimum ({mib:.3f} MiB)"]


def test_heuristic_searches_report_their_gap_to_the_optimum(exact_result):
    result = optimize("resnet18", search="rs", budget=20, seed=1, **FAST)
    s = result.summary.to_dict()
    optimum = exact_result.summary.to_dict()["optimum"]["dram_bytes"]
    assert s["optimum"]["dram_bytes"] == optimum and s["optimum"]["optimal"]
    own = s["search_best"] if s["best"]["source"] != "search" else s["best"]
    gap = own["gap_to_optimum"]
    assert gap == round(own["dram_bytes"] / optimum - 1, 6) and gap >= 0
    assert s["best"]["dram_bytes"] <= own["dram_bytes"]
    assert len(_optimum_lines(result)) == 1


def test_a_proven_optimum_is_solved_once_per_process_and_a_capped_one_never_reused():
    from fusion_dse import pipeline

    pipeline._PROVEN.clear()
    first = optimize("squeezenet1_1", search="rs", budget=5, seed=0, **FAST)
    again = optimize("squeezenet1_1", search="ls", budget=5, seed=1, **FAST)
    a, b = (r.summary.to_dict()["optimum"] for r in (first, again))
    assert not a["reused"] and b["reused"] and a["optimal"] and b["optimal"]
    assert b["dram_bytes"] == a["dram_bytes"] and b["seconds"] == a["seconds"]
    assert again.summary.to_dict()["best"]["gap_to_optimum"] >= 0
    other = optimize("squeezenet1_1", search="rs", budget=5, **FAST, scheme="brr")
    assert not other.summary.to_dict()["optimum"]["reused"]  # another dataflow: solved anew
    pipeline._PROVEN.clear()
    capped = optimize("mobilenet_v2", scheme="brr", search="rs", budget=5,
                      exact_max_costed=50, **FAST)
    assert capped.summary.to_dict()["optimum"]["optimal"] is False
    assert len(pipeline._PROVEN) == 1  # counted work decided it: the same answer anywhere
    pipeline._PROVEN.clear()
    timed = optimize("mobilenet_v2", scheme="brr", search="rs", budget=5,
                     exact_time_limit=0.01, **FAST)
    assert timed.summary.to_dict()["optimum"]["reproducible"] is False
    assert not pipeline._PROVEN  # the clock decided it: not kept


def test_auto_is_the_default_and_takes_the_exact_path():
    result = optimize("resnet18", **FAST)
    s = result.summary.to_dict()
    assert s["search"] == "auto" and s["search_report"]["auto_path"] == "exact"
    assert s["budget_used"] == 1 and s["best"]["gap_to_optimum"] == 0.0


def test_a_capped_solve_is_reported_as_optimal_only_among_the_sets_costed():
    result = optimize("mobilenet_v2", scheme="brr", search="auto", budget=20,
                      exact_max_costed=50, **FAST)
    s = result.summary.to_dict()
    assert s["optimum"]["status"] == "capped" and s["optimum"]["optimal"] is False
    assert "optimal among the" in s["optimum"]["cap_reason"]
    assert s["best"]["gap_to_optimum"] is None
    assert s["search_report"]["auto_path"] == "ls" and s["budget_used"] == 20
    assert s["best"]["dram_bytes"] <= s["optimum"]["dram_bytes"]  # seeded: never worse
    assert s["best"]["dram_bytes"] <= min(b["dram_bytes"] for b in s["baselines"].values()
                                          if b["groups"] is not None)  # not the bound
    assert s["optimum"]["reproducible"] is True
    assert _optimum_lines(result)[0].startswith("best of the capped exact solve")


def test_no_optimum_skips_it():
    result = optimize("resnet18", search="rs", budget=10, compute_optimum=False, **FAST)
    s = result.summary.to_dict()
    assert s["optimum"]["status"] == "not computed" and s["optimum"]["reason"]
    assert "gap_to_optimum" not in s["best"] and _optimum_lines(result) == []


def test_cli_default_run_prints_the_optimal_plan(cli, tmp_path):
    out = tmp_path / "run"
    code, stdout, stderr = cli("optimize", "resnet18", "--buffer", "128KiB", "--out", str(out))
    assert code == 0, stderr
    assert "auto + random repair" in stdout and "took exact: the exact solver proved" in stdout
    assert "plans evaluated     1 of 2,000" in stdout
    line = next(t for t in stdout.splitlines() if t.strip().startswith("optimum "))
    assert "proven: " in line and "candidate sets costed" in line and "+0.00% above it" in line
    summary = json.loads((out / "summary.json").read_text())
    assert {"optimum", "search_report"} <= set(summary)
    assert summary["optimum"]["optimal"] and summary["best"]["gap_to_optimum"] == 0.0
    assert (out / "budget.png").stat().st_size > 0
    assert out.name == "run" and "outputs in" in stdout


def test_cli_exact_time_limit_and_no_optimum(cli, tmp_path):
    code, stdout, stderr = cli("optimize", "mobilenet_v2", "--scheme", "brr", "--buffer",
                               "128KiB", "--search", "exact", "--exact-time-limit", "0.01",
                               "--out", str(tmp_path / "capped"))
    assert code == 0, stderr
    assert "optimum             not proven (" in stdout and "time cap" in stdout
    assert "not reproducible" in stdout and "optimum (capped)" in stdout
    code, stdout, stderr = cli("optimize", "mobilenet_v2", "--scheme", "brr", "--buffer",
                               "128KiB", "--search", "exact", "--exact-max-costed", "50",
                               "--out", str(tmp_path / "work"))
    assert code == 0, stderr
    assert "optimum             not proven (costing cap (50 sets)" in stdout
    assert "not reproducible" not in stdout
    code, stdout, stderr = cli("optimize", "resnet18", "--buffer", "128KiB", "--search", "ls",
                               "--budget", "10", "--no-optimum", "--out", str(tmp_path / "no"))
    assert code == 0, stderr
    assert "optimum             not computed" in stdout
    summary = json.loads((tmp_path / "no" / "summary.json").read_text())
    assert summary["optimum"]["status"] == "not computed"


@pytest.mark.parametrize(("flag", "value"), [
    *(("--exact-time-limit", v) for v in ("0", "-3", "soon", "inf")),
    *(("--exact-max-costed", v) for v in ("0", "-3", "soon", "1.5")),
])
def test_cli_bad_exact_caps_are_one_line_and_exit_2(cli, tmp_path, flag, value):
    code, stdout, stderr = cli("optimize", "resnet18", flag, value, "--out", str(tmp_path))
    assert code == 2 and stdout == "" and len(stderr.strip().splitlines()) == 1
    assert flag in stderr and value in stderr


def test_a_heuristic_search_never_writes_a_plan_worse_than_the_optimum_it_computed(tmp_path):
    """A short random search ends above the optimum the run computes: the plan written is the
    optimum, named as its source, and the search's own best is kept beside it."""
    result = optimize("resnet18", search="rs", budget=3, seed=0, **FAST)
    s = result.summary.to_dict()
    assert s["best"]["source"] == "optimum" and s["best"]["found_at"] is None
    assert s["best"]["dram_bytes"] == s["optimum"]["dram_bytes"] == result.cost.dram_bytes
    assert s["search_best"]["dram_bytes"] > s["best"]["dram_bytes"]
    assert s["search_best"]["gap_to_optimum"] > 0 and s["best"]["gap_to_optimum"] == 0.0
    files = write_outputs(result, tmp_path)
    assert load_plan(files["plan.json"], result.graph) == result.plan


def test_budget_figure_of_a_run_proven_at_plan_1_is_a_bar_per_plan(exact_result):
    from fusion_dse.plots import budget_figure

    data = budget_data(exact_result)
    assert list(data["curve"]["evaluation"]) == [1]
    ax = budget_figure(exact_result).axes[0]
    assert ax.get_lines() == [] and ax.get_legend() is None  # no curve, no legend over data
    refs = data["references"]
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names[0] == "this run (exact solver)"
    assert names[1:] == [r.label for r in refs.itertuples() if r.name != "optimum"]
    widths = [p.get_width() for p in ax.patches]
    best = exact_result.summary.best["dram_bytes_fuseable"]
    assert widths == pytest.approx([best / 2**20, *(r.dram_bytes_fuseable / 2**20 for r in
                                                    refs.itertuples() if r.name != "optimum")])
    title = ax.figure.get_suptitle()
    assert "resnet18 (1x3x224x224) on edge-npu, buffer 128 KiB" in title
    assert "proven optimal at plan 1" in title


def test_budget_figure_of_a_search_has_its_curve_and_references_outside(tmp_path):
    from fusion_dse.plots import budget_figure

    result = optimize("resnet18", search="rs", budget=60, seed=1, **FAST)
    curve = budget_data(result)["curve"]
    assert list(curve["evaluation"]) == list(range(1, 61))
    ax = budget_figure(result).axes[0]
    assert ax.get_xscale() == "log"  # past 50 plans
    step = ax.get_lines()[0]
    assert list(step.get_ydata()) == pytest.approx(list(curve["best"] / 2**20))
    legend = ax.get_legend()
    assert legend is not None and legend.get_bbox_to_anchor().x0 > ax.bbox.x1 - 1
