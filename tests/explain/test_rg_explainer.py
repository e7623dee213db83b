"""RG-Explainer: subgraphs scored exactly as groups, edges of the group each once, seeded
determinism, training and weights-only parameters, and the repair on a real invalid group."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import explain.checkpoint as checkpoint
from explain.checkpoint import CheckpointError
from explain.explainers import group_tensors
from explain.predict import load_predictor
from explain.rg_explainer import (
    RgConfig,
    RgExplainerGET,
    Rollout,
    SubgraphScorer,
    load_rg_policy,
    rank_edges,
    rg_checkpoint,
    train_rg_explainer,
)
from explain.tree_split import GetSplitter
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.partition import components
from simulator.workload.loader import load_zoo

SHIPPED = Path(checkpoint.CHECKPOINT_DIR)
GNN_DIRS = (SHIPPED, Path("/tmp/ckpt_test"))


def _gnn_dir() -> Path | None:
    return next((d for d in GNN_DIRS if (d / "lbdf.pt").is_file()), None)


@pytest.fixture(scope="module")
def network():
    """MobileNetV2 at 128 KiB (LBDF) and an invalid group of it without unfusable ops."""
    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, load_hw("edge-npu", {"buffer": "128KiB"}), "lbdf")
    unfusable = set(cache.unfusable)
    group = max(components(graph, [o for o in range(20, 44) if o not in unfusable]), key=len)
    assert not cache.group(group).fits
    return graph, cache, group


@pytest.fixture(scope="module")
def trained(network, tmp_path_factory):
    """A checkpoint directory with the LBDF GNN and RG parameters from a tiny training run."""
    source = _gnn_dir()
    if source is None:
        pytest.skip("no LBDF GNN checkpoint")
    graph, cache, group = network
    folder = tmp_path_factory.mktemp("checkpoints")
    for name in ("lbdf.pt", "lbdf.json"):
        shutil.copy(source / name, folder / name)
    hw = cache.hw
    samples = [(graph, g, hw.buffer_bytes, hw.dtype_bytes)
               for g in (group, group[:12], group[4:16], group[8:])
               if len(components(graph, g)) == 1 and not cache.group(g).fits]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint, "CHECKPOINT_DIR", folder)
        path = train_rg_explainer("lbdf", samples, epochs=2, seed=1,
                                  config=RgConfig(rollouts=2, batch_groups=2))
        yield folder, path, len(samples)


@pytest.fixture
def patched(trained, monkeypatch):
    monkeypatch.setattr(checkpoint, "CHECKPOINT_DIR", trained[0])
    return trained


def test_subgraphs_are_encoded_exactly_as_groups(network):
    source = _gnn_dir()
    if source is None:
        pytest.skip("no LBDF GNN checkpoint")
    graph, cache, group = network
    model = load_predictor("lbdf", source / "lbdf.pt").model
    scorer = SubgraphScorer(graph, group, cache.hw.buffer_bytes, cache.hw.dtype_bytes, model)
    rng = np.random.default_rng(0)
    masks = torch.from_numpy(rng.random((4, scorer.n)) < 0.6)
    masks[:, 0] = True
    logits = scorer.logits(masks)
    for mask, logit in zip(masks, logits, strict=True):
        ops = [o for o, keep in zip(scorer.order, mask.tolist(), strict=True) if keep]
        x, edge_index, _ = group_tensors(graph, ops, cache.hw.buffer_bytes, cache.hw.dtype_bytes)
        sub_x, sub_edges, _ = scorer.features(mask[None])
        assert torch.equal(sub_x, x)
        assert sorted(map(tuple, sub_edges.T.tolist())) == sorted(map(tuple, edge_index.T.tolist()))
        with torch.no_grad():
            assert float(model(x, edge_index)) == pytest.approx(float(logit), abs=1e-4)


def test_training_saves_weights_only_parameters_that_load(patched):
    folder, path, n_samples = patched
    assert path == rg_checkpoint("lbdf") == folder / "rg-lbdf.pt"
    payload = torch.load(path, weights_only=True)
    assert payload["scheme"] == "lbdf" and payload["samples"] == n_samples
    assert payload["epochs"] == 2 and len(payload["log"]) == 2
    assert RgConfig.from_dict(payload["config"]) == RgConfig(rollouts=2, batch_groups=2)
    policy, _ = load_rg_policy(path, "lbdf")
    for name, tensor in policy.state_dict().items():
        assert torch.equal(tensor, payload["state_dict"][name])
    with pytest.raises(CheckpointError, match="not 'brr'"):
        load_rg_policy(path, "brr")


def test_parameters_of_another_gnn_are_refused(patched, tmp_path):
    payload = torch.load(patched[1], weights_only=True)
    payload["gnn_sha256"] = "0" * 64
    torch.save(payload, tmp_path / "stale.pt")
    with pytest.raises(CheckpointError, match="another lbdf GNN"):
        load_rg_policy(tmp_path / "stale.pt", "lbdf")
    with pytest.raises(CheckpointError, match="does not exist"):
        load_rg_policy(tmp_path / "missing.pt", "lbdf")


def test_supports_needs_trained_parameters(patched, monkeypatch, tmp_path):
    assert RgExplainerGET().supports("lbdf")
    assert not RgExplainerGET().supports("lbl")
    monkeypatch.setattr(checkpoint, "CHECKPOINT_DIR", tmp_path)
    assert not RgExplainerGET().supports("lbdf")


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "sampled"])
def test_each_group_edge_once_and_seeded(patched, network, greedy):
    graph, cache, group = network
    explainer = RgExplainerGET(greedy=greedy)
    torch_state = torch.get_rng_state()
    edges = explainer.explain(graph, group, cache, np.random.default_rng(3))
    assert torch.equal(torch.get_rng_state(), torch_state)  # global torch RNG untouched
    assert sorted(edges) == sorted(graph.internal_edges(group)) and len(set(edges)) == len(edges)
    assert explainer.explain(graph, group, cache, np.random.default_rng(3)) == edges
    assert explainer.explain(graph, group[:1], cache, np.random.default_rng(3)) == []


def test_boundary_of_the_core_first_then_its_tipping_edge(network):
    source = _gnn_dir()
    if source is None:
        pytest.skip("no LBDF GNN checkpoint")
    graph, cache, group = network
    model = load_predictor("lbdf", source / "lbdf.pt").model
    scorer = SubgraphScorer(graph, group, cache.hw.buffer_bytes, cache.hw.dtype_bytes, model)
    local = {o: k for k, o in enumerate(scorer.order)}
    core = [local[o] for o in group[3:8]]  # a chain of the inverted residual: grown in order
    result = Rollout(core, [9.0, 5.0, 2.0, -3.0, -6.0], [0, 1, 2, 3, 4], True,
                     torch.zeros(()), [], [], torch.zeros(()))
    ranked = rank_edges(scorer, result)
    members = set(group[3:8])
    crossing = [e for e in ranked if (e[0] in members) != (e[1] in members)]
    assert ranked[:len(crossing)] == crossing and crossing
    tipping = [e for e in graph.internal_edges(group[3:7]) if group[6] in e]
    assert ranked[len(crossing):len(crossing) + len(tipping)] == tipping
    assert sorted(ranked) == sorted(graph.internal_edges(group))


def test_repair_of_a_real_invalid_group_yields_fitting_pieces(patched, network):
    graph, cache, group = network
    splitter = GetSplitter(RgExplainerGET(), max_edges=4)
    pieces = splitter.split(graph, group, cache, np.random.default_rng(0))
    assert sorted(o for p in pieces for o in p) == list(group)
    assert all(cache.group(p).fits for p in pieces)
    assert splitter.stats.requests == 1 and splitter.stats.explanations >= 1
    assert splitter.stats.fallbacks == 0  # Algorithm 1 found the pieces, not the random split


@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_shipped_parameters_explain_the_shipped_gnn(scheme, monkeypatch):
    monkeypatch.setattr(checkpoint, "CHECKPOINT_DIR", SHIPPED)  # the module fixture patches it
    policy, config = load_rg_policy(SHIPPED / f"rg-{scheme}.pt", scheme)
    assert isinstance(config, RgConfig) and not policy.training
    payload = torch.load(SHIPPED / f"rg-{scheme}.pt", weights_only=True)
    assert payload["epochs"] == 10 and payload["samples"] >= 200
