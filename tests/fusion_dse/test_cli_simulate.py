"""`fusion-dse simulate`: JSON keys, the plot and the trace files, bad input."""

from __future__ import annotations

import json

TOTAL_KEYS = {"scheme", "groups", "cycles", "time_ms", "dram_bytes", "peak_buffer_bytes",
              "macs", "pe_utilisation", "energy_pj", "energy_dram_pj", "energy_buffer_pj",
              "energy_mac_pj", "energy_leak_pj", "area_mm2", "events"}


def test_json_plot_and_trace(cli, tmp_path):
    png, trace = tmp_path / "sim.png", tmp_path / "trace.json"
    code, out, err = cli("simulate", "squeezenet1_1", "--input-shape", "1,3,96,96",
                         "--buffer", "256KiB", "--format", "json", "--plot", str(png),
                         "--trace", str(trace))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "fusion-dse.simulation" and set(doc["totals"]) == TOTAL_KEYS
    assert doc["totals"]["dram_bytes"] == doc["analytic"]["dram_bytes"]
    # docs/hardware.md: the simulated energy within 1 % of the analytic, leakage included
    assert doc["totals"]["energy_leak_pj"] > 0 and doc["totals"]["area_mm2"] > 0
    assert abs(doc["totals"]["energy_pj"] / doc["analytic"]["energy_pj"] - 1) < 0.01
    assert all(g["peak_buffer_bytes"] == g["analytic"]["buffer_bytes"] for g in doc["groups"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["ph"] for e in events} == {"M", "X", "C"}


def test_table_output(cli):
    code, out, _ = cli("simulate", "resnet18", "--input-shape", "1,3,64,64",
                       "--scheme", "brr", "--buffer", "128KiB")
    assert code == 0 and "PE utilisation" in out and "stall" in out and "F_beta" in out


def test_plan_that_does_not_fit_is_one_line_with_status_2(cli, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"groups": [list(range(0, 6))] + [[k] for k in range(6, 49)]}))
    code, _, err = cli("simulate", "resnet18", "--input-shape", "1,3,96,96",
                       "--plan", str(plan), "--buffer", "32KiB")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "group 0 (conv1, 6 ops) cannot run" in err


def test_unwritable_plot_path_is_reported(cli, tmp_path):
    code, _, err = cli("simulate", "squeezenet1_1", "--input-shape", "1,3,64,64",
                       "--plot", str(tmp_path / "missing" / "x.png"))
    assert code == 2 and "cannot write" in err


def test_simulate_checks_the_plan_structure_once(monkeypatch):
    import importlib

    import fusion_dse.api
    from simulator.partition import violations

    calls = []

    def counting(*args, **kwargs):
        calls.append(args[1])
        return violations(*args, **kwargs)

    for name in ("fusion_dse.api", "simulator.cost.evaluate", "simulator.engine.simulate"):
        monkeypatch.setattr(importlib.import_module(name), "violations", counting)
    result = fusion_dse.api.simulate("squeezenet1_1", scheme="lbdf", input_shape="1,3,64,64",
                                     overrides={"buffer": "256KiB"})
    assert len(calls) == 1 and result.evaluation.cost.valid
