"""Operator fission rules: graph rewrites, weight transforms checked by the executor, P search."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from search.substitution.base import Match, RewriteError, RuleContext, apply_all, replay
from search.substitution.rules.fission import (
    FISSION_RULES,
    IN_CHANNELS,
    OUT_CHANNELS,
    ROWS,
    FissionRule,
)
from simulator.cost.evaluate import CostCache
from simulator.hw import HardwareConfig, load_hw
from simulator.workload.builder import GraphBuilder
from simulator.workload.execute import execute, random_params
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.ops import conv_kind, conv_macs, linear_macs

torch.set_num_threads(1)
KIB = 1024


def _hw(buffer: int) -> HardwareConfig:
    return load_hw("edge-npu", {"buffer": buffer})


def _out_size(size: int, k: int, s: int, before: int, after: int, d: int,
              ceil: bool = False) -> int:
    """Output length of a window (torch's rule, ceil_mode included)."""
    span = size + before + after - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    return out - 1 if ceil and (out - 1) * s >= size + before else out


def conv_graph(c_in: int = 8, c_out: int = 8, h: int = 9, w: int = 7, k: int = 3,
               stride: int = 1, padding: tuple[int, int, int, int] | int = 1,
               dilation: int = 1, groups: int = 1, bias: bool = True,
               attrs: dict[str, Any] | None = None, tail: bool = True) -> ComputeGraph:
    """x -> conv (-> relu when `tail`): the conv is named "conv"."""
    pad = (padding,) * 4 if isinstance(padding, int) else padding
    ho = _out_size(h, k, stride, pad[0], pad[2], dilation)
    wo = _out_size(w, k, stride, pad[1], pad[3], dilation)
    b = GraphBuilder("conv-net")
    b.add_input("x", (1, c_in, h, w))
    out = (1, c_out, ho, wo)
    b.add_op("conv", conv_kind(groups, c_in), "conv", ["x"], out, attrs=attrs,
             kernel=(k, k), stride=(stride, stride), padding=pad,
             dilation=(dilation, dilation), groups=groups,
             weight_elems=c_out * (c_in // groups) * k * k + (c_out if bias else 0),
             macs=conv_macs(out, c_in, groups, (k, k)))
    if not tail:
        return b.build(["conv"])
    b.add_op("relu", OpKind.ELTWISE_UNARY, "relu", ["conv"], out)
    return b.build(["relu"])


def linear_graph(in_shape: tuple[int, ...] = (2, 20), out_features: int = 7,
                 bias: bool = True, attrs: dict[str, Any] | None = None) -> ComputeGraph:
    b = GraphBuilder("linear-net")
    b.add_input("x", in_shape)
    out = (*in_shape[:-1], out_features)
    b.add_op("fc", OpKind.LINEAR, "linear", ["x"], out, attrs=attrs,
             weight_elems=out_features * in_shape[-1] + (out_features if bias else 0),
             macs=linear_macs(out, in_shape[-1]))
    b.add_op("sig", OpKind.ELTWISE_UNARY, "sigmoid", ["fc"], out)
    return b.build(["sig"])


def pool_graph(op_type: str = "max", c: int = 4, h: int = 11, w: int = 6, k: int = 3,
               stride: int = 2, padding: tuple[int, int, int, int] | int = 1,
               dilation: int = 1, attrs: dict[str, Any] | None = None) -> ComputeGraph:
    pad = (padding,) * 4 if isinstance(padding, int) else padding
    ceil = bool((attrs or {}).get("ceil_mode"))
    ho = _out_size(h, k, stride, pad[0], pad[2], dilation, ceil)
    wo = _out_size(w, k, stride, pad[1], pad[3], dilation, ceil)
    b = GraphBuilder("pool-net")
    b.add_input("x", (1, c, h, w))
    b.add_op("pool", OpKind.POOL, op_type, ["x"], (1, c, ho, wo), attrs=attrs, kernel=(k, k),
             stride=(stride, stride), padding=pad, dilation=(dilation, dilation))
    return b.build(["pool"])


def assert_equivalent(rule: FissionRule, graph: ComputeGraph, pieces: int,
                      op: str | None = None, seed: int = 0) -> ComputeGraph:
    """Rewrite `graph`'s op (the first conv/linear/pool by default) into `pieces`; the
    rewritten graph checks, round-trips through JSON and computes the same outputs."""
    name = op or next(o.name for o in graph if o.kind in (OpKind.CONV, OpKind.DWCONV,
                                                            OpKind.LINEAR, OpKind.POOL))
    match = Match(rule.name, (name,), (("pieces", pieces),))
    new = rule.apply(graph, match)
    new.check()
    assert ComputeGraph.from_json(new.to_json()) == new
    params = random_params(graph, seed)
    new_params = rule.transform(graph, match, params)
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(s, generator=g) for s in graph.input_shapes]
    before, after = execute(graph, params, xs), execute(new, new_params, xs)
    for a, b in zip(before, after, strict=True):
        scale = max(1.0, float(a.abs().max()))
        assert float((a - b).abs().max()) <= 1e-4 * scale
    # untouched ops keep their parameters; the split op's name carries none any more
    assert name not in new_params
    for key, tensors in params.items():
        if key != name:
            assert new_params[key] is tensors
    return new


# --- graph-level rewrites -----------------------------------------------------------------


def test_out_channels_rewrites_into_pieces_and_a_concat_that_keeps_the_name():
    g = conv_graph(c_in=6, c_out=10)
    new = OUT_CHANNELS.apply(g, Match(OUT_CHANNELS.name, ("conv",), (("pieces", 3),)))
    pieces = [o for o in new if o.name.startswith("conv/oc")]
    assert [o.name for o in pieces] == ["conv/oc0", "conv/oc1", "conv/oc2"]
    assert [o.output_shape[1] for o in pieces] == [4, 3, 3]
    assert all(new.tensor_shape(o.inputs[0]) == (1, 6, 9, 7) for o in pieces)
    cat = new[new.id_of("conv")]
    assert cat.kind is OpKind.CONCAT and cat.attr("axis") == 1
    assert cat.inputs == tuple(o.id for o in pieces)
    assert new[new.id_of("relu")].inputs == (cat.id,)  # consumers read the concat
    assert sum(o.weight_elems for o in pieces) == g[g.id_of("conv")].weight_elems
    assert sum(o.macs for o in pieces) == g.total_macs


def test_in_channels_rewrites_into_slices_partial_sums_and_an_add_chain():
    g = conv_graph(c_in=7, c_out=4, attrs={"epilogue": ("relu",)})
    new = IN_CHANNELS.apply(g, Match(IN_CHANNELS.name, ("conv",), (("pieces", 3),)))
    slices = [o for o in new if o.kind is OpKind.SLICE]
    assert [(o.attr("axis"), o.attr("start"), o.attr("end")) for o in slices] == \
        [(1, 0, 3), (1, 3, 5), (1, 5, 7)]
    pieces = [new[new.id_of(f"conv/ic{k}")] for k in range(3)]
    assert all(o.output_shape == (1, 4, 9, 7) and o.attr("epilogue") is None for o in pieces)
    # the bias (4 elements) sits in the first piece only
    assert [o.weight_elems for o in pieces] == [4 * 3 * 9 + 4, 4 * 2 * 9, 4 * 2 * 9]
    last = new[new.id_of("conv")]
    assert last.kind is OpKind.ELTWISE_BINARY and last.op_type == "add"
    assert last.attr("epilogue") == ("relu",)
    assert [new[i].name for i in last.inputs] == ["conv/ic1.add", "conv/ic2"]
    assert sum(o.macs for o in new) == g.total_macs


def test_rows_bands_carry_their_halo_and_padding_only_at_the_edges():
    g = conv_graph(h=9, k=3, padding=1)
    new = ROWS.apply(g, Match(ROWS.name, ("conv",), (("pieces", 3),)))
    bands = [new[new.id_of(f"conv/rows{k}")] for k in range(3)]
    assert [o.padding for o in bands] == [(1, 1, 0, 1), (0, 1, 0, 1), (0, 1, 1, 1)]
    assert [o.output_shape[2] for o in bands] == [3, 3, 3]
    slices = [new[o.inputs[0]] for o in bands]
    assert [(s.attr("axis"), s.attr("start"), s.attr("end")) for s in slices] == \
        [(2, 0, 4), (2, 2, 7), (2, 5, 9)]
    cat = new[new.id_of("conv")]
    assert cat.kind is OpKind.CONCAT and cat.attr("axis") == 2
    assert all(o.weight_elems == g[0].weight_elems for o in bands)  # weights repeated
    assert sum(o.macs for o in bands) == g[0].macs


def test_new_names_avoid_existing_ones():
    b = GraphBuilder("clash")
    b.add_input("x", (1, 4, 5, 5))
    b.add_op("conv", OpKind.CONV, "conv", ["x"], (1, 4, 5, 5), kernel=(3, 3),
             padding=(1, 1, 1, 1), weight_elems=4 * 4 * 9, macs=conv_macs((1, 4, 5, 5), 4, 1,
                                                                         (3, 3)))
    b.add_op("conv/oc0", OpKind.ELTWISE_UNARY, "relu", ["conv"], (1, 4, 5, 5))
    g = b.build(["conv/oc0"])
    new = assert_equivalent(OUT_CHANNELS, g, 2, op="conv")
    assert {"conv/oc0#1", "conv/oc1", "conv/oc0"} <= {o.name for o in new}


@pytest.mark.parametrize("rule, graph, pieces, why", [
    (OUT_CHANNELS, conv_graph(c_out=4), 5, "pieces"),
    (OUT_CHANNELS, conv_graph(), 1, "pieces"),
    (IN_CHANNELS, conv_graph(c_in=4, c_out=4, groups=4), 2, "cannot be split"),
    (ROWS, linear_graph(), 2, "cannot be split"),
    (ROWS, pool_graph(h=6, k=3, stride=2, padding=0, attrs={"ceil_mode": True}), 2,
     "cannot be split"),
])
def test_a_match_that_does_not_hold_raises(rule, graph, pieces, why):
    name = graph[0].name
    with pytest.raises(RewriteError, match=why):
        rule.apply(graph, Match(rule.name, (name,), (("pieces", pieces),)))


def test_a_replayed_match_no_longer_holds_after_it_was_applied():
    g = conv_graph()
    m = Match(OUT_CHANNELS.name, ("conv",), (("pieces", 2),))
    once = OUT_CHANNELS.apply(g, m)
    with pytest.raises(RewriteError, match="cannot be split"):
        OUT_CHANNELS.apply(once, m)  # "conv" is the concat now
    with pytest.raises(RewriteError, match="no op 'nope'"):
        OUT_CHANNELS.apply(g, Match(OUT_CHANNELS.name, ("nope",), (("pieces", 2),)))
    with pytest.raises(RewriteError, match="integer"):
        OUT_CHANNELS.apply(g, Match(OUT_CHANNELS.name, ("conv",), (("pieces", "2"),)))
    with pytest.raises(RewriteError, match="not one of rule"):
        ROWS.apply(g, m)
    rules = {r.name: r for r in FISSION_RULES}
    assert replay(g, [m], rules) == once
    with pytest.raises(RewriteError):
        replay(g, [m, m], rules)


def test_transform_refuses_parameters_of_another_shape():
    g = conv_graph()
    m = Match(OUT_CHANNELS.name, ("conv",), (("pieces", 2),))
    params = random_params(conv_graph(c_out=6))
    with pytest.raises(RewriteError, match="weight of shape"):
        OUT_CHANNELS.transform(g, m, params)


# --- equivalence through the executor ------------------------------------------------------


@pytest.mark.parametrize("graph, pieces", [
    (conv_graph(c_in=6, c_out=10), 3),
    (conv_graph(c_in=5, c_out=7, k=3, stride=2, padding=(1, 0, 2, 1), dilation=2,
                bias=False), 7),
    (conv_graph(c_in=8, c_out=12, groups=4), 3),  # grouped: whole groups per piece
    (conv_graph(c_in=6, c_out=12, groups=6), 4),  # depthwise, channel multiplier 2
    (conv_graph(c_in=6, c_out=6, groups=6, k=5, padding=2), 6),  # depthwise, 1 channel each
    (conv_graph(attrs={"epilogue": ("hardtanh(max_val=6.0,min_val=0.0)",)}, tail=False), 2),
    (conv_graph(c_in=3, c_out=4, k=1, padding=0, attrs={"padding_mode": "reflect"}), 4),
    (linear_graph(), 3),
    (linear_graph((2, 5, 12), 9, bias=False), 4),
])
def test_out_channels_is_equivalent(graph, pieces):
    assert_equivalent(OUT_CHANNELS, graph, pieces)


@pytest.mark.parametrize("graph, pieces", [
    (conv_graph(c_in=7, c_out=5), 3),
    (conv_graph(c_in=6, c_out=4, k=5, stride=2, padding=(2, 1, 2, 3), dilation=2), 6),
    (conv_graph(c_in=8, c_out=4, attrs={"epilogue": ("relu", "tanh")}, tail=False), 3),
    (conv_graph(c_in=4, c_out=3, k=3, padding=1, attrs={"padding_mode": "reflect"}), 2),
    (linear_graph((2, 20), 7), 4),
    (linear_graph((3, 2, 6), 5, bias=False, attrs={"epilogue": ("silu",)}), 6),
])
def test_in_channels_is_equivalent(graph, pieces):
    assert_equivalent(IN_CHANNELS, graph, pieces)


@pytest.mark.parametrize("graph, pieces", [
    (conv_graph(h=9), 2),
    (conv_graph(h=9), 9),
    (conv_graph(h=16, w=9, k=7, stride=2, padding=3), 3),
    (conv_graph(h=12, k=3, dilation=2, padding=2, attrs={"epilogue": ("relu6",)}), 4),
    (conv_graph(h=10, padding=(0, 1, 2, 1), stride=3, bias=False), 2),
    (conv_graph(c_in=6, c_out=6, groups=6, h=13, stride=2), 5),
    (pool_graph("max", h=11), 3),
    (pool_graph("max", h=11, w=7, k=3, stride=2, padding=1, attrs={"ceil_mode": True}), 2),
    (pool_graph("avg", h=9, k=3, stride=1, padding=1), 4),
    (pool_graph("avg", h=9, k=3, stride=1, padding=1,
                attrs={"count_include_pad": False}), 4),
    (pool_graph("max", h=12, k=2, stride=2, padding=0), 6),
])
def test_rows_is_equivalent(graph, pieces):
    assert_equivalent(ROWS, graph, pieces)


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(["conv", "max", "avg"]), k=st.integers(1, 5),
       stride=st.integers(1, 3), dilation=st.integers(1, 2), h=st.integers(5, 13),
       pads=st.tuples(st.integers(0, 2), st.integers(0, 2)), data=st.data())
