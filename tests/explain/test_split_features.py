"""GNN features under split buffers (`explain.features.capacities`): each buffer fraction is
taken of the capacity that holds it, and a shared buffer's features are unchanged."""

from __future__ import annotations

import numpy as np

from explain.features import (
    BUFFER_REFERENCE_BYTES,
    NUM_BASE,
    capacities,
    encode_group,
    node_features,
)
from explain.predict import predict_valid
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo


def _group():
    graph = load_zoo("squeezenet1_0", input_shape=(1, 3, 64, 64))
    return graph, encode_group(graph, (0, 1, 2, 3), 1)


def test_a_shared_buffer_gives_the_features_it_always_gave():
    _, enc = _group()
    hw = load_hw("edge-npu", {"buffer": "96KiB"})
    assert capacities(hw) == 96 * 1024
    plain = node_features(enc.base, enc.sizes, float(96 * 1024))
    assert np.array_equal(node_features(enc.base, enc.sizes, capacities(hw)), plain)
    # three equal capacities, as a tuple or one row per node, are the shared buffer
    same = (96 * 1024,) * 3
    assert np.array_equal(node_features(enc.base, enc.sizes, same), plain)
    rows = np.repeat(np.array([same], dtype=np.float64), enc.base.shape[0], axis=0)
    assert np.array_equal(node_features(enc.base, enc.sizes, rows), plain)


def test_split_fractions_are_of_the_buffer_holding_them():
    _, enc = _group()
    hw = load_hw("edge-npu", {"weight_buffer": "16KiB", "activation_buffer": "64KiB"})
    assert capacities(hw) == (80 * 1024, 16 * 1024, 64 * 1024)
    x = node_features(enc.base, enc.sizes, capacities(hw))
    assert x.shape == node_features(enc.base, enc.sizes, 1024.0).shape
    log, frac = x[:, NUM_BASE], x[:, NUM_BASE + 1:]
    assert np.allclose(log, np.log2(80 * 1024 / BUFFER_REFERENCE_BYTES))
    assert np.allclose(frac[:, 0], np.clip(enc.sizes[:, 0] / (16 * 1024), 0, 4))
    assert np.allclose(frac[:, 1:], np.clip(enc.sizes[:, 1:] / (64 * 1024), 0, 4))
    assert frac[:, 0].max() > 0  # the group holds weights


def test_the_shipped_checkpoint_predicts_under_split_buffers():
    graph, _ = _group()
    groups = [(0, 1, 2, 3), (4, 5)]
    shared = load_hw("edge-npu", {"buffer": "64KiB"})
    split = load_hw("edge-npu", {"weight_buffer": "1KiB", "activation_buffer": "63KiB"})
    p_shared = predict_valid(graph, groups, shared, "lbdf")
    p_split = predict_valid(graph, groups, split, "lbdf")
    assert p_split.shape == (2,) and np.all((0 <= p_split) & (p_split <= 1))
    assert not np.array_equal(p_shared, p_split)  # the weight fraction moved
