"""Checkpoints per graph stage: the networks as imported (``lbdf.pt``) and after the fuse stage
(``lbdf-fused.pt``); the one used follows the graph the run searches, and the files record
the stage they were trained for."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explain.checkpoint import (
    CHECKPOINT_DIR,
    CheckpointError,
    graph_stages_of,
    load_checkpoint,
    load_explainer_checkpoint,
    shipped_checkpoint,
)
from explain.dataset import DatasetConfig, load_network, training_config
from explain.explainers import GnnExplainerGET, PgExplainerGET, pg_checkpoint
from explain.predict import load_predictor, predict_valid
from explain.rg_explainer import RgExplainerGET, rg_checkpoint
from search.substitution.stages import run_stages
from simulator.cost import CostCache
from simulator.errors import InputError
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo

SCHEMES = ("lbdf", "brr")


@pytest.fixture(scope="module")
def graphs():
    imported = load_zoo("mobilenet_v2")
    return {"none": imported, "fuse": run_stages(imported, "fuse").graph}


def test_the_stage_of_a_graph_is_read_from_its_ops(graphs):
    assert graph_stages_of(graphs["none"]) == "none"
    assert graph_stages_of(graphs["fuse"]) == "fuse"
    hw = load_hw("edge-npu")
    # fission alone leaves activations unfused; all = fuse + fission + ...: fused
    assert graph_stages_of(run_stages(graphs["none"], "fission", hw, "lbdf").graph) == "none"
    assert graph_stages_of(load_network("resnet18", "fuse")) == "fuse"


def test_file_names_per_stage():
    assert shipped_checkpoint("lbdf") == CHECKPOINT_DIR / "lbdf.pt"
    assert shipped_checkpoint("brr", "fuse") == CHECKPOINT_DIR / "brr-fused.pt"
    assert pg_checkpoint("lbdf", "fuse") == CHECKPOINT_DIR / "pg-lbdf-fused.pt"
    assert rg_checkpoint("brr") == CHECKPOINT_DIR / "rg-brr.pt"
    with pytest.raises(CheckpointError, match="trained for none or fuse only"):
        shipped_checkpoint("lbdf", "fission")


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("stage", ["none", "fuse"])
def test_shipped_checkpoints_record_their_stage(scheme, stage):
    loaded = load_checkpoint(shipped_checkpoint(scheme, stage), scheme, stage)
    assert loaded.graph_stages == stage
    config = loaded.metadata["dataset"]["config"]
    assert config.get("graph_stages", "none") == stage
    assert json.loads(shipped_checkpoint(scheme, stage).with_suffix(".json").read_text())[
        "graph_stages"] == stage
    other = {"none": "fuse", "fuse": "none"}[stage]
    with pytest.raises(CheckpointError, match="trained on graphs after stage"):
        load_checkpoint(shipped_checkpoint(scheme, stage), scheme, other)
    for kind, path in (("pg", pg_checkpoint(scheme, stage)), ("rg", rg_checkpoint(scheme, stage))):
        payload = load_explainer_checkpoint(path, kind, scheme,
                                            lambda: load_predictor(scheme, graph_stages=stage))
        assert payload.get("graph_stages", "none") == stage
        with pytest.raises(CheckpointError, match="trained on another"):
            load_explainer_checkpoint(path, kind, scheme,
                                      lambda: load_predictor(scheme, graph_stages=other))


def test_the_fused_gnn_was_trained_on_fused_networks():
    meta = load_predictor("lbdf", graph_stages="fuse").metadata
    assert meta["dataset"]["config"]["graph_stages"] == "fuse"
    assert meta["training"]["epochs"] >= 30
    assert meta["metrics"]["test"]["accuracy"] >= 0.95


def test_dataset_configs_name_their_stage():
    hw = load_hw("edge-npu")
    plain = training_config("lbdf", hw=hw)
    fused = training_config("lbdf", hw=hw, graph_stages="fuse")
    assert "graph_stages" not in plain.to_dict()  # the cache keys of before graph stages
    assert fused.to_dict()["graph_stages"] == "fuse"
    with pytest.raises(InputError, match="none or fuse only"):
        DatasetConfig("lbdf", (("vgg16", 3),), hw=hw, graph_stages="fission")


def _spy(monkeypatch):
    """Record the graph stage of every GNN loaded through `load_predictor`."""
    import explain.explainers
    import explain.predict
    import explain.rg_explainer

    seen: list[str | None] = []
    real = explain.predict.load_predictor

    def spy(scheme, checkpoint=None, graph_stages=None):
        seen.append(graph_stages)
        return real(scheme, checkpoint, graph_stages)

    for module in (explain.predict, explain.explainers, explain.rg_explainer):
        monkeypatch.setattr(module, "load_predictor", spy)
    return seen


@pytest.mark.parametrize("make", [GnnExplainerGET, PgExplainerGET, RgExplainerGET])
def test_explainers_choose_the_checkpoint_of_the_graph(graphs, make, monkeypatch):
    seen = _spy(monkeypatch)
    hw = load_hw("edge-npu")
    get = make(epochs=5) if make is GnnExplainerGET else make()
    for stage, graph in graphs.items():
        seen.clear()
        cache = CostCache(graph, hw, "lbdf")
        group = tuple(range(4, 12))
        edges = get.explain(graph, group, cache, np.random.default_rng(0))
        assert edges and set(edges) <= set(graph.internal_edges(group))
        assert seen and set(seen) == {stage}
    # a fixed stage overrides the graph's
    seen.clear()
    fixed = make(epochs=5, graph_stages="none") if make is GnnExplainerGET \
        else make(graph_stages="none")
    fixed.explain(graphs["fuse"], tuple(range(4, 12)), CostCache(graphs["fuse"], hw, "lbdf"),
                  np.random.default_rng(0))
    assert set(seen) == {"none"}


def test_predict_valid_follows_the_graph(graphs, monkeypatch):
    seen = _spy(monkeypatch)
    hw = load_hw("edge-npu")
    for stage, graph in graphs.items():
        seen.clear()
        p = predict_valid(graph, [(4, 5, 6)], hw, "lbdf")
        assert p.shape == (1,) and set(seen) == {stage}


@pytest.mark.parametrize("stages, expected", [("none", "none"), ("fuse", "fuse")])
def test_a_run_uses_the_checkpoints_of_its_graph_stage(stages, expected, monkeypatch):
    from fusion_dse.optimization import optimize

    seen = _spy(monkeypatch)
    result = optimize("mobilenet_v2", scheme="lbdf", search="rs", repair="rg", budget=6,
                      seed=0, compute_optimum=False, graph_stages=stages,
                      overrides={"buffer": "128KiB"})
    assert result.summary.splitter["requests"] > 0
    assert seen and set(seen) == {expected}


def test_refined_rg_ranking_cuts_every_invalid_block():
    """A fused MobileNetV2 group over the buffer in two blocks (ops 42-49 at 128 KiB): the
    first explanation's top four edges cut one block into single ops and leave the other
    whole; the refined ranking explains the rest and its top four rectify the group."""
    from explain.rg_explainer import SubgraphScorer, cut_pieces

    graph = load_network("mobilenet_v2", "fuse")
    cache = CostCache(graph, load_hw("edge-npu").with_overrides(buffer="128KiB"), "lbdf")
    group = tuple(range(42, 50))
    assert not cache.run(group).fits
    scorer = SubgraphScorer(graph, group, cache.hw.buffer_bytes, 1,
                            load_predictor("lbdf", graph_stages="fuse").model)

    def rectified(edges):
        return all(cache.run(tuple(scorer.order[v] for v in p)).fits
                   for p in cut_pieces(scorer, edges[:4]))

    rng = np.random.default_rng(0)
    plain = RgExplainerGET(refine=False).explain(graph, group, cache, rng)
    refined = RgExplainerGET().explain(graph, group, cache, rng)
    assert sorted(plain) == sorted(refined) == sorted(graph.internal_edges(group))
    assert not rectified(plain) and rectified(refined)
