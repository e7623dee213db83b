"""Trade-offs of a sweep's points (fusion_dse/sweep/tradeoff.py): metrics from each point's
hardware, the recommendation and its curve, the metric panels of the trade-off figure."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fusion_dse.sweep.plots import tradeoff_data, tradeoff_figure
from fusion_dse.sweep.tradeoff import parse_metrics, parse_within, recommend, with_figures
from simulator.errors import InputError
from simulator.hw import load_hw

KIB = 1024
# energy (pJ) per (buffer, scheme): the best at 256 KiB (BRR, 1.00e9); LBDF at 128 KiB is
# 4 % above it, at 64 KiB 30 % above
ENERGY = {(64, "lbdf"): 1.30e9, (64, "brr"): 1.60e9, (128, "lbdf"): 1.04e9,
          (128, "brr"): 1.10e9, (256, "lbdf"): 1.02e9, (256, "brr"): 1.00e9}


def points() -> pd.DataFrame:
    rows = []
    for (kib, scheme), energy in ENERGY.items():
        hw = load_hw("edge-npu", {"buffer": f"{kib}KiB"})
        rows.append({"key": f"{kib}{scheme}", "model": "net", "scheme": scheme,
                     "search": "auto", "repair": "random", "seed": 0, "budget": 10,
                     "status": "done", "graph_stages": "fuse", "hw_name": hw.name,
                     "buffer_bytes": kib * KIB, "dram_bytes": 2**20 * (512 // kib),
                     "lbl_dram_bytes": 2**23, "lower_bound_bytes": 2**19,
                     "cycles": 1_000_000 + kib, "energy_pj": energy,
                     "summary": json.dumps({"hardware": hw.to_dict()})})
    return pd.DataFrame(rows)


def test_figures_come_from_each_points_hardware():
    figures = with_figures(points())
    for row in figures.itertuples():
        hw = load_hw("edge-npu", {"buffer": row.buffer_bytes})
        assert row.area_mm2 == pytest.approx(hw.area_mm2)
        assert row.latency_ms == pytest.approx(row.cycles / 1e9 * 1e3)
        assert row.edp_mj_ms == pytest.approx(row.energy_pj / 1e9 * row.latency_ms)
    # 64 KiB of 45 nm SRAM: 524,288 bits x 0.346 um^2 / 0.7
    assert figures["area_mm2"].min() == pytest.approx(524288 * 0.346 / 0.7 * 1e-6)


def test_the_smallest_buffer_within_the_tolerance_and_its_dataflow():
    figures = with_figures(points())
    r = recommend(figures, "energy", "5%")
    assert (r.buffer_bytes, r.scheme, r.value) == (128 * KIB, "lbdf", 1.04)
    assert (r.best_buffer, r.best_scheme, r.best_value) == (256 * KIB, "brr", 1.0)
    assert list(r.curve["scheme"]) == ["lbdf", "lbdf", "brr"]
    assert list(r.curve["within"]) == [False, True, True]
    assert list(r.curve["ratio"]) == pytest.approx([1.30, 1.04, 1.0])
    assert recommend(figures, "energy", 0.01).buffer_bytes == 256 * KIB
    assert recommend(figures, "energy", "30%").buffer_bytes == 64 * KIB
    assert recommend(figures, "area").buffer_bytes == 64 * KIB  # area only grows
    text = r.text()
    assert "recommended: 128 KiB LBDF" in text and "+4.0% of the best" in text
    assert json.loads(json.dumps(r.to_dict()))["curve"][1]["within"] is True


def test_bad_metrics_and_tolerances_are_one_line():
    assert parse_metrics("dram, energy,dram") == ("dram", "energy")
    assert (parse_within("5%"), parse_within("0.05"), parse_within(0)) == (0.05, 0.05, 0)
    for bad, message in (("watts", "unknown metric"), ("", "no metric")):
        with pytest.raises(InputError, match=message):
            parse_metrics(bad)
    for bad in ("-1%", "five", "nan", "2000%"):
        with pytest.raises(InputError, match="--within"):
            parse_within(bad)
    with pytest.raises(InputError, match="no finished point of model 'other'"):
        recommend(with_figures(points()), "energy", model="other")


def test_tradeoff_panels_per_metric():
    frame = points()
    energy = tradeoff_data(frame, "energy")["lines"]
    lbdf = energy[energy["scheme"] == "lbdf"].sort_values("buffer_bytes")
    assert list(lbdf["mean"]) == [1.30e9, 1.04e9, 1.02e9]
    assert "lower_bound" not in tradeoff_data(frame, "energy")["references"]
    fig, data = tradeoff_figure(frame, ("dram", "cycles", "energy", "area"))
    assert set(data) == {"dram", "cycles", "energy", "area"}
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["net: DRAM traffic", "net: latency", "net: energy", "net: SRAM area"]
    _, single = tradeoff_figure(frame)  # the DRAM figure as before
    assert set(single) == {"lines", "references"}


def test_sweep_axes_take_any_hardware_field():
    from fusion_dse.sweep.spec import SweepSpec, expand, hardware_axes

    assert {"sram.node_nm", "sram.banks", "weight_buffer", "dram_bandwidth",
            "macs_per_cycle"} <= set(hardware_axes())
    points = expand(SweepSpec(name="x", axes={"model": ["resnet18"], "buffer": "64KiB",
                                              "sram.node_nm": "45,22", "sram.banks": [1, 8]}))
    configs = {(dict(p.overrides)["sram.node_nm"], dict(p.overrides)["sram.banks"]):
               load_hw(p.hw, dict(p.overrides)) for p in points}
    assert len(configs) == 4
    # 64 KiB: 524,288 bits x 0.092 um^2 / 0.7 at 22 nm; 8 banks of 8 KiB: 1.25 pJ/B x 0.2229
    assert configs[22, 1].area_mm2 == pytest.approx(524288 * 0.092 / 0.7 * 1e-6)
    assert configs[22, 8].energy_buffer_pj_per_byte == pytest.approx(1.25 * 0.2229)
