"""Committed results record the cost models they were made with (experiments/provenance.py,
simulator/fingerprint.py): every committed result matches the code's fingerprint or is marked
stale with its reason; a changed cost model changes the fingerprint and fails the check; the
record's bookkeeping (content digests, unrecorded results, stale marks, the fingerprint of a
store's points) on a temporary tree."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))

import provenance  # noqa: E402

from simulator import fingerprint as fpm  # noqa: E402
from simulator.cost import COST_MODELS  # noqa: E402
from simulator.cost import evaluate as cost_evaluate  # noqa: E402
from simulator.dataflow import dataflow  # noqa: E402
from simulator.scheme import Scheme  # noqa: E402


def test_every_committed_result_matches_the_code_or_is_marked_stale():
    problems = provenance.check()
    assert problems == [], "\n".join(problems)


def test_the_fingerprint_is_the_same_on_a_second_computation_and_leaves_the_version_out():
    first = provenance.current()
    again = fpm.compute(version="99.0")
    assert again.digest == first.digest and again.scopes == first.scopes
    assert again.parts == first.parts and again.totals == first.totals
    assert again.version == "99.0" != first.version
    assert set(first.scopes) == set(fpm.SCOPES) and first.scopes["all"] == first.digest
    assert len(first.totals) == sum(  # every network x buffer x dataflow x plan
        len(fpm.BUFFERS) * (2 * len(fpm.CASES) - 1) for _ in fpm.NETWORKS)


@pytest.fixture
def fresh_costs():
    """Plan-level caches emptied before and after (they would keep the other code's costs)."""
    cost_evaluate._context.cache_clear()
    yield
    cost_evaluate._context.cache_clear()


def test_a_changed_cost_model_changes_the_fingerprint_and_fails_the_check(
        monkeypatch, fresh_costs, tmp_path):
    code = provenance.current()
    brr = COST_MODELS[Scheme.BRR]

    def one_more_byte(graph, ops, hw):  # BRR writes one byte more per group
        cost = brr(graph, ops, hw)
        return dataclasses.replace(cost, dram_write=cost.dram_write + 1)

    monkeypatch.setattr(dataflow(Scheme.BRR), "cost", one_more_byte)  # the cost model's seam
    changed = fpm.compute()
    assert changed.digest != code.digest and changed.scopes["cnn"] != code.scopes["cnn"]
    moved = {k for k in code.parts if changed.parts[k] != code.parts[k]}
    assert "dram" in moved and not moved & {"buffer", "fits", "cycles", "energy"}
    assert {f"net:{n}" for n in fpm.NETWORKS} <= moved  # BRR runs on every network
    assert all(k.split("/")[2] == "brr" for k in changed.totals
               if changed.totals[k] != code.totals[k])

    # the committed results, as if each had been made with the code's figures: all fail now
    record = provenance.load_record()
    for entry in record["results"].values():
        entry.pop("stale", None)
        entry["fingerprint"] = code.scopes[entry["scope"]]
    provenance._note_current(record, code, None)  # what the renderers would have recorded
    rewritten = tmp_path / "provenance.json"
    rewritten.write_text(json.dumps(record))
    assert provenance.check(rewritten, provenance.ROOT, fp=code) == []
    problems = provenance.check(rewritten, provenance.ROOT, fp=changed)
    for name in record["results"]:
        assert any(p.startswith(f"{name}: made with cost-model fingerprint") for p in problems)
    assert problems[-1].startswith("fingerprint ") and "parts changed: " in problems[-1]
    # a result recorded on a tree of its own, with the code's fingerprint
    tree, rec = _tree(tmp_path)
    provenance.record_outputs([tree / "experiments/results/t.md"], argv=["make", "t"],
                              record_path=rec, root=tree, fp=code)
    assert provenance.check(rec, tree, fp=code) == []
    problem, why = provenance.check(rec, tree, fp=changed)
    assert problem == (f"experiments/results/t.md: made with cost-model fingerprint "
                       f"{code.digest} (all scope), the code's is {changed.digest}")
    assert why.startswith(f"fingerprint {code.digest} -> {changed.digest}: parts changed: ")
    assert "dram" in why and "/brr/" in why and "buffer" not in why.split(";")[0]


def test_an_energy_change_leaves_results_of_dram_alone_current(monkeypatch, fresh_costs,
                                                                 tmp_path):
    """A result that shows only DRAM, buffer use and fit (a ``/dram`` scope) stays current when
    only the energy model moves; one that shows energy does not."""
    code = provenance.current()
    brr = COST_MODELS[Scheme.BRR]

    def dearer_macs(graph, ops, hw):  # every BRR MAC costs 1 pJ more: energy only
        cost = brr(graph, ops, hw)
        timing = dataclasses.replace(cost.timing,
                                     energy_mac_pj=cost.timing.energy_mac_pj + cost.macs)
        return dataclasses.replace(cost, timing=timing)

    monkeypatch.setattr(dataflow(Scheme.BRR), "cost", dearer_macs)
    changed = fpm.compute()
    moved = {k for k in code.parts if changed.parts[k] != code.parts[k]}
    assert "energy" in moved and not moved & {"dram", "buffer", "fits", "cycles"}
    assert changed.digest != code.digest and changed.scopes["cnn"] != code.scopes["cnn"]
    assert changed.scopes["cnn/dram"] == code.scopes["cnn/dram"]
    assert changed.scopes["all/dram"] == code.scopes["all/dram"]

    tree, rec = _tree(tmp_path)
    (tree / "experiments/results/e.md").write_text("| energy | 1 |\n")
    provenance.record_outputs([tree / "experiments/results/t.md"], argv=["tables"],
                              dram_only=True, record_path=rec, root=tree, fp=code)
    provenance.record_outputs([tree / "experiments/results/e.md"], argv=["energy"],
                              record_path=rec, root=tree, fp=code)
    entries = json.loads(rec.read_text())["results"]
    assert entries["experiments/results/t.md"]["scope"] == "all/dram"
    assert entries["experiments/results/t.md"]["fingerprint"] == code.scopes["all/dram"]
    problems = provenance.check(rec, tree, fp=changed)
    assert problems[0] == (f"experiments/results/e.md: made with cost-model fingerprint "
                           f"{code.digest} (all scope), the code's is {changed.digest}")
    assert len(problems) == 2 and problems[1].startswith(f"fingerprint {code.digest} -> ")
    changed_parts = problems[1].split("parts changed: ")[1].split(";")[0].split(", ")
    assert "energy" in changed_parts and "dram" not in changed_parts


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    tree = tmp_path / "repo"
    (tree / "experiments/results").mkdir(parents=True)
    (tree / "docs/images").mkdir(parents=True)
    (tree / "experiments/results/t.md").write_text("| a | 1 |\n")
    return tree, tree / "experiments/results/provenance.json"


def _fake(digest: str, cnn: str | None = None, dram: int = 100) -> SimpleNamespace:
    return SimpleNamespace(digest=digest, scopes={"all": digest, "cnn": cnn or f"c{digest}"},
                           version="0.1.0", parts={"dram": f"d{dram}", "buffer": "b"},
                           totals={"net/64KiB/brr/lbl": {"dram_bytes": dram, "mbu_bytes": 1,
                                                         "cycles": 2, "energy_pj": 3.0}})


def test_the_check_finds_changed_missing_unrecorded_and_mismatched_results(tmp_path):
    tree, rec = _tree(tmp_path)
    old, new = _fake("a1"), _fake("b2", dram=250)
    t = tree / "experiments/results/t.md"
    png = tree / "docs/images/t.png"
    png.write_bytes(b"png")
    assert provenance.expected(tree) == ["docs/images/t.png", "experiments/results/t.md"]
    provenance.record_outputs([t, tmp_path / "outside.md"], argv=["render", "x y"],
                              inputs=[tree / "s.sqlite"], record_path=rec, root=tree, fp=old)
    entry = json.loads(rec.read_text())["results"]["experiments/results/t.md"]
    assert entry["fingerprint"] == "a1" and entry["command"] == "render 'x y'"
    assert entry["inputs"] == ["s.sqlite"] and entry["scope"] == "all"
    assert list(json.loads(rec.read_text())["fingerprints"]) == ["a1"]
    assert provenance.check(rec, tree, fp=old) == [
        "docs/images/t.png: a committed result without a provenance record "
        "(python experiments/provenance.py record docs/images/t.png --command ...)"]
    provenance.record_outputs([png], argv=["plot"], record_path=rec, root=tree, fp=old)
    assert provenance.check(rec, tree, fp=old) == []

    t.write_text("| a | 2 |\n")
    (problem,) = provenance.check(rec, tree, fp=old)
    assert problem == "experiments/results/t.md: changed since it was recorded; re-run its " \
                      "command: render 'x y'"
    provenance.record_outputs([t], argv=["render"], record_path=rec, root=tree, fp=old)

    problems = provenance.check(rec, tree, fp=new)
    assert problems[:2] == [
        "docs/images/t.png: made with cost-model fingerprint a1 (all scope), the code's is b2",
        "experiments/results/t.md: made with cost-model fingerprint a1 (all scope), the "
        "code's is b2"]
    assert problems[2].startswith("fingerprint a1 -> b2: parts changed: dram; 1 reference "
                                  "totals moved, e.g. net/64KiB/brr/lbl dram_bytes 100 -> 250; "
                                  "regenerate them")
    assert len(problems) == 3
    assert provenance.mark_stale("cycles changed", ["docs/images/t.png"], rec, fp=new) \
        == ["docs/images/t.png"]
    assert provenance.mark_stale("cycles changed", record_path=rec, fp=new) \
        == ["experiments/results/t.md"]
    assert provenance.check(rec, tree, fp=new) == []
    assert provenance.check(rec, tree, fp=new, strict=True) == [
        "docs/images/t.png: stale: cycles changed",
        "experiments/results/t.md: stale: cycles changed"]
    provenance.record_outputs([t], argv=["render"], record_path=rec, root=tree, fp=new)
    assert "stale" not in json.loads(rec.read_text())["results"]["experiments/results/t.md"]
    png.unlink()
    assert provenance.check(rec, tree, fp=new) == ["docs/images/t.png: recorded but missing"]


def _rows(*configs: dict, models: tuple[str, ...] = ("resnet50",)) -> pd.DataFrame:
    return pd.DataFrame({"model": [models[i % len(models)] for i in range(len(configs))],
                         "config": [json.dumps(c) for c in configs],
                         "finished": [1.8e9 + i for i in range(len(configs))]})


def test_the_fingerprint_of_points_comes_from_the_source_they_ran_with():
    code = _fake("new")
    record = {"fingerprints": {"old": {"scopes": {"all": "old", "cnn": "cold"},
                                       "sources": ["src0", "src1"]}}, "results": {}}

    def fp_of(*configs):
        return provenance.data_fingerprint(_rows(*configs), record, code, "src2")

    assert fp_of({"cost_model": "src2", "version": "0.1.0"}) == ("new", None, "0.1.0")
    assert fp_of({"cost_model": "src0", "version": "0.1.0"},  # a refactor: same figures
                 {"cost_model": "src1", "version": "0.0.9"}) == ("old", None, "0.0.9, 0.1.0")
    digest, why, _ = fp_of({"cost_model": "src0"}, {"cost_model": "src2"})
    assert digest is None and why == "points made with 2 cost-model fingerprints"
    digest, why, _ = fp_of({"cost_model": "zzz"})
    assert digest is None and why == ("points made with cost-model source zzz, whose "
                                      "fingerprint is not recorded")
    assert fp_of({"cost_model": "zzz", "fingerprint": "f9"})[0] == "f9"  # the store says so
    digest, why, _ = provenance.data_fingerprint(
        pd.DataFrame({"model": ["x"], "config": [None]}), record, code, "src2")
    assert digest is None and "keyed configuration" in why


def test_a_result_on_cnns_records_the_cnn_scope(tmp_path, monkeypatch):
    tree, rec = _tree(tmp_path)
    code = _fake("all1", cnn="cnn1")
    src = provenance._source_digest()
    t = tree / "experiments/results/t.md"
    for models, scope, digest in ((("resnet50", "mobilenet_v2@256"), "cnn", "cnn1"),
                                  (("resnet50", "bert_base@128"), "all", "all1"),
                                  (("nets/my.onnx",), "all", "all1")):
        rows = _rows({"cost_model": src, "version": "0.1.0"},
                     {"cost_model": src, "version": "0.1.0"}, models=models)
        provenance.record_outputs([t], argv=["r"], rows=rows, record_path=rec, root=tree,
                                  fp=code)
        entry = json.loads(rec.read_text())["results"]["experiments/results/t.md"]
        assert (entry["scope"], entry["fingerprint"]) == (scope, digest), models
        assert entry["data_finished"] == "2027-01-15T08:00:01+00:00"
        assert provenance.check(rec, tree, fp=code) == []
    # points whose source is not known: recorded with no fingerprint; the check fails
    rows = _rows({"cost_model": "elsewhere", "version": "0.1.0"})
    provenance.record_outputs([t], argv=["r"], rows=rows, record_path=rec, root=tree, fp=code,
                              quiet=True)
    entry = json.loads(rec.read_text())["results"]["experiments/results/t.md"]
    assert entry["fingerprint"] is None and "elsewhere" in entry["unknown"]
    assert len(provenance.check(rec, tree, fp=code)) == 2  # the result, and why
