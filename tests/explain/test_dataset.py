"""The fusion-group dataset: configuration, labels, determinism, cache, statistics."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from explain.dataset import (
    BUFFER_SIZES_KIB,
    DEFAULT_GROUPS,
    DatasetConfig,
    build_dataset,
    cache_key,
    generate_dataset,
    has_squeeze_excitation,
    held_out_config,
    training_config,
)
from explain.stats import dataset_table, plot_validity, validity_by_buffer, write_dataset_table
from simulator.cost import CostCache
from simulator.errors import InputError
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo

EDGE = load_hw("edge-npu")

SMALL = DatasetConfig("lbdf", (("squeezenet1_1", 40), ("resnet18", 30)), seed=3, hw=EDGE)


@pytest.fixture(scope="module")
def small():
    return generate_dataset(SMALL)


def test_default_quotas_reach_the_papers_size():
    for scheme in ("lbdf", "brr"):
        config = training_config(scheme, hw=EDGE)
        assert sum(n for _, n in config.networks) >= 10_800
        assert config.buffers_kib == BUFFER_SIZES_KIB == (128, 256, 512, 1024, 2048)
    assert set(DEFAULT_GROUPS["brr"]) < set(DEFAULT_GROUPS["lbdf"])
    assert "efficientnet_b0" not in DEFAULT_GROUPS["brr"]
    assert [n for n, _ in held_out_config("brr", hw=EDGE).networks] == ["resnet50", "resnet152"]
    assert len(held_out_config("lbdf", hw=EDGE).networks) == 3


@pytest.mark.parametrize("make, message", [
    (lambda: DatasetConfig("lbl", (("vgg16", 5),), hw=EDGE), "'lbl' is not supported here"),
    (lambda: DatasetConfig("lbfd", (("vgg16", 5),), hw=EDGE), "unknown scheme 'lbfd'"),
    (lambda: DatasetConfig("lbdf", (), hw=EDGE), "at least one network"),
    (lambda: DatasetConfig("lbdf", (("vgg17", 5),), hw=EDGE), "not a zoo name"),
    (lambda: DatasetConfig("lbdf", (("vgg16", 0),), hw=EDGE), "positive integer"),
    (lambda: DatasetConfig("lbdf", (("vgg16", 5), ("vgg16", 6)), hw=EDGE), "listed twice"),
    (lambda: DatasetConfig("lbdf", (("vgg16", 5),), buffers_kib=(0,), hw=EDGE), "positive KiB"),
    (lambda: DatasetConfig("lbdf", (("vgg16", 5),), min_ops=3, max_ops=2, hw=EDGE), "min_ops"),
    (lambda: training_config("brr", groups={"efficientnet_b0": 10}, hw=EDGE), "not a brr training"),
    (lambda: training_config("lbdf", groups={"resnet50": 10}, hw=EDGE), "not a lbdf training"),
])
def test_bad_configs_are_refused(make, message):
    with pytest.raises(InputError, match=message):
        make()


def test_overrides_and_dropping_networks():
    config = training_config("lbdf", groups={"vgg16": 0, "ResNet18": 7}, hw=EDGE)
    names = dict(config.networks)
    assert "vgg16" not in names and names["resnet18"] == 7


def test_labels_are_the_cost_models(small):
    assert small.labels.shape == (70, 5) and small.num_samples == 350
    graph = load_zoo("resnet18")
    hw = load_hw("edge-npu", {"buffer": "512KiB"})
    cache = CostCache(graph, hw, "lbdf")
    for k in np.flatnonzero(small.network_index == 1)[:10]:
        cost = cache.group(small.ops[k])
        assert small.labels[k, 2] == cost.fits
        assert small.need_bytes[k, 2] == cost.buffer_bytes


def test_lbdf_validity_grows_with_the_buffer(small):
    assert (np.diff(small.labels.astype(int), axis=1) >= 0).all()
    assert 0 < small.labels.mean() < 1


def test_groups_are_distinct_subgraphs(small):
    from explain.batch import content_ids

    assert len(np.unique(content_ids(small.packed))) == small.num_groups
    assert all(2 <= len(g) <= 30 for g in small.ops)
    assert (small.packed.num_nodes() == [len(g) for g in small.ops]).all()


def test_generation_is_deterministic_with_a_seed(small):
    again = generate_dataset(SMALL)
    assert again.ops == small.ops
    assert np.array_equal(again.labels, small.labels)
    assert np.array_equal(again.packed.base, small.packed.base)
    assert np.array_equal(again.packed.edges, small.packed.edges)
    other = generate_dataset(DatasetConfig("lbdf", SMALL.networks, seed=4, hw=EDGE))
    assert other.ops != small.ops


def test_a_network_does_not_depend_on_the_others(small):
    alone = generate_dataset(DatasetConfig("lbdf", (("resnet18", 30),), seed=3, hw=EDGE))
    assert alone.ops == small.ops[40:]


def test_global_random_state_is_untouched():
    from explain.train import TrainConfig, train_model

    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    ds = generate_dataset(DatasetConfig("lbdf", (("squeezenet1_1", 12),), seed=9, hw=EDGE))
    train_model(ds, TrainConfig(epochs=1, batch_size=16))
    after = random.getstate(), np.random.get_state(), torch.get_rng_state()
    assert after[0] == states[0]
    assert np.array_equal(after[1][1], states[1][1]) and after[1][2:] == states[1][2:]
    assert torch.equal(after[2], states[2])


def test_disk_cache_round_trip(private_cache):
    config = DatasetConfig("lbdf", (("squeezenet1_1", 15),), seed=1, hw=EDGE)
    first = build_dataset(config)
    assert not first.from_cache
    assert list((private_cache / "gnn-datasets").glob("*.npz"))
    second = build_dataset(config)
    assert second.from_cache and second.ops == first.ops
    assert np.array_equal(second.labels, first.labels)
    assert np.array_equal(second.packed.sizes, first.packed.sizes)
    assert second.seconds == pytest.approx(first.seconds)
    assert cache_key(config) != cache_key(DatasetConfig("lbdf", config.networks, seed=2, hw=EDGE))


def test_brr_refuses_squeeze_and_excitation_networks():
    assert has_squeeze_excitation(load_zoo("mobilenet_v3_small"))
    assert not has_squeeze_excitation(load_zoo("resnet18"))
    with pytest.raises(InputError, match="squeeze-and-excitation"):
        generate_dataset(DatasetConfig("brr", (("mobilenet_v3_small", 5),), hw=EDGE))


def test_table_one_and_figure_three(small, tmp_path):
    table = dataset_table(small)
    assert table["network"].tolist() == ["squeezenet1_1", "resnet18", "total"]
    assert table["groups"].tolist() == [40, 30, 70]
    assert table["samples"].tolist() == [200, 150, 350]
    curves = validity_by_buffer(small)
    assert list(curves.columns) == list(BUFFER_SIZES_KIB)
    assert curves.loc["resnet18", 2048] == pytest.approx(
        100 * small.labels[small.network_index == 1, 4].mean())
    files = write_dataset_table(table, tmp_path, "lbdf-dataset")
    assert [f.name for f in files] == ["lbdf-dataset.csv", "lbdf-dataset.md"]
    assert "| squeezenet1_1 | 40 | 200 |" in files[1].read_text()
    png = plot_validity({"lbdf": small, "brr": small}, tmp_path / "fig" / "validity.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_default_preset_configs_are_the_shipped_checkpoints(scheme):
    import json

    from explain.checkpoint import shipped_checkpoint

    doc = json.loads(shipped_checkpoint(scheme).with_suffix(".json").read_text())
    assert training_config(scheme, hw=EDGE).to_dict() == doc["dataset"]["config"]
    assert held_out_config(scheme, hw=EDGE).to_dict() == doc["held_out_dataset"]["config"]


def test_the_hardware_is_part_of_the_configuration():
    from dataclasses import replace

    wide = replace(SMALL, hw=EDGE.with_overrides(dtype_bytes=2))
    assert cache_key(wide) != cache_key(SMALL)
    assert replace(SMALL, hw=EDGE.with_overrides(buffer="1MiB")).to_dict() == SMALL.to_dict()
    assert cache_key(replace(SMALL, hw=EDGE.with_overrides(buffer="1MiB"))) == cache_key(SMALL)
