"""Shared fixtures of the explain tests: hand-built graphs, a private dataset cache, the CLI."""

from __future__ import annotations

import pytest

from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import OpKind


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets its own dataset cache: nothing is read from or written to ~/.cache."""
    monkeypatch.setenv("FUSION_DSE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def residual():
    """conv3x3(s1) -> relu -> conv3x3 -> add(+ input of the block) -> relu, 8 x 16 x 16.

    Ops: 0 conv1, 1 relu1, 2 conv2, 3 add, 4 relu2; the add also reads the network input.
    """
    shape = (1, 8, 16, 16)
    w = 8 * 8 * 9 + 8
    b = GraphBuilder("residual")
    b.add_input("x", shape)
    b.add_op("conv1", OpKind.CONV, "conv", ["x"], shape, kernel=(3, 3), padding=(1, 1, 1, 1),
             weight_elems=w, macs=16 * 16 * 8 * 8 * 9)
    b.add_op("relu1", OpKind.ELTWISE_UNARY, "relu", ["conv1"], shape)
    b.add_op("conv2", OpKind.CONV, "conv", ["relu1"], shape, kernel=(3, 3),
             padding=(1, 1, 1, 1), weight_elems=w, macs=16 * 16 * 8 * 8 * 9)
    b.add_op("add", OpKind.ELTWISE_BINARY, "add", ["conv2", "x"], shape)
    b.add_op("relu2", OpKind.ELTWISE_UNARY, "relu", ["add"], shape)
    return b.build(["relu2"])


@pytest.fixture
def head():
    """A strided conv into global pooling, flatten and a linear layer (a classifier head)."""
    b = GraphBuilder("head")
    b.add_input("x", (1, 16, 32, 32))
    b.add_op("conv", OpKind.CONV, "conv", ["x"], (1, 32, 16, 16), kernel=(3, 3),
             stride=(2, 2), padding=(1, 1, 1, 1), dilation=(2, 2), weight_elems=32 * 16 * 9)
    b.add_op("gap", OpKind.GLOBAL_POOL, "avg", ["conv"], (1, 32, 1, 1), kernel=(16, 16),
             stride=(16, 16))
    b.add_op("flat", OpKind.RESHAPE, "flatten", ["gap"], (1, 32))
    b.add_op("fc", OpKind.LINEAR, "linear", ["flat"], (1, 10), weight_elems=32 * 10 + 10)
    return b.build(["fc"])
