"""Explainers behind one protocol: only edges of the group, each once; seeded determinism;
global random state untouched; `fusion-dse explain`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from explain.explainers import GnnExplainerGET, PgExplainerGET
from explain.tree_split import AllEdgesExplainer, GetSplitter
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.partition import components
from simulator.workload.loader import load_zoo


@pytest.fixture(scope="module")
def invalid_group():
    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, load_hw("edge-npu", {"buffer": "128KiB"}), "lbdf")
    unfusable = set(cache.unfusable)
    group = max(components(graph, [o for o in range(20, 44) if o not in unfusable]), key=len)
    assert not cache.group(group).fits
    return graph, group, cache


EXPLAINERS = [AllEdgesExplainer(), GnnExplainerGET(epochs=30), PgExplainerGET()]


@pytest.mark.parametrize("explainer", EXPLAINERS, ids=lambda e: e.name)
def test_explainers_return_each_group_edge_once_and_are_seeded(explainer, invalid_group):
    graph, group, cache = invalid_group
    if not explainer.supports("lbdf"):
        pytest.fail(f"{explainer.name}: trained parameters are not shipped")
    torch_state = torch.get_rng_state()
    edges = explainer.explain(graph, group, cache, np.random.default_rng(3))
    assert torch.equal(torch.get_rng_state(), torch_state)  # global torch RNG untouched
    assert sorted(edges) == sorted(graph.internal_edges(group)) and len(set(edges)) == len(edges)
    again = explainer.explain(graph, group, cache, np.random.default_rng(3))
    assert again == edges


@pytest.mark.parametrize("explainer", EXPLAINERS[1:], ids=lambda e: e.name)
def test_explanation_guided_repair_yields_fitting_pieces(explainer, invalid_group):
    graph, group, cache = invalid_group
    splitter = GetSplitter(explainer, max_edges=4)
    pieces = splitter.split(graph, group, cache, np.random.default_rng(0))
    assert sorted(o for p in pieces for o in p) == list(group)
    assert all(cache.group(p).fits for p in pieces)
    assert splitter.stats.requests == 1 and splitter.stats.explanations >= 1
    assert splitter.stats.explain_seconds > 0


def test_explain_command(cli, tmp_path):
    png = tmp_path / "explain.png"
    code, out, err = cli("explain", "mobilenet_v2", "--group", "20:43", "--buffer", "64KiB",
                         "--explainer", "alledges", "--top", "5", "--plot", str(png),
                         "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["fits"] is False and doc["rectified"] is True
    assert len(doc["explained_edges"]) == 5 and len(doc["pieces"]) >= 2
    assert all(p["fits"] for p in doc["pieces"]) and doc["cut"]
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv, message", [
    (["--group", "20:99999"], "op ids must lie in"),
    (["--group", "nonsense_op"], "is not an op of"),
    (["--group", "20,40"], "is not connected"),
    (["--group", "20:30", "--top", "0"], "--top must be positive"),
])
def test_explain_bad_input(cli, argv, message):
    code, _, err = cli("explain", "mobilenet_v2", "--explainer", "alledges", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
