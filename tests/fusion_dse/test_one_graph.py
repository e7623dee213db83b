"""One graph per comparison: `compare`, `evaluate`, `simulate`, sweeps and `optimize` cost the
layer-by-layer plan (and every reference) on the graph the plans run on, the graph after
optimize's default graph stages (``fuse``), and name the imported graph's figure apart.

SqueezeNet 1.0 at 256 KiB: 25,629,056 B layer by layer as imported, 16,936,560 B after the
fuse stage (its ReLUs become epilogues); before this was fixed `compare`, `evaluate --scheme
lbl` and lbl sweep points gave the first and `optimize` the second.
"""

from __future__ import annotations

import json
import re

import pytest

from fusion_dse.api import evaluate, simulate
from fusion_dse.optimization import optimize
from fusion_dse.sweep import load_sweep
from fusion_dse.sweep.point import run_point
from fusion_dse.sweep.spec import SweepSpec, expand
from fusion_dse.sweep.store import point_key

MODEL, BUFFER = "squeezenet1_0", {"buffer": "256KiB"}


@pytest.fixture(scope="module")
def optimized():
    return optimize(MODEL, "edge-npu", "lbdf", "auto", overrides=BUFFER, progress=False)


def test_evaluate_and_simulate_cost_lbl_on_optimizes_graph(optimized):
    lbl = optimized.summary.baselines["lbl"]
    ev = evaluate(MODEL, scheme="lbl", overrides=BUFFER)
    assert ev.cost.dram_bytes == lbl.dram_bytes == ev.cost.totals()["lbl_dram_bytes"]
    assert len(ev.graph) == len(optimized.graph) < ev.stages.ops_before
    # the imported graph's layer by layer is reported, named apart, and is not the reference
    plain = evaluate(MODEL, scheme="lbl", overrides=BUFFER, graph_stages="none")
    assert ev.stages.imported_lbl_dram_bytes == plain.cost.dram_bytes > lbl.dram_bytes
    # the same under the fused dataflow (single-op groups; its fuseable scope leaves out the
    # ops that fit no group, as optimize's does), and the best plan is no worse
    lbdf = evaluate(MODEL, overrides=BUFFER).cost
    assert (lbdf.dram_bytes, lbdf.dram_bytes_fuseable) == (lbl.dram_bytes,
                                                           lbl.dram_bytes_fuseable)
    assert optimized.cost.dram_bytes <= lbl.dram_bytes
    # an optimised plan object names ops of the rewritten graph: it evaluates as such
    again = evaluate(MODEL, scheme="lbdf", plan=optimized.plan, overrides=BUFFER)
    assert again.cost.dram_bytes == optimized.cost.dram_bytes
    sim = simulate(MODEL, scheme="lbl", overrides=BUFFER)
    assert sim.report.dram_bytes == lbl.dram_bytes


def test_cli_evaluate_names_the_imported_graphs_lbl(cli, optimized):
    code, out, _ = cli("evaluate", MODEL, "--buffer", "256KiB", "--scheme", "lbl")
    lbl = optimized.summary.baselines["lbl"].dram_bytes
    assert code == 0 and f"layer by layer {lbl:,} B" in out
    assert "layer by layer (imported graph)  25,629,056 B" in out
    code, out, _ = cli("evaluate", MODEL, "--buffer", "256KiB", "--scheme", "lbl", "--format",
                       "json")
    assert code == 0 and json.loads(out)["totals"]["dram_bytes"] == lbl


def test_a_plan_file_replays_its_stages_and_refuses_others(cli, optimized, tmp_path):
    from fusion_dse.optimization import write_outputs

    out = tmp_path / "run"
    write_outputs(optimized, out)
    plan = str(out / "plan.json")
    code, text, _ = cli("evaluate", MODEL, "--plan", plan, "--format", "json")
    assert code == 0 and json.loads(text)["totals"]["dram_bytes"] == optimized.cost.dram_bytes
    assert json.loads(text)["totals"]["lbl_dram_bytes"] == \
        optimized.summary.baselines["lbl"].dram_bytes
    code, _, err = cli("evaluate", MODEL, "--plan", plan, "--graph-stages", "none")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "made on graph stages fuse, not none" in err
    code, _, err = cli("evaluate", MODEL, "--graph-stages", "fusion")
    assert code == 2 and "graph stage 'fusion'" in err


def test_sweep_lbl_point_is_costed_on_the_searched_graph(optimized):
    lbl = optimized.summary.baselines["lbl"].dram_bytes
    points = expand(SweepSpec(axes={"model": MODEL, "buffer": "256KiB",
                                    "scheme": "lbdf,lbl"}))
    lbl_point = next(p for p in points if p.scheme == "lbl")
    assert lbl_point.graph_stages == "fuse" and lbl_point.seed is None
    row = run_point(lbl_point, point_key(lbl_point))
    assert row["status"] == "done" and row["dram_bytes"] == row["lbl_dram_bytes"] == lbl
    pinned = expand(SweepSpec(axes={"model": MODEL, "buffer": "256KiB", "scheme": "lbl",
                                    "graph_stages": "none"}))[0]
    assert "graph_stages" not in pinned.to_dict()  # keys of stores pinned to none unchanged
    assert run_point(pinned, "k")["dram_bytes"] == 25_629_056


def test_compare_lbl_row_equals_optimize_and_evaluate(cli, optimized, tmp_path):
    store = tmp_path / "c.sqlite"
    code, out, err = cli("compare", MODEL, "--buffers", "256KiB", "--schemes", "lbdf,lbl",
                         "--workers", "1", "--quiet", "--store", str(store), "--out",
                         str(tmp_path / "c.png"))
    assert code == 0, err
    lbl = optimized.summary.baselines["lbl"].dram_bytes
    row = re.search(r"256 KiB\s+LBL\s+([\d.]+)", out)
    assert row and float(row[1]) == pytest.approx(lbl / 2**20, abs=5e-4)  # MiB
    frame = load_sweep(store)
    by_scheme = frame.set_index("scheme")
    assert by_scheme.loc["lbl", "dram_bytes"] == lbl
    assert by_scheme.loc["lbdf", "lbl_dram_bytes"] == lbl  # the searched point's reference
    assert by_scheme.loc["lbdf", "dram_bytes"] == optimized.cost.dram_bytes
    assert set(frame["graph_stages"]) == {"fuse"}
