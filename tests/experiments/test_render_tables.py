"""experiments/render_tables.py: the paper's tables rendered from a real (tiny) sweep store,
every number checked against the store's rows; the paper's values checked against the paper.

The store is filled in-process (`run_point` + `SweepStore.write`, no cluster) with points on
the paper's axes at a budget of 12 plans: Table III (SqueezeNet, LBDF and BRR, local search,
random and PG repairs), Table IV and V (MobileNetV2, random search, PG), Fig. 5's first panel
(SqueezeNet, BRR, LS) and a two-size buffer sweep (8 plans) with layer by layer.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

from fusion_dse.sweep.point import run_point
from fusion_dse.sweep.spec import SweepSpec, expand
from fusion_dse.sweep.store import SweepStore, keyed_config, point_key

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "render_tables.py"
PAPER = ROOT.parent / "shared" / "papers" / "get-layer-fusion.txt"
BUDGET = 12


def _script():
    spec = importlib.util.spec_from_file_location("render_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


rt = _script()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tables") / "t.sqlite"
    spec = SweepSpec(
        axes={"model": "squeezenet1_0", "buffer": "128KiB", "scheme": "lbdf", "search": "ls",
              "repair": "random,pg", "seed": "0..1", "budget": BUDGET},
        include=[{"scheme": "brr", "repair": "random", "seed": 0},
                 {"model": "mobilenet_v2", "search": "rs", "repair": "pg", "seed": 0},
                 {"buffer": "64KiB,128KiB", "repair": "random", "seed": 0, "budget": 8},
                 {"scheme": "lbl"}, {"scheme": "lbl", "buffer": "64KiB"}])
    points = expand(spec)
    assert len(points) == 10
    with SweepStore(path) as opened:
        for p in points:
            row = run_point(p, point_key(p))
            assert row["status"] == "done", row["error"]
            opened.write(p, keyed_config(p), row, "t")
    return path


@pytest.fixture(scope="module")
def rendered(store, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("out")
    assert rt.main([str(store), "--out", str(out)]) == 0
    return out, rt.detect(rt.load([store]))


def _rows(frame: pd.DataFrame, **axes) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index)
    for k, v in axes.items():
        mask &= frame[k] == v
    return frame[mask]


def _md_row(text: str, *first: str) -> list[str]:
    """The cells of the markdown row whose first cells are `first`."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:len(first)] == list(first):
            return cells
    raise AssertionError(f"no row {first} in\n{text}")


def test_the_setups_are_recognised_by_their_axes(rendered):
    out, found = rendered
    assert set(found) == {"table_iii", "table_iv", "table_v", "fig5_budget", "buffer_sweep"}
    assert len(found["table_iii"]) == 5 and set(found["table_v"]["repair"]) == {"pg"}
    assert set(found["buffer_sweep"]["buffer_bytes"]) == {64 * 1024, 128 * 1024}
    for name in ("table_iii.md", "table_iii.csv", "table_iv.md", "table_v.md",
                 "fig5_budget.png", "fig5_budget.md", "buffer_sweep.md",
                 "buffer_sweep_tradeoff.png", "buffer_sweep_compare.png",
                 "buffer_sweep_compare.csv"):
        assert (out / name).stat().st_size > 100, name
    assert not (out / "table_ii.md").exists()


def test_table_iii_numbers_are_the_stores(rendered, store):
    out, _ = rendered
    frame = rt.load([store])
    text = (out / "table_iii.md").read_text()
    assert f"Hardware edge-npu; buffer 128 KiB; budget {BUDGET} plans; seeds 0-1." in text
    for repair, label in (("random", "—"), ("pg", "PG")):
        runs = _rows(frame, model="squeezenet1_0", scheme="lbdf", search="ls", repair=repair,
                     budget=BUDGET)
        mb = runs["dram_bytes_fuseable"].astype(float) / 1e6
        cells = _md_row(text, "squeezenet1_0", "LBDF", "LS", label)
        expected = f"{mb.mean():.3f}" + ("" if mb.min() == mb.max()
                                         else f" ({mb.min():.3f}-{mb.max():.3f})")
        assert cells[4] == expected and cells[5] == "2"
        assert cells[6] == {"random": "3.839", "pg": "3.585"}[repair]  # the paper's
        summary = json.loads(rt.load_sweep(store, blobs=True).set_index("key")
                             .loc[runs["key"].iloc[0], "summary"])
        assert cells[7] == f"{summary['optimum']['dram_bytes_fuseable'] / 1e6:.3f}"
    csv = pd.read_csv(out / "table_iii.csv")
    mine = csv[(csv["model"] == "squeezenet1_0") & (csv["scheme"] == "lbdf")
               & (csv["repair"] == "pg")].iloc[0]
    runs = _rows(frame, model="squeezenet1_0", scheme="lbdf", search="ls", repair="pg")
    assert mine["dram_mb"] == pytest.approx(runs["dram_bytes_fuseable"].mean() / 1e6, abs=0)
    assert mine["hw"] == "edge-npu" and mine["budget"] == BUDGET
    # the paper's rows of networks the store does not hold are left out
    assert "mobilenet_v2" not in set(csv["model"]) and "vgg16" not in text


