"""The prediction API: agreement of the shipped checkpoints with the cost model; its contract."""

from __future__ import annotations

import numpy as np
import pytest

from explain.checkpoint import CheckpointError, save_checkpoint
from explain.dataset import DatasetConfig, generate_dataset
from explain.gnn import GnnSpec, ValidityGNN
from explain.predict import load_predictor, predict_valid
from simulator.errors import InputError
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo

EDGE = load_hw("edge-npu")

FRESH_SEED = 20240917  # the shipped checkpoints were trained with seed 0


def agreement(ds) -> float:
    """Share of samples where predict_valid (thresholded at 0.5) equals the cost model."""
    hits = 0
    for k, name in enumerate(ds.networks):
        graph = load_zoo(name)
        rows = np.flatnonzero(ds.network_index == k)
        for b, kib in enumerate(ds.config.buffers_kib):
            hw = load_hw("edge-npu", {"buffer": f"{kib}KiB"})
            p = predict_valid(graph, [ds.ops[r] for r in rows], hw, ds.config.scheme)
            hits += int(((p > 0.5) == ds.labels[rows, b]).sum())
    return hits / ds.num_samples


@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_shipped_checkpoints_agree_with_the_cost_model(scheme):
    assert load_predictor(scheme).metadata["dataset"]["config"]["seed"] != FRESH_SEED
    networks = (("squeezenet1_1", 60), ("mobilenet_v2", 60), ("resnet18", 60))
    ds = generate_dataset(DatasetConfig(scheme, networks, seed=FRESH_SEED, hw=EDGE))
    assert agreement(ds) >= 0.95


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_shipped_checkpoints_generalise_to_held_out_networks(scheme):
    networks = (("resnet50", 150), ("deeplabv3_mobilenet_v3_large", 150)) if scheme == "lbdf" \
        else (("resnet50", 150), ("resnet152", 150))
    ds = generate_dataset(DatasetConfig(scheme, networks, seed=FRESH_SEED, hw=EDGE))
    assert agreement(ds) >= 0.90


def test_probabilities_one_per_group(residual):
    hw = load_hw("edge-npu", {"buffer": "128KiB"})
    p = predict_valid(residual, [(0, 1), [2, 3, 4], (0, 1, 2, 3, 4)], hw, "lbdf")
    assert p.shape == (3,) and p.dtype == np.float64
    assert ((p >= 0) & (p <= 1)).all()
    assert predict_valid(residual, [], hw, "lbdf").shape == (0,)


def test_larger_buffers_do_not_make_a_group_less_likely_to_fit():
    graph = load_zoo("resnet18")
    group = [(4, 5, 6, 7, 8, 9)]
    p = [predict_valid(graph, group, load_hw("edge-npu", {"buffer": f"{kib}KiB"}), "lbdf")[0]
         for kib in (128, 2048)]
    assert p[1] >= p[0]


def test_bad_groups_are_refused(residual):
    with pytest.raises(InputError, match="cannot encode group"):
        predict_valid(residual, [(0, 17)], load_hw("edge-npu"), "lbdf")


def test_the_predictor_is_loaded_once():
    assert load_predictor("lbdf") is load_predictor("lbdf")


def test_another_checkpoint_can_be_given_and_is_verified(tmp_path, residual):
    path = tmp_path / "mine.pt"
    save_checkpoint(path, "brr", GnnSpec(), ValidityGNN().state_dict(), {})
    p = predict_valid(residual, [(0, 1)], load_hw("edge-npu"), "brr", checkpoint=path)
    assert p.shape == (1,)
    with pytest.raises(CheckpointError, match="classifies 'brr' groups, not 'lbdf'"):
        predict_valid(residual, [(0, 1)], load_hw("edge-npu"), "lbdf", checkpoint=path)
    with pytest.raises(CheckpointError, match="does not exist"):
        predict_valid(residual, [(0, 1)], load_hw("edge-npu"), "lbdf",
                      checkpoint=tmp_path / "none.pt")
