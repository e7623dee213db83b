"""Shared by the rule tests: a builder of small graphs with every op kind the rules touch, and
`check_rewrite`, the equivalence test every rule passes (the executor gives the same output
before and after the rewrite, the graph is valid, round-trips through JSON, and replays)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

from search.substitution.base import Match, Rule, RuleContext, apply_all, replay
from search.substitution.rules import RULES
from simulator.workload.builder import GraphBuilder
from simulator.workload.execute import execute, random_params
from simulator.workload.graph import ComputeGraph, Op, OpKind
from simulator.workload.ops import conv_kind, conv_macs, linear_macs

torch.set_num_threads(1)


class Net:
    """A small graph under construction; every method returns the name of the op it adds."""

    def __init__(self, shape: Sequence[int] = (1, 8, 10, 10), name: str = "net") -> None:
        self.b = GraphBuilder(name)
        self.b.add_input("x", tuple(shape))

    def shape(self, src: str) -> tuple[int, ...]:
        return self.b.shape_of(src)

    def conv(self, name: str, src: str, c_out: int, k: int | tuple[int, int] = 3,
             stride: int = 1, pad: int | tuple[int, int, int, int] | None = None,
             dilation: int = 1, groups: int = 1, bias: bool = True, **attrs: Any) -> str:
        n, c, h, w = self.shape(src)
        kh, kw = (k, k) if isinstance(k, int) else k
        if pad is None:
            pad = (dilation * (kh - 1) // 2, dilation * (kw - 1) // 2) * 2
        pad = (pad,) * 4 if isinstance(pad, int) else tuple(pad)
        ho = (h + pad[0] + pad[2] - dilation * (kh - 1) - 1) // stride + 1
        wo = (w + pad[1] + pad[3] - dilation * (kw - 1) - 1) // stride + 1
        out = (n, c_out, ho, wo)
        self.b.add_op(name, conv_kind(groups, c), "conv", [src], out, attrs=attrs,
                      kernel=(kh, kw), stride=(stride, stride), padding=pad,
                      dilation=(dilation, dilation), groups=groups,
                      weight_elems=c_out * (c // groups) * kh * kw + (c_out if bias else 0),
                      macs=conv_macs(out, c, groups, (kh, kw)))
        return name

    def dwconv(self, name: str, src: str, k: int = 3, bias: bool = False) -> str:
        return self.conv(name, src, self.shape(src)[1], k, groups=self.shape(src)[1], bias=bias)

    def linear(self, name: str, src: str, out_features: int, bias: bool = True) -> str:
        shape = self.shape(src)
        out = (*shape[:-1], out_features)
        self.b.add_op(name, OpKind.LINEAR, "linear", [src], out,
                      weight_elems=out_features * shape[-1] + (out_features if bias else 0),
                      macs=linear_macs(out, shape[-1]))
        return name

    def bn(self, name: str, src: str) -> str:
        shape = self.shape(src)
        self.b.add_op(name, OpKind.BATCHNORM, "batchnorm", [src], shape,
                      weight_elems=2 * shape[1], macs=math.prod(shape))
        return name

    def act(self, name: str, src: str, op_type: str = "relu", **attrs: Any) -> str:
        self.b.add_op(name, OpKind.ELTWISE_UNARY, op_type, [src], self.shape(src), attrs=attrs)
        return name

    def const(self, name: str, src: str, op_type: str, *, side: str = "right",
              scalar: float | None = None, shape: Sequence[int] | None = None) -> str:
        """An elementwise op with a constant operand: a scalar, or a tensor of `shape`
        (default: per channel, ``(1, C, 1, ...)``)."""
        out = self.shape(src)
        attrs: dict[str, Any] = {"const_side": side}
        elems = 0
        if scalar is not None:
            attrs["scalar"] = float(scalar)
        else:
            shape = tuple(shape) if shape is not None else (1, out[1], *[1] * (len(out) - 2))
            attrs["const_shape"] = shape
            elems = math.prod(shape) if math.prod(shape) > 1 else 0
        self.b.add_op(name, OpKind.ELTWISE_UNARY, op_type, [src], out, attrs=attrs,
                      weight_elems=elems)
        return name

    def binary(self, name: str, a: str, b: str, op_type: str = "add") -> str:
        sa, sb = self.shape(a), self.shape(b)
        out = tuple(max(x, y) for x, y in zip(sa, sb, strict=True))
        self.b.add_op(name, OpKind.ELTWISE_BINARY, op_type, [a, b], out)
        return name

    def pool(self, name: str, src: str, k: int = 2, op_type: str = "max") -> str:
        n, c, h, w = self.shape(src)
        self.b.add_op(name, OpKind.POOL, op_type, [src], (n, c, h // k, w // k),
                      kernel=(k, k), stride=(k, k), attrs={"ceil_mode": False})
        return name

    def gpool(self, name: str, src: str) -> str:
        n, c, h, w = self.shape(src)
        self.b.add_op(name, OpKind.GLOBAL_POOL, "avg", [src], (n, c, 1, 1), kernel=(h, w),
                      stride=(h, w))
        return name

    def concat(self, name: str, srcs: Sequence[str], axis: int = 1) -> str:
        shapes = [self.shape(s) for s in srcs]
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        self.b.add_op(name, OpKind.CONCAT, "concat", list(srcs), out, attrs={"axis": axis})
        return name

    def slice(self, name: str, src: str, start: int, end: int, axis: int = 1) -> str:
        out = list(self.shape(src))
        out[axis] = len(range(*slice(start, end).indices(out[axis])))
        self.b.add_op(name, OpKind.SLICE, "slice", [src], out,
                      attrs={"axis": axis, "start": start, "end": end, "step": 1})
        return name

    def reshape(self, name: str, src: str, shape: Sequence[int], op_type: str = "reshape") -> str:
        self.b.add_op(name, OpKind.RESHAPE, op_type, [src], tuple(shape))
        return name

    def permute(self, name: str, src: str, perm: Sequence[int]) -> str:
        shape = self.shape(src)
        self.b.add_op(name, OpKind.TRANSPOSE, "permute", [src], [shape[p] for p in perm],
                      attrs={"perm": tuple(perm)})
        return name

    def shuffle(self, name: str, src: str, op_type: str, **attrs: int) -> str:
        n, c, h, w = self.shape(src)
        if op_type == "pixel_shuffle":
            r = attrs["upscale_factor"]
            out = (n, c // (r * r), h * r, w * r)
        elif op_type == "pixel_unshuffle":
            r = attrs["downscale_factor"]
            out = (n, c * r * r, h // r, w // r)
        else:
            out = (n, c, h, w)
        self.b.add_op(name, OpKind.TRANSPOSE, op_type, [src], out, attrs=attrs)
        return name

    def softmax(self, name: str, src: str, axis: int = -1, **attrs: Any) -> str:
        self.b.add_op(name, OpKind.SOFTMAX, "softmax", [src], self.shape(src),
                      attrs={"axis": axis, **attrs})
        return name

    def pad(self, name: str, src: str, padding: tuple[int, int, int, int]) -> str:
        n, c, h, w = self.shape(src)
        out = (n, c, h + padding[0] + padding[2], w + padding[1] + padding[3])
        self.b.add_op(name, OpKind.PAD, "pad", [src], out, padding=padding)
        return name

    def build(self, *outputs: str) -> ComputeGraph:
        return self.b.build(list(outputs))


def _same_op(a: Op, b: Op) -> bool:
    """Equal but for the numbering (an untouched op of a rewritten graph)."""
    keys = ("name", "kind", "op_type", "input_shapes", "output_shape", "kernel", "stride",
            "padding", "dilation", "groups", "weight_elems", "macs", "attrs", "mapping")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def check_rewrite(graph: ComputeGraph, rule: Rule, match: Match | None = None, *,
                  seed: int = 0, tol: float = 1e-4) -> ComputeGraph:
    """Apply `rule` at `match` (default: its first match) and check the rewrite: a valid graph,
    a JSON round trip, the match replayed from JSON, untouched ops' parameters passed through,
    and the executor's outputs equal within `tol` of the output scale. Returns the graph."""
    found = rule.find(graph, RuleContext())
    assert found, f"{rule.name} finds nothing in {graph.name}"
    assert found == rule.find(graph, RuleContext()), "find is not deterministic"
    if match is None:
        match = found[0]
    assert match in found
    new = rule.apply(graph, match)
    new.check()
    assert ComputeGraph.from_json(new.to_json()) == new
    recorded = Match.from_dict(json.loads(json.dumps(match.to_dict())))
    assert replay(graph, [recorded], RULES) == new
    params = random_params(graph, seed)
    new_params = rule.transform(graph, match, params)
    old_ops = {op.name: op for op in graph.ops}
    for op in new.ops:
        untouched = op.name not in match.ops and _same_op(op, old_ops.get(op.name, op))
        if op.name in params and op.name in old_ops and untouched:
            assert new_params[op.name] is params[op.name], f"{op.name} params not passed on"
    assert set(new_params) <= {op.name for op in new.ops}
    gen = torch.Generator().manual_seed(seed)
    xs = [torch.randn(s, generator=gen) for s in graph.input_shapes]
    before, after = execute(graph, params, xs), execute(new, new_params, xs)
    assert len(before) == len(after)
    for a, b in zip(before, after, strict=True):
        assert a.shape == b.shape
        scale = max(1.0, float(a.abs().max()))
        assert float((a - b).abs().max()) <= tol * scale, f"{rule.name} changed the output"
    return new


def check_all(graph: ComputeGraph, rules: Sequence[Rule], seed: int = 0,
              tol: float = 1e-4) -> ComputeGraph:
    """`apply_all(graph, rules)` with the parameters carried through every rewrite: the final
    graph is valid and the executor's outputs are unchanged. Returns the final graph."""
    final, done = apply_all(graph, list(rules), RuleContext())
    final.check()
    params = random_params(graph, seed)
    g, p = graph, params
    for step in done:
        p = RULES[step.match.rule].transform(g, step.match, p)
        g = step.graph
    assert g == final and len(final) <= len(graph)
    gen = torch.Generator().manual_seed(seed)
    xs = [torch.randn(s, generator=gen) for s in graph.input_shapes]
    for a, b in zip(execute(graph, params, xs), execute(final, p, xs), strict=True):
        assert a.shape == b.shape
        assert float((a - b).abs().max()) <= tol * max(1.0, float(a.abs().max()))
    return final


@pytest.fixture
def net() -> Callable[..., Net]:
    return Net


@pytest.fixture
def check() -> Callable[..., ComputeGraph]:
    return check_rewrite


@pytest.fixture(name="check_all")
def check_all_fixture() -> Callable[..., ComputeGraph]:
    return check_all