def test_against_random_and_the_gap_closed_come_from_the_rows(rendered, store):
    frame = rt.load([store])
    rand = _rows(frame, scheme="lbdf", search="ls", repair="random", budget=BUDGET)
    pg = _rows(frame, scheme="lbdf", search="ls", repair="pg")
    pairs = pg.merge(rand, on="seed", suffixes=("", "_r"))
    diff = pairs["dram_bytes_fuseable"] - pairs["dram_bytes_fuseable_r"]
    text = (rendered[0] / "table_iii.md").read_text()
    cells = _md_row(text, "squeezenet1_0", "LBDF", "LS", "PG")
    assert cells[9] == f"{(diff < 0).sum()}/{(diff == 0).sum()}/{(diff > 0).sum()}"


def test_against_random_closes_the_share_of_the_random_repairs_gap():
    base = {"model": "n", "scheme": "lbdf", "search": "ls", "optimum_fuseable": 2,
            "optimum_status": "optimal"}
    rows = pd.DataFrame([
        {**base, "seed": 0, "repair": "random", "dram_bytes_fuseable": 4},
        {**base, "seed": 0, "repair": "rg", "dram_bytes_fuseable": 3},
        {**base, "seed": 1, "repair": "random", "dram_bytes_fuseable": 3},
        {**base, "seed": 1, "repair": "rg", "dram_bytes_fuseable": 2},
        {**base, "seed": 2, "repair": "random", "dram_bytes_fuseable": 2},
        {**base, "seed": 2, "repair": "rg", "dram_bytes_fuseable": 2},
        {**base, "seed": 3, "repair": "random", "dram_bytes_fuseable": 3,
         "optimum_status": "capped"},
        {**base, "seed": 3, "repair": "rg", "dram_bytes_fuseable": 4,
         "optimum_status": "capped"}])
    (row,) = rt.against_random(rows).to_dict("records")
    assert (row["better"], row["equal"], row["worse"]) == (2, 1, 1)
    assert row["gap_closed"] == 0.75  # mean of 1/2 and 1/1; no gap on seed 2, seed 3 capped
    assert row["seeds_without_gap"] == 1


def test_table_iv_and_v_side_by_side_with_the_paper(rendered, store):
    out, _ = rendered
    run = _rows(rt.load([store]), model="mobilenet_v2")
    (rate,) = run["rectify_rate"]
    iv = (out / "table_iv.md").read_text()
    cells = _md_row(iv, "mobilenet_v2", "LBDF", "RS", "PG")
    assert cells[4] == f"{run['dram_bytes_fuseable'].iloc[0] / 1e6:.3f}" and cells[6] == "13.049"
    assert _md_row(iv, "mobilenet_v2", "LBDF", "RS", "—")[4:7] == ["not run", "", "13.209"]
    assert "| BRR |" not in iv  # the store has no BRR point of MobileNetV2
    v = (out / "table_v.md").read_text()
    cells = _md_row(v, "RS", "PG")
    assert cells[2:6] == [f"{100 * rate:.1f}", "50.7",
                          f"{run['search_seconds'].iloc[0]:.1f}", "32"]
    assert cells[7] == f"{run['invalid_groups'].iloc[0]:.1f}"


