"""The validity GNN: model shape, metrics, the group split and a small training run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explain.dataset import DatasetConfig, generate_dataset
from explain.features import KINDS, NUM_FEATURES
from explain.gnn import GnnSpec, ValidityGNN
from explain.train import (
    TrainConfig,
    binary_metrics,
    evaluate_model,
    split_groups,
    threads,
    train_model,
)
from simulator.errors import InputError
from simulator.hw import load_hw

EDGE = load_hw("edge-npu")

NETWORKS = (("squeezenet1_1", 60), ("resnet18", 40))


@pytest.fixture(scope="module")
def trained():
    """A few hundred samples, a few epochs (the issue's smoke run), and fresh data to test on."""
    ds = generate_dataset(DatasetConfig("lbdf", NETWORKS, seed=11, hw=EDGE))
    fresh = generate_dataset(DatasetConfig("lbdf", (("squeezenet1_0", 40), ("resnet18", 40)),
                                           seed=12, hw=EDGE))
    result = train_model(ds, TrainConfig(epochs=8, batch_size=32, lr=3e-3, seed=1))
    return ds, fresh, result


def test_model_gives_one_logit_per_graph():
    model = ValidityGNN()
    x = torch.rand(7, NUM_FEATURES)
    edge_index = torch.tensor([[0, 1, 3, 4, 5], [1, 2, 4, 5, 6]])
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    assert model(x, edge_index, batch=batch).shape == (2, 1)
    assert model(x[:3], edge_index[:, :2]).shape == (1, 1)
    assert len(model.convs) == 4 and model.convs[0].out_channels == 128
    assert model.convs[0].aggr == "add"


def test_kind_columns_start_at_zero():
    first = ValidityGNN().convs[0]
    assert not first.lin_rel.weight[:, :len(KINDS)].any()
    assert not first.lin_root.weight[:, :len(KINDS)].any()
    assert first.lin_rel.weight[:, len(KINDS):].any()


def test_binary_metrics_by_hand():
    m = binary_metrics(np.array([1, 1, 1, 0, 0, 0, 0, 1]), np.array([1, 1, 0, 0, 0, 1, 0, 1]))
    assert (m.n, m.accuracy) == (8, 0.75)
    assert m.precision == pytest.approx(3 / 4) and m.recall == pytest.approx(3 / 4)
    assert m.f1 == pytest.approx(0.75) and m.f1_invalid == pytest.approx(0.75)
    assert m.valid_fraction == 0.5
    none = binary_metrics(np.zeros(3), np.zeros(3))
    assert none.accuracy == 1 and none.f1 == 0 and none.f1_invalid == 1


def test_split_is_by_group_and_keeps_equal_content_together():
    content = np.repeat(np.arange(100), 2)  # every content id twice
    s = split_groups(content, (0.8, 0.1, 0.1), np.random.default_rng(0))
    parts = [set(content[p]) for p in (s.train, s.val, s.test)]
    assert sum(map(len, parts)) == 100 and not (parts[0] & parts[1] or parts[0] & parts[2])
    assert (len(s.train), len(s.val), len(s.test)) == (160, 20, 20)
    again = split_groups(content, (0.8, 0.1, 0.1), np.random.default_rng(0))
    assert np.array_equal(again.test, s.test)


def test_threads_are_restored():
    before = torch.get_num_threads()
    with threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("kwargs", [{"epochs": 0}, {"threads": 0}, {"split": (0.5, 0.5, 0.5)}])
def test_bad_train_configs_are_refused(kwargs):
    with pytest.raises(InputError):
        TrainConfig(**kwargs)


def test_a_small_run_beats_chance_clearly(trained):
    ds, fresh, result = trained
    assert ds.num_samples == 500
    assert len(result.history) == 8 and 1 <= result.best_epoch <= 8
    assert result.history[-1].loss < result.history[0].loss
    model = result.model()
    m = evaluate_model(model, fresh)
    majority = max(m.valid_fraction, 1 - m.valid_fraction)
    assert m.accuracy >= majority + 0.1, (m, majority)


def test_unseen_kinds_keep_zero_weights(trained):
    _, _, result = trained
    w = result.state_dict["convs.0.lin_rel.weight"]
    resize = KINDS.index(next(k for k in KINDS if k.value == "resize"))
    assert not w[:, resize].any()  # no resize op in the training data


def test_training_is_reproducible(trained):
    ds, _, result = trained
    again = train_model(ds, TrainConfig(epochs=8, batch_size=32, lr=3e-3, seed=1))
    assert np.array_equal(again.split.test, result.split.test)
    assert again.metrics["test"] == result.metrics["test"]


def test_spec_round_trips():
    assert GnnSpec().to_dict() == {"model": "ValidityGNN", "in_channels": NUM_FEATURES,
                                   "hidden": 128, "layers": 4, "aggr": "add", "pooling": "add",
                                   "head": 2}


@pytest.mark.parametrize("kwargs", [{"hidden": 0}, {"pooling": "attention"}, {"aggr": "lstm"}])
def test_bad_specs_are_refused(kwargs):
    with pytest.raises(InputError):
        GnnSpec(**kwargs)