def test_rows_is_equivalent_on_random_windows(kind, k, stride, dilation, h, pads, data):
    top, bottom = (min(p, k // 2) for p in pads)  # torch pools pad at most half the window
    if kind == "avg":
        dilation = 1
    if _out_size(h, k, stride, top, bottom, dilation) < 2:
        return
    pad = (top, 1 if k > 2 else 0, bottom, 1 if k > 2 else 0)
    w = 4 + dilation * (k - 1)
    if kind == "conv":
        graph = conv_graph(c_in=3, c_out=2, h=h, w=w, k=k, stride=stride, padding=pad,
                           dilation=dilation)
    else:
        graph = pool_graph(kind, c=2, h=h, w=w, k=k, stride=stride, padding=pad,
                           dilation=dilation)
    h_out = graph[0].output_shape[2]
    assert_equivalent(ROWS, graph, data.draw(st.integers(2, h_out)))


@settings(max_examples=25, deadline=None)
@given(c_in=st.integers(2, 9), c_out=st.integers(2, 9), k=st.integers(1, 3),
       stride=st.integers(1, 2), bias=st.booleans(), data=st.data())
def test_channel_fission_is_equivalent_on_random_convs(c_in, c_out, k, stride, bias, data):
    graph = conv_graph(c_in=c_in, c_out=c_out, h=6, w=5, k=k, stride=stride, padding=k // 2,
                       bias=bias, attrs={"epilogue": ("relu",)})
    assert_equivalent(OUT_CHANNELS, graph, data.draw(st.integers(2, c_out)))
    assert_equivalent(IN_CHANNELS, graph, data.draw(st.integers(2, c_in)))


# --- finding the fewest pieces that fit ----------------------------------------------------


def _fits_after(rule: FissionRule, graph: ComputeGraph, name: str, pieces: int,
                hw: HardwareConfig, scheme: str) -> bool:
    """Every op the rewrite added fits alone, costed on the whole rewritten graph."""
    new = rule.apply(graph, Match(rule.name, (name,), (("pieces", pieces),)))
    cache = CostCache(new, hw, scheme)
    old = {o.name for o in graph} - {name}
    return all(cache.group((o.id,)).fits for o in new if o.name not in old)


@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_find_proposes_the_fewest_pieces_that_all_fit(scheme):
    g = conv_graph(c_in=64, c_out=64, h=12, w=12)  # 36,928 weights
    # LBDF holds every weight: 16 KiB is too small. BRR streams weights in channel slices
    # and fits the op alone in 5,953 B (one output channel's weights + its activation rows),
    # so it needs a buffer below that.
    buffer = 16 * KIB if scheme == "lbdf" else 5 * KIB
    hw = _hw(buffer)
    assert not CostCache(g, hw, scheme).group((0,)).fits
    ctx = RuleContext(hw, scheme, CostCache(g, hw, scheme))
    bound = math.ceil(g[0].weight_elems / buffer)  # the pieces' weights all fit the buffer
    for rule in (OUT_CHANNELS, IN_CHANNELS):
        (m,) = rule.find(g, ctx)
        assert m.ops == ("conv",) and m.rule == rule.name
        p = m.arg("pieces")
        if scheme == "lbdf":
            assert p >= bound
        else:  # streamed weights do not bound P: fewer pieces than the weights suggest
            assert p < bound
        assert _fits_after(rule, g, "conv", p, hw, scheme)
        assert p == 2 or not _fits_after(rule, g, "conv", p - 1, hw, scheme)
        assert rule.find(g, RuleContext(hw, scheme)) == [m]  # without a cache: the same
    # LBDF: every band holds all the weights; BRR already runs the op in row tiles, so a band
    # needs no less than its finest tile: no band count fits
    assert ROWS.find(g, ctx) == []


def test_find_rows_where_a_band_needs_fewer_input_rows():
    # a 7x7 window, stride 2, over 7 rows: output row 1 needs input rows 0..5 while the
    # next one arrives (7 rows live); a band holding row 1 alone needs 6 rows (whole-row line
    # buffers: with pixel line buffers the op fits alone here)
    g = conv_graph(c_in=16, c_out=4, h=7, w=64, k=7, stride=2, padding=3)
    hw = dataclasses.replace(_hw(10_000), lbdf_buffer="row")
    assert not CostCache(g, hw, "lbdf").group((0,)).fits
    (m,) = ROWS.find(g, RuleContext(hw, "lbdf"))
    p = m.arg("pieces")
    assert _fits_after(ROWS, g, "conv", p, hw, "lbdf")
    assert p == 2 or not _fits_after(ROWS, g, "conv", p - 1, hw, "lbdf")


def test_find_needs_a_machine_and_a_fusing_dataflow():
    g = conv_graph(c_in=64, c_out=64)
    small = _hw(16 * KIB)
    for rule in FISSION_RULES:
        assert rule.find(g, RuleContext()) == []
        assert rule.find(g, RuleContext(small, "lbl")) == []
        assert rule.find(g, RuleContext(_hw(1024 * KIB), "lbdf")) == []  # it fits


def test_fission_to_fixpoint_leaves_no_op_that_fits_no_group():
    b = GraphBuilder("tail")
    b.add_input("x", (1, 32, 8, 8))
    prev, c = "x", 32
    for k, c_out in enumerate((96, 96, 160)):
        out = (1, c_out, 8, 8)
        b.add_op(f"c{k}", OpKind.CONV, "conv", [prev], out, kernel=(3, 3),
                 padding=(1, 1, 1, 1), weight_elems=c_out * c * 9 + c_out,
                 macs=conv_macs(out, c, 1, (3, 3)), attrs={"epilogue": ("relu",)})
        prev, c = f"c{k}", c_out
    b.add_op("gp", OpKind.GLOBAL_POOL, "avg", [prev], (1, c, 1, 1), kernel=(8, 8),
             stride=(8, 8))
    b.add_op("flat", OpKind.RESHAPE, "flatten", ["gp"], (1, c))
    b.add_op("fc", OpKind.LINEAR, "linear", ["flat"], (1, 1000), weight_elems=1000 * c + 1000,
             macs=linear_macs((1, 1000), c))
    g = b.build(["fc"])
    # LBDF at 64 KiB: c1, c2, fc hold weights > 64 KiB. BRR streams weights in channel
    # slices, so at 5 KiB only c1 and c2 fit no group (their activation rows + one output
    # channel's weights need 5,473 and 6,497 B) while fc streams its weights and fits
    for scheme, buffer, unfusable in (("lbdf", 64 * KIB, {"c1", "c2", "fc"}),
                                      ("brr", 5 * KIB, {"c1", "c2"})):
        hw = _hw(buffer)
        cache = CostCache(g, hw, scheme)
        assert {g[o].name for o in cache.unfusable} == unfusable
        new, done = apply_all(g, FISSION_RULES, RuleContext(hw, scheme, cache))
        assert len(done) == len(unfusable) and CostCache(new, hw, scheme).unfusable == ()
        params = random_params(g, 1)
        rules = {r.name: r for r in FISSION_RULES}
        moved, before = params, g
        for r in done:
            moved = rules[r.match.rule].transform(before, r.match, moved)
            before = r.graph
        x = torch.randn(g.input_shapes[0])
        (a,), (b_,) = execute(g, params, x), execute(new, moved, x)
        assert float((a - b_).abs().max()) <= 1e-4 * max(1.0, float(a.abs().max()))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v2", "vgg16"])
def test_zoo_ops_that_fit_no_group_fit_after_fission(name):
    from simulator.workload.loader import load_zoo

    g = load_zoo(name)
    # LBDF only: BRR streams weights in channel slices, so every op of both fits alone at
    # 128 KiB; what does not fit under BRR at smaller buffers is activation-bound (a tile's
    # rows with the allowances), which the fission rules do not reduce enough (known gap)
    for scheme, hw in (("lbdf", _hw(128 * KIB)),):
        cache = CostCache(g, hw, scheme)
        assert cache.unfusable  # mobilenet_v2: 8, vgg16: 13 at 128 KiB
        new, done = apply_all(g, FISSION_RULES, RuleContext(hw, scheme, cache))
        after = CostCache(new, hw, scheme)
        assert after.unfusable == ()
        assert {r.match.ops[0] for r in done} == {g[o].name for o in cache.unfusable}
    # the last stage's rewrites compute what the network computes
    params = random_params(g, 0)
    rules, moved, before = {r.name: r for r in FISSION_RULES}, params, g
    for r in done:
        moved = rules[r.match.rule].transform(before, r.match, moved)
        before = r.graph
    x = torch.randn(g.input_shapes[0], generator=torch.Generator().manual_seed(0))
    (a,), (b,) = execute(g, params, x), execute(new, moved, x)
    assert float((a - b).abs().max()) <= 1e-4 * max(1.0, float(a.abs().max()))
