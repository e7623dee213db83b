"""Checkpoints of the GNN and the explainers: round trip, the shipped ones, and refusing
tampered, damaged or mismatched files in one line."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from explain.checkpoint import (
    CHECKPOINT_DIR,
    FORMATS,
    CheckpointError,
    load_checkpoint,
    load_explainer_checkpoint,
    save_checkpoint,
    save_explainer_checkpoint,
    shipped_checkpoint,
    state_dict_sha256,
)
from explain.explainers import PgExplainerGET
from explain.features import FEATURE_SCHEMA_VERSION
from explain.gnn import GnnSpec, ValidityGNN
from explain.predict import load_predictor
from explain.rg_explainer import load_rg_policy
from simulator.cost import CostCache
from simulator.errors import InputError
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo


@pytest.fixture
def saved(tmp_path):
    model = ValidityGNN()
    path = tmp_path / "lbdf.pt"
    save_checkpoint(path, "lbdf", GnnSpec(), model.state_dict(), {"metrics": {"test": {}}})
    return path, model


def _rewrite(path, change):
    payload = torch.load(path, weights_only=True)
    change(payload)
    torch.save(payload, path)


def _rewrite_json(path, change):
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    change(meta)
    meta_path.write_text(json.dumps(meta))


def test_round_trip(saved):
    path, model = saved
    loaded = load_checkpoint(path, "lbdf")
    assert loaded.scheme == "lbdf" and not loaded.model.training
    for k, v in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[k], v)
    meta = loaded.metadata
    assert meta["feature_schema_version"] == FEATURE_SCHEMA_VERSION
    assert meta["state_dict_sha256"] == state_dict_sha256(model.state_dict())
    assert meta["metrics"] == {"test": {}}


def test_the_file_is_weights_only_loadable(saved):
    payload = torch.load(saved[0], weights_only=True)
    assert set(payload) >= {"state_dict", "feature_schema_version", "architecture", "scheme"}


def _tamper_weight(payload):
    payload["state_dict"]["head.0.bias"][0] += 1e-3


@pytest.mark.parametrize("damage, message", [
    (lambda p: _rewrite(p, _tamper_weight), "do not match the SHA-256"),
    (lambda p: p.write_bytes(p.read_bytes()[:200]), "not a readable weights-only"),
    (lambda p: _rewrite(p, lambda d: d.update(feature_schema_version=0)), "feature schema 0"),
    (lambda p: _rewrite_json(p, lambda d: d.update(feature_schema_version=99)),
     "feature schema 99"),
    (lambda p: _rewrite(p, lambda d: d["architecture"].update(hidden=64)), "architecture"),
    (lambda p: _rewrite(p, lambda d: d.update(format="something else")), "not a fusion-dse"),
    (lambda p: _rewrite(p, lambda d: d.update(scheme="brr")), "weights are for 'brr'"),
    (lambda p: p.with_suffix(".json").unlink(), "metadata 'lbdf.json' is missing"),
    (lambda p: p.unlink(), "does not exist"),
])
def test_damaged_checkpoints_are_refused_in_one_line(saved, damage, message):
    path, _ = saved
    damage(path)
    with pytest.raises(CheckpointError, match=message) as info:
        load_checkpoint(path)
    assert isinstance(info.value, InputError) and "\n" not in str(info.value)


def test_a_state_dict_that_does_not_fit_is_refused(tmp_path):
    state = ValidityGNN().state_dict()
    del state["head.0.bias"]
    path = tmp_path / "lbdf.pt"
    save_checkpoint(path, "lbdf", GnnSpec(), state, {})
    with pytest.raises(CheckpointError, match="does not fit the model"):
        load_checkpoint(path)


def test_another_dataflow_is_refused(saved):
    with pytest.raises(CheckpointError, match="classifies 'lbdf' groups, not 'brr'"):
        load_checkpoint(saved[0], "brr")


@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_shipped_checkpoints_load_and_document_themselves(scheme):
    loaded = load_checkpoint(shipped_checkpoint(scheme), scheme)
    meta = loaded.metadata
    for key in ("metrics", "dataset", "held_out_dataset", "training", "versions"):
        assert key in meta
    for part in ("test", "val"):
        assert set(meta["metrics"][part]) >= {"accuracy", "f1", "precision", "recall"}
    assert "all" in meta["metrics"]["held_out"]
    assert meta["dataset"]["groups"] >= 10_800 and meta["dataset"]["samples"] >= 54_000
    assert meta["training"]["epochs"] == 50
    assert {"seconds", "threads", "seed"} <= set(meta["training"])
    assert {"torch", "torch_geometric"} <= set(meta["versions"])


# --- explainer parameters: the same reader --------------------------------------------------


@pytest.mark.parametrize("kind", ["pg", "rg"])
@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_shipped_explainer_parameters_name_their_format_and_gnn(kind, scheme):
    gnn = load_predictor(scheme)
    payload = load_explainer_checkpoint(CHECKPOINT_DIR / f"{kind}-{scheme}.pt", kind, scheme,
                                        lambda: gnn)
    assert payload["format"] == FORMATS[kind] and payload["scheme"] == scheme
    assert payload["gnn_sha256"] == gnn.metadata["state_dict_sha256"]


@pytest.fixture(scope="module")
def small_group():
    graph = load_zoo("squeezenet1_0")
    group = (1, 2, 3, 4)
    assert graph.internal_edges(group)
    return graph, group, CostCache(graph, load_hw("edge-npu"), "lbdf")


def _pg_explain(path, small_group):
    graph, group, cache = small_group
    return PgExplainerGET(checkpoint=path).explain(graph, group, cache, np.random.default_rng(0))


def _rg_load(path, _):
    return load_rg_policy(path, "lbdf")


def _rename_a_weight(payload):
    state = payload["state_dict"]
    state["renamed"] = state.pop(next(iter(state)))


def _rename_and_redigest(payload):
    _rename_a_weight(payload)
    payload["state_dict_sha256"] = state_dict_sha256(payload["state_dict"])


def _flip_a_weight_byte(payload):
    tensor = next(iter(payload["state_dict"].values()))
    tensor.view(-1).view(torch.uint8)[0] ^= 1


@pytest.mark.parametrize("kind, load", [("pg", _pg_explain), ("rg", _rg_load)])
@pytest.mark.parametrize("damage, message", [
    (lambda p: p.write_bytes(p.read_bytes()[:100]), "not a readable weights-only"),
    (lambda p: p.write_bytes(b"not a torch file"), "not a readable weights-only"),
    (lambda p: torch.save({"x": object()}, p), "not a readable weights-only"),
    (lambda p: torch.save([1, 2], p), "is not a fusion-dse"),
    (lambda p: _rewrite(p, lambda d: d.pop("format")), "is not a fusion-dse"),
    (lambda p: _rewrite(p, lambda d: d.update(format=FORMATS["gnn"])), "is not a fusion-dse"),
    (lambda p: _rewrite(p, lambda d: d.pop("state_dict")), "lacks 'state_dict'"),
    (lambda p: _rewrite(p, lambda d: d.pop("gnn_sha256")), "lacks 'gnn_sha256'"),
    (lambda p: _rewrite(p, lambda d: d.update(gnn_sha256="0" * 64)), "another lbdf GNN"),
    (lambda p: _rewrite(p, lambda d: d.update(scheme="brr")), "explain 'brr' groups, not"),
    (lambda p: _rewrite(p, _rename_a_weight), "do not match the SHA-256"),
    (lambda p: _rewrite(p, _rename_and_redigest), "does not fit the model"),
    (lambda p: _rewrite(p, _flip_a_weight_byte), "do not match the SHA-256"),
    (lambda p: _rewrite(p, lambda d: d.pop("state_dict_sha256")), "lacks 'state_dict_sha256'"),
    (lambda p: _rewrite(p, lambda d: d.update(state_dict=[1])), "do not match the SHA-256"),
    (lambda p: p.unlink(), "does not exist"),
])
def test_damaged_explainer_parameters_are_refused_in_one_line(kind, load, damage, message,
                                                              tmp_path, small_group):
    path = tmp_path / f"{kind}-lbdf.pt"
    shutil.copy(CHECKPOINT_DIR / f"{kind}-lbdf.pt", path)
    damage(path)
    with pytest.raises(CheckpointError, match=message) as info:
        load(path, small_group)
    assert isinstance(info.value, InputError) and "\n" not in str(info.value)


def test_explainer_parameters_round_trip(tmp_path):
    gnn = load_predictor("lbdf")
    state = {"w": torch.arange(6.0).reshape(2, 3)}
    path = save_explainer_checkpoint(tmp_path / "sub" / "pg.pt", "pg", gnn, state, epochs=3)
    payload = load_explainer_checkpoint(path, "pg", "lbdf", lambda: gnn, keys=("epochs",))
    assert torch.equal(payload["state_dict"]["w"], state["w"]) and payload["epochs"] == 3
    with pytest.raises(CheckpointError, match="lacks 'seed'"):
        load_explainer_checkpoint(path, "pg", "lbdf", lambda: gnn, keys=("seed",))
    with pytest.raises(CheckpointError, match="is not a fusion-dse RG-Explainer"):
        load_explainer_checkpoint(path, "rg", "lbdf", lambda: gnn)
    with pytest.raises(CheckpointError, match="explain 'lbdf' groups, not 'brr'"):
        load_explainer_checkpoint(path, "pg", "brr", lambda: load_predictor("brr"))
    with pytest.raises(CheckpointError, match="trained on another lbdf GNN"):
        load_explainer_checkpoint(path, "pg", "lbdf", lambda: load_predictor("brr"))
