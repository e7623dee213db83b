"""Feature encoding of hand-built fusion groups and batching of encoded groups."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data

from explain.batch import PackedGraphs, content_ids
from explain.features import (
    FEATURE_SCHEMA,
    KIND_ALIASES,
    KINDS,
    NUM_BASE,
    NUM_FEATURES,
    NUM_SIZES,
    RATIO_CLIP,
    encode_group,
    line_buffer_elems,
    node_features,
)
from simulator.errors import InputError
from simulator.workload.graph import OpKind

COL = {name: k for k, (name, _) in enumerate(FEATURE_SCHEMA)}


def lg(x: float) -> float:
    return math.log2(1 + x) / 16


def test_schema_covers_every_op_kind_once():
    assert sorted({*KINDS, *KIND_ALIASES}) == sorted(OpKind)
    assert not set(KINDS) & set(KIND_ALIASES) and set(KIND_ALIASES.values()) <= set(KINDS)
    assert len(FEATURE_SCHEMA) == NUM_FEATURES == NUM_BASE + 1 + NUM_SIZES
    assert len(set(COL)) == NUM_FEATURES


def test_static_features_of_a_conv(residual):
    x = node_features(*_parts(encode_group(residual, [0, 1, 2, 3, 4])), 256 * 1024)
    conv = x[0]
    assert conv[COL["kind_conv"]] == 1 and conv[:len(KINDS)].sum() == 1
    assert conv[COL["in_channels"]] == pytest.approx(lg(8))
    assert conv[COL["in_height"]] == pytest.approx(lg(16))
    assert conv[COL["out_width"]] == pytest.approx(lg(16))
    assert conv[COL["weight_bytes"]] == pytest.approx(lg(8 * 8 * 9 + 8))
    assert conv[COL["kernel_h"]] == pytest.approx(math.log2(3))
    assert conv[COL["stride_h"]] == 0 and conv[COL["dilation"]] == 0
    assert conv[COL["n_inputs"]] == pytest.approx(0.25)
    assert x[3][COL["kind_eltwise_binary"]] == 1 and x[3][COL["n_inputs"]] == pytest.approx(0.5)


def _parts(group):
    return group.base, group.sizes


def test_context_features_depend_on_the_group(residual):
    whole = encode_group(residual, [0, 1, 2, 3, 4]).base
    outside, leaves = COL["inputs_from_outside"], COL["leaves_group"]
    # conv1 reads the network input; the add reads it too (the skip); relu2 is the output
    assert whole[:, outside].tolist() == [0.25, 0, 0, 0.25, 0]
    assert whole[:, leaves].tolist() == [0, 0, 0, 0, 1]
    middle = encode_group(residual, [3, 2]).base  # order of the ids does not matter
    assert middle[:, outside].tolist() == [0.25, 0.25]  # conv2 <- relu1, add <- x
    assert middle[:, leaves].tolist() == [0, 1]


def test_edges_are_directed_internal_edges_in_local_numbering(residual):
    assert encode_group(residual, [0, 1, 2, 3, 4]).edge_index.tolist() == \
        [[0, 1, 2, 3], [1, 2, 3, 4]]
    assert encode_group(residual, [1, 2, 4]).edge_index.tolist() == [[0], [1]]
    assert encode_group(residual, [1, 2, 4]).edge_index.dtype == np.int64


def test_line_buffer_follows_the_row_model(residual, head):
    row = 8 * 16
    assert line_buffer_elems(residual[0]) == row * (2 + 1 + 1)  # d(k-1)+1 rows + stride
    assert line_buffer_elems(residual[1]) == row
    assert line_buffer_elems(residual[3]) == 2 * row  # one row of each input
    assert line_buffer_elems(head[0]) == 16 * 32 * (2 * 2 + 1 + 2)  # dilation 2, stride 2
    assert line_buffer_elems(head[1]) == 32 * 16  # global pooling folds rows in
    assert line_buffer_elems(head[2]) == 32 and line_buffer_elems(head[3]) == 32  # whole


def test_buffer_features(residual):
    g = encode_group(residual, [0, 1])
    x = node_features(g.base, g.sizes, 256 * 1024)
    assert x.shape == (2, NUM_FEATURES) and x.dtype == np.float32
    assert x[:, COL["buffer"]].tolist() == [1.0, 1.0]  # log2(256 KiB / 128 KiB)
    assert x[0, COL["weight_frac"]] == pytest.approx(584 / 262144)
    assert x[0, COL["line_buffer_frac"]] == pytest.approx(512 / 262144)
    assert x[0, COL["out_tensor_frac"]] == pytest.approx(2048 / 262144)
    assert x[1, COL["out_row_frac"]] == pytest.approx(128 / 262144)
    tiny = node_features(g.base, g.sizes, np.array([1.0, 2048.0]))
    assert tiny[0, COL["weight_frac"]] == RATIO_CLIP  # clipped
    assert tiny[1, COL["buffer"]] == pytest.approx(math.log2(2048 / 131072))


def test_byte_sizes_scale_with_the_element_width(residual):
    one, two = encode_group(residual, [0, 1]), encode_group(residual, [0, 1], dtype_bytes=2)
    np.testing.assert_allclose(two.sizes, 2 * one.sizes)
    assert two.base[0, COL["weight_bytes"]] == pytest.approx(lg(2 * 584))


def test_head_shapes_of_flat_tensors(head):
    x = encode_group(head, [0, 1, 2, 3]).base
    assert x[2, COL["out_channels"]] == pytest.approx(lg(32))
    assert x[2, COL["out_height"]] == pytest.approx(lg(1)) and x[3, COL["kind_linear"]] == 1
    assert x[0, COL["dilation"]] == 1 and x[0, COL["stride_w"]] == 1


def test_new_kinds_take_the_slot_of_their_alias_and_the_row_model_line_buffer():
    from simulator.workload.builder import GraphBuilder

    b = GraphBuilder("block")
    b.add_input("x", (1, 8, 6, 6))
    b.add_op("ln", OpKind.NORM, "layernorm", ["x"], (1, 8, 6, 6), weight_elems=16,
             attrs={"axes": (1,), "eps": 1e-5, "affine": True})
    b.add_op("gn", OpKind.NORM, "groupnorm", ["ln"], (1, 8, 6, 6), weight_elems=16,
             attrs={"axes": (1, 2, 3), "groups": 2, "eps": 1e-5, "affine": True})
    b.add_op("mm", OpKind.MATMUL, "matmul", ["ln", "gn"], (1, 8, 6, 6), macs=8 * 36 * 6)
    graph = b.build(["mm"])
    x = encode_group(graph, [0, 1, 2]).base
    assert x[0, COL["kind_batchnorm"]] == x[1, COL["kind_batchnorm"]] == 1
    assert x[2, COL["kind_linear"]] == 1 and x[:, :len(KINDS)].sum() == 3
    row = 8 * 6
    assert line_buffer_elems(graph[0]) == row  # per pixel over the channels
    assert line_buffer_elems(graph[1]) == 6 * row  # statistics over the map
    assert line_buffer_elems(graph[2]) == 2 * 6 * row  # both operands whole


@pytest.mark.parametrize("ops", [[], [0, 0], [0, 9], [-1]])
def test_bad_groups_are_refused(residual, ops):
    with pytest.raises(InputError, match="cannot encode group"):
        encode_group(residual, ops)


def test_collate_matches_pyg_batching(residual, head):
    groups = [encode_group(residual, [0, 1, 2, 3, 4]), encode_group(head, [1, 2, 3]),
              encode_group(residual, [2, 3])]
    packed = PackedGraphs.pack(groups)
    pick, buffers = np.array([2, 0, 1, 0]), np.array([128.0, 256.0, 512.0, 1024.0]) * 1024
    got = packed.collate(pick, buffers)
    want = Batch.from_data_list([
        Data(x=torch.from_numpy(node_features(groups[g].base, groups[g].sizes, b)),
             edge_index=torch.from_numpy(groups[g].edge_index))
        for g, b in zip(pick, buffers, strict=True)])
    assert got.num_graphs == 4
    assert torch.equal(got.x, want.x)
    assert torch.equal(got.edge_index, want.edge_index)
    assert torch.equal(got.batch, want.batch)


def test_content_ids_merge_identical_encodings(residual):
    packed = PackedGraphs.pack([encode_group(residual, [0, 1]), encode_group(residual, [1, 2]),
                                encode_group(residual, [0, 1])])
    ids = content_ids(packed)
    assert ids[0] == ids[2] != ids[1]
