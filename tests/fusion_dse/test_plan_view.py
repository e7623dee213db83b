"""`fusion-dse show` and `diff` on zoo plans: the groups printed and drawn are the plan's, with
their F_beta and DRAM; diff names the groups that differ; bad input is one line."""

from __future__ import annotations

import json

import pytest

from fusion_dse.figure_style import mib, size_text
from fusion_dse.optimization import optimize, write_outputs
from fusion_dse.plan_view import diff_table, group_table, open_plan, plan_figure, plan_layout

FAST = {"overrides": {"buffer": "128KiB"}}


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    root = tmp_path_factory.mktemp("plans")
    out = {}
    for scheme in ("lbdf", "brr"):
        result = optimize("squeezenet1_0", scheme=scheme, **FAST)
        out[scheme] = write_outputs(result, root / scheme)["plan.json"]
    return out


def test_show_data_is_the_plan_costed(plans):
    ev = open_plan(plans["lbdf"])
    doc = json.loads(plans["lbdf"].read_text())
    table = group_table(ev)
    assert list(table["op_names"]) == [g["ops"] for g in doc["groups"]]
    assert list(table["buffer_bytes"]) == [g["buffer_bytes"] for g in doc["groups"]]
    assert list(table["dram_bytes"]) == [g["dram_bytes"] for g in doc["groups"]]
    assert ev.cost.dram_bytes == doc["totals"]["dram_bytes"]


def test_show_figure_draws_every_group_around_its_ops(plans):
    ev = open_plan(plans["lbdf"])
    fig, regions = plan_figure(ev)
    layout = plan_layout(ev.graph)
    assert sorted(set(regions["group"])) == list(range(len(ev.cost.groups)))
    for k, c in enumerate(ev.cost.groups):
        label = f"G{k}: {size_text(c.buffer_bytes)}, {mib(c.dram_bytes):.2f} MiB"
        assert (regions[regions["group"] == k]["label"] == label).sum() == 1
        boxes = list(regions[regions["group"] == k]["box"])
        for o in c.ops:
            x, y = layout.pos[o]
            assert any(bx <= x <= bx + w and by <= y <= by + h for bx, by, w, h in boxes)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert all(label in texts for label in regions["label"] if label)
    assert "squeezenet1_0 (1x3x224x224) on edge-npu, buffer 128 KiB" in fig.get_suptitle()


def test_diff_names_the_groups_that_differ(plans):
    a, b = open_plan(plans["lbdf"]), open_plan(plans["brr"])
    table = diff_table(a, b)
    groups_a = {tuple(c.ops) for c in a.cost.groups}
    groups_b = {tuple(c.ops) for c in b.cost.groups}
    assert (table["status"] == "same").sum() == len(groups_a & groups_b)
    assert (table["status"] == "only A").sum() == len(groups_a - groups_b)
    assert (table["status"] == "only B").sum() == len(groups_b - groups_a)
    assert table["dram_a"].sum() == a.cost.dram_bytes
    assert table["dram_b"].sum() == b.cost.dram_bytes
    itself = diff_table(a, a)
    assert set(itself["status"]) == {"same"}


def test_show_and_diff_commands(cli, plans, tmp_path):
    out = tmp_path / "plan.svg"
    code, text, err = cli("show", str(plans["lbdf"]), "--out", str(out))
    assert code == 0, err
    assert "LBDF plan:" in text and str(out) in text
    svg = out.read_text()
    assert "G0:" in svg and "edge-npu" in svg
    code, text, err = cli("diff", str(plans["lbdf"]), str(plans["brr"]), "--out",
                          str(tmp_path / "d.png"), "--format", "json")
    assert code == 0, err
    doc = json.loads(text)
    assert {g["status"] for g in doc["groups"]} <= {"same", "only A", "only B"}
    assert (tmp_path / "d.png").stat().st_size > 5000


@pytest.mark.parametrize("argv,match", [
    (["show", "{T}/missing.json"], "missing.json"),
    (["show", "{lbdf}", "--out", "{T}/x.gif"], "use a .png, .svg or .pdf file"),
    (["show", "{T}/bare.json"], "names no model; give it with --model"),
    (["diff", "{lbdf}", "{T}/other.json"], "the two plans are of different networks"),
])
def test_bad_input_is_one_line(cli, plans, tmp_path, argv, match):
    (tmp_path / "bare.json").write_text(json.dumps({"groups": [[0]]}))
    if "other.json" in argv[-1]:
        from fusion_dse.api import evaluate

        other = evaluate("resnet18", graph_stages="none").graph  # a plan file without stages
        (tmp_path / "other.json").write_text(json.dumps({"model": "resnet18", "groups": [
            [op.name] for op in other]}))
    argv = [a.format(T=tmp_path, lbdf=plans["lbdf"]) for a in argv]
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert match in err and len(err.strip().splitlines()) == 1