def test_fig5_table_is_the_best_so_far_of_the_history(rendered, store):
    out, _ = rendered
    full = rt.load([store])
    (history,) = _rows(full, model="squeezenet1_0", scheme="brr")["history"]
    h = pd.read_json(__import__("io").StringIO(history), orient="split")
    text = (out / "fig5_budget.md").read_text()
    assert "Hardware edge-npu; buffer 128 KiB; budget 12 plans; seeds 0." in text
    marks = sorted({max(1, BUDGET * k // 5) for k in range(1, 6)})
    cells = _md_row(text, "squeezenet1_0", "BRR", "LS", "—")
    best = [h[h["evaluation"] <= m]["best_dram_bytes_fuseable"].iloc[-1] / 1e6 for m in marks]
    assert cells[4:] == [f"{b:.3f}" for b in best]


def test_buffer_sweep_table_and_csv(rendered, store):
    out, found = rendered
    frame = rt.load([store])
    compare = pd.read_csv(out / "buffer_sweep_compare.csv")
    text = (out / "buffer_sweep.md").read_text()
    for size, label in ((64 * 1024, "64 KiB"), (128 * 1024, "128 KiB")):
        lbdf = _rows(frame, scheme="lbdf", search="ls", repair="random", buffer_bytes=size,
                     budget=8)
        lbl = _rows(frame, scheme="lbl", buffer_bytes=size)
        row = compare[compare["buffer_bytes"] == size].iloc[0]
        assert row["dram_lbdf"] == lbdf["dram_bytes"].min()
        assert row["dram_lbl"] == lbl["dram_bytes"].iloc[0]
        cells = _md_row(text, "squeezenet1_0", label)
        assert cells[3:] == [f"{lbdf['dram_bytes'].min() / 1e6:.3f}",
                             f"{lbl['dram_bytes'].iloc[0] / 1e6:.3f}"]
    assert set(found["buffer_sweep"]["budget"].dropna()) == {8}  # and none of them in a table
    assert not set(found["buffer_sweep"]["key"]) & set(found["table_iii"]["key"])
    assert "Hardware edge-npu; buffer 64 KiB, 128 KiB; budget 8 plans; seeds 0." in text


def test_a_point_computed_again_counts_once_the_last(tmp_path):
    (point,) = expand(SweepSpec(axes={"model": "squeezenet1_0", "scheme": "lbl"}))
    row = run_point(point, "old-key")
    newer = {**row, "key": "new-key", "finished": row["finished"] + 1,
             "dram_bytes": row["dram_bytes"] + 1}
    with SweepStore(tmp_path / "s.sqlite") as opened:
        opened.write(point, keyed_config(point), newer, "t")
        opened.write(point, keyed_config(point), row, "t")  # stored later, finished earlier
    (loaded,) = rt.load([tmp_path / "s.sqlite"]).to_dict("records")
    assert loaded["key"] == "new-key" and loaded["dram_bytes"] == newer["dram_bytes"]


def test_a_table_on_two_hardware_configurations_is_refused(store, tmp_path):
    frame = rt.load([store])
    other = _rows(frame, scheme="brr").assign(
        key="other", overrides='{"buffer": 131072, "dram_bandwidth": 8.0}')
    with pytest.raises(rt.InputError, match="table_iii: .* 2 hardware configurations"):
        rt.render(pd.concat([frame, other], ignore_index=True), tmp_path)


def test_bad_input_exits_2(tmp_path, capsys, store):
    assert rt.main([str(tmp_path / "missing.sqlite"), "--out", str(tmp_path)]) == 2
    assert "no sweep store" in capsys.readouterr().err
    empty = tmp_path / "e.sqlite"
    SweepStore(empty).close()
    assert rt.main([str(empty), "--out", str(tmp_path)]) == 2
    assert "no paper setup" in capsys.readouterr().err
    assert rt.main([str(store), "--out", str(tmp_path), "--only", "table_x"]) == 2
    assert "--only table_x: not a setup" in capsys.readouterr().err
    assert rt.main([str(store), "--out", str(tmp_path), "--only", "table_ii"]) == 2
    assert rt.main([str(store), "--out", str(tmp_path), "--only", "table_v"]) == 0
    assert sorted(p.name for p in tmp_path.glob("table_*")) == ["table_v.csv", "table_v.md"]


_SEARCH = {"ls": "Local Search", "nsga2": "NSGA-II", "rs": "Random Search"}
_GET = {"random": "", "gnne": " + GNNE", "pg": " + PG", "rg": " + RG"}


def _printed_lines(values: pd.DataFrame) -> list[str]:
    """The paper's table lines rebuilt from the transcription (in its row order)."""
    lines = []
    for (table, search, repair), part in values.groupby(["table", "search", "repair"],
                                                        sort=False):
        label = _SEARCH[search] + _GET[repair]
        if table == "II":
            cells = [f"{v}{u}" for v, u in zip(part["printed"], part["unit"], strict=True)]
        elif table == "V":
            cells = ["".join(map(str, vu)) for vu in zip(part["printed"], part["unit"],
                                                          strict=True)]
        else:
            label = {"ls": "LS", "rs": "RS"}[search] + _GET[repair]
            cells = list(part["printed"])
        lines.append(" ".join([label, *cells]))
    return lines


def test_paper_values_are_the_papers():
    values = rt.paper_values()
    assert len(values) == 36 * 2 + 40 * 2 + 12
    assert set(values["table"]) == {"II", "III", "IV", "V"}
    if not PAPER.is_file():
        pytest.skip(f"{PAPER} is absent")
    paper = set(PAPER.read_text().splitlines())
    lines = _printed_lines(values)
    assert len(lines) == 12 + 4 + 4 + 6
    for line in lines:
        assert line in paper, line
    assert re.search(r"^LS 15\.101 27\.606", "\n".join(lines), re.M)  # BRR columns first
