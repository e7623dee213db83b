"""Checkpoints: round trip, the shipped ones, and refusing tampered or mismatched files."""

from __future__ import annotations

import json

import pytest
import torch

from explain.checkpoint import (
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
    shipped_checkpoint,
    state_dict_sha256,
)
from explain.features import FEATURE_SCHEMA_VERSION
from explain.gnn import GnnSpec, ValidityGNN
from simulator.errors import InputError


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
