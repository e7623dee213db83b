"""Shared fixtures of the search tests: hardware at a given buffer, small hand-built networks."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from simulator.hw import HardwareConfig, load_hw
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import ComputeGraph, OpKind


class Net:
    """A tiny network builder: convolutions, activations, residuals, concats, SE blocks."""

    def __init__(self, name: str, shape: tuple[int, int, int, int] = (1, 8, 16, 16)) -> None:
        self.b = GraphBuilder(name)
        self.b.add_input("x", shape)

    def conv(self, name: str, src: str, c_out: int, k: int = 3, stride: int = 1,
             depthwise: bool = False) -> str:
        n, c, h, w = self.b.shape_of(src)
        pad = k // 2
        ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        c_in = 1 if depthwise else c
        c_out = c if depthwise else c_out
        self.b.add_op(name, OpKind.DWCONV if depthwise else OpKind.CONV, "conv", [src],
                      (n, c_out, ho, wo), kernel=(k, k), stride=(stride, stride),
                      padding=(pad, pad, pad, pad), groups=c if depthwise else 1,
                      weight_elems=c_out * c_in * k * k + c_out,
                      macs=n * c_out * ho * wo * c_in * k * k)
        return name

    def unary(self, name: str, src: str, op_type: str = "relu") -> str:
        self.b.add_op(name, OpKind.ELTWISE_UNARY, op_type, [src], self.b.shape_of(src))
        return name

    def add(self, name: str, a: str, b: str) -> str:
        self.b.add_op(name, OpKind.ELTWISE_BINARY, "add", [a, b], self.b.shape_of(a))
        return name

    def concat(self, name: str, a: str, b: str) -> str:
        n, c1, h, w = self.b.shape_of(a)
        c2 = self.b.shape_of(b)[1]
        self.b.add_op(name, OpKind.CONCAT, "concat", [a, b], (n, c1 + c2, h, w))
        return name

    def gpool(self, name: str, src: str) -> str:
        n, c, h, w = self.b.shape_of(src)
        self.b.add_op(name, OpKind.GLOBAL_POOL, "avg", [src], (n, c, 1, 1), kernel=(h, w),
                      stride=(h, w))
        return name

    def mul(self, name: str, scale: str, src: str) -> str:
        self.b.add_op(name, OpKind.ELTWISE_BINARY, "mul", [scale, src], self.b.shape_of(src))
        return name

    def build(self, *outputs: str) -> ComputeGraph:
        return self.b.build(list(outputs))


def draw_dag(draw: Callable, name: str, ops: tuple[int, int], kinds: list[str],
             channels: list[int] | None = None) -> ComputeGraph:
    """A random DAG for hypothesis (`draw` of an ``st.composite``): `ops` (min, max) ops of
    `kinds` (conv, unary, add, concat; repeat a kind to weight it), each reading one of the last
    three tensors; convs of 8 channels or one drawn from `channels`, kernel 1 or 3; adds and
    concats join a second tensor of the same shape (same spatial size for a concat)."""
    from hypothesis import strategies as st

    net = Net(name, (1, 8, 8, 8))
    tensors = ["x"]
    used: set[str] = set()
    for k in range(draw(st.integers(*ops))):
        kind = draw(st.sampled_from(kinds))
        a = draw(st.sampled_from(tensors[-3:]))
        shape = net.b.shape_of(a)
        partners = [t for t in tensors if t != a and net.b.shape_of(t)[2:] == shape[2:]]
        same = [t for t in partners if net.b.shape_of(t) == shape]
        op = f"{kind}{k}"
        if kind == "add" and same:
            b = draw(st.sampled_from(same))
            net.add(op, a, b)
            used.add(b)
        elif kind == "concat" and partners:
            b = draw(st.sampled_from(partners))
            net.concat(op, a, b)
            used.add(b)
        elif kind == "unary":
            net.unary(op, a)
        else:
            width = 8 if channels is None else draw(st.sampled_from(channels))
            net.conv(op, a, width, k=draw(st.sampled_from([1, 3])))
        used.add(a)
        tensors.append(op)
    return net.build(*[t for t in tensors[1:] if t not in used])


def residual_net() -> ComputeGraph:
    """9 ops: conv-relu-conv-relu-conv, a residual add over two convs, conv-relu."""
    n = Net("residual")
    r1 = n.unary("r1", n.conv("c1", "x", 8))
    r2 = n.unary("r2", n.conv("c2", r1, 8))
    a = n.add("add", n.conv("c3", r2, 8), r1)
    r4 = n.unary("r4", n.conv("c4", n.unary("r3", a), 16, stride=2))
    return n.build(r4)


def fire_net() -> ComputeGraph:
    """10 ops: a SqueezeNet fire module (two parallel expand branches and a concat)."""
    n = Net("fire")
    r0 = n.unary("r0", n.conv("c0", "x", 16))
    s = n.unary("rs", n.conv("squeeze", r0, 4, k=1))
    e1 = n.unary("re1", n.conv("e1", s, 8, k=1))
    e3 = n.unary("re3", n.conv("e3", s, 8, k=3))
    return n.build(n.conv("out", n.concat("cat", e1, e3), 8, k=1))


def se_net() -> ComputeGraph:
    """9 ops: a squeeze-and-excitation block between two convolutions (BRR-incompatible)."""
    n = Net("se")
    r0 = n.unary("r0", n.conv("c0", "x", 8))
    f = n.unary("rf", n.conv("fc1", n.gpool("gp", r0), 4, k=1))
    sig = n.unary("sig", n.conv("fc2", f, 8, k=1), "sigmoid")
    return n.build(n.conv("c1", n.mul("mul", sig, r0), 8))


def broadcast_net() -> ComputeGraph:
    """2 ops: a global pool broadcast back onto its input; the only pair is BRR-incompatible."""
    n = Net("broadcast")
    return n.build(n.mul("mul", n.gpool("gp", "x"), "x"))


SMALL_NETS: dict[str, Callable[[], ComputeGraph]] = {
    "residual": residual_net, "fire": fire_net, "se": se_net,
}


@pytest.fixture
def hw() -> Callable[[int], HardwareConfig]:
    """The edge-npu preset with another buffer size (bytes)."""
    return lambda buffer: load_hw("edge-npu", {"buffer": buffer})


@pytest.fixture(params=sorted(SMALL_NETS))
def small_net(request) -> ComputeGraph:
    return SMALL_NETS[request.param]()


@pytest.fixture
def nets() -> dict[str, Callable[[], ComputeGraph]]:
    return {**SMALL_NETS, "broadcast": broadcast_net}
