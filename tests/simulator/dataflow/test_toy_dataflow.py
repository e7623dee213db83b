"""A new dataflow is one module plus one registration: the toy of `toy.py`, registered, runs
through optimize, evaluate, simulate, a sweep and compare without any other change."""

from __future__ import annotations

import importlib
import json

import pytest

from simulator.dataflow import dataflow, register, unregister
from simulator.scheme import Scheme


@pytest.fixture
def toy():
    """The toy dataflow registered for the test, withdrawn after it."""
    module = importlib.import_module("tests.simulator.dataflow.toy")
    register(module.TOY)
    yield module
    unregister(module.TOY)


def test_registration_adds_the_name_and_unregistering_withdraws_it(toy):
    assert Scheme.parse("SHORT") is toy.TOY.scheme and dataflow("short") is toy.TOY
    assert "short" in [str(s) for s in Scheme] and toy.TOY.scheme.searchable
    unregister(toy.TOY)
    assert "short" not in [str(s) for s in Scheme]
    register(toy.TOY)  # the fixture unregisters it again
    assert dataflow("short") is toy.TOY


def test_optimize_evaluate_and_simulate_run_it(toy, cli, tmp_path):
    out = tmp_path / "run"
    code, text, err = cli("optimize", "squeezenet1_1", "--scheme", "short", "--buffer",
                          "256KiB", "--budget", "20", "--out", str(out))
    assert code == 0, err
    doc = json.loads((out / "plan.json").read_text())
    assert doc["scheme"] == "short" and doc["totals"]["valid"]
    assert max(len(g["ops"]) for g in doc["groups"]) <= toy.MOST_OPS
    assert "short" in text
    code, text, err = cli("evaluate", "squeezenet1_1", "--plan", str(out / "plan.json"),
                          "--format", "json")
    ev = json.loads(text)
    assert code == 0 and ev["totals"]["dram_bytes"] == doc["totals"]["dram_bytes"]
    assert all(g["short"] for g in ev["groups"] if not g["unfusable"])
    code, text, err = cli("simulate", "squeezenet1_1", "--plan", str(out / "plan.json"),
                          "--format", "json")
    sim = json.loads(text)
    assert code == 0, err
    assert sim["totals"]["dram_bytes"] == doc["totals"]["dram_bytes"]


def test_a_sweep_and_compare_run_it(toy, cli, tmp_path):
    from distributed import LocalCluster

    from fusion_dse.sweep import load_sweep
    from fusion_dse.sweep.cli import compare_table
    from fusion_dse.sweep.plots import compare_figure

    store = tmp_path / "s.sqlite"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                      dashboard_address=None) as cluster:  # in this process: the toy is known
        code, _, err = cli("sweep", "--models", "squeezenet1_1", "--buffers", "256KiB",
                           "--schemes", "lbdf,short", "--searches", "exact", "--store",
                           str(store), "--scheduler", cluster.scheduler_address, "--quiet")
    assert code == 0, err
    frame = load_sweep(store, blobs=True)
    assert set(frame["scheme"]) == {"lbdf", "short"} and set(frame["status"]) == {"done"}
    dram = dict(zip(frame["scheme"], frame["dram_bytes"], strict=True))
    assert dram["short"] >= dram["lbdf"]  # fewer plans to choose from
    table = compare_table(frame)
    assert "SHORT" in table and "LBDF" in table
    _, data = compare_figure(frame)
    assert {"dram_lbdf", "dram_short"} <= set(data.columns)
