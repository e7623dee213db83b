"""The pixel line buffer of LBDF (docs/cost-model.md 4.1, "Pixel granularity") against a
brute-force pixel-granular schedule.

`reference` below simulates an LBDF group pixel by pixel, in pure Python, from the
definitions alone: every pixel is an event; pixels stream in raster order; an op's pixel is
computed as soon as the last pixel of its window (every input it waits for) exists; a tensor
holds, at every event, the contiguous pixel interval from the oldest pixel some reader still
needs to the newest one produced (one pixel in flight ahead of the newest for an entering
tensor, the newest one kept while it is written for a leaving tensor). Its row structure, the
rows' (time, epoch) and wavefront step, is the one of the row schedule (`_row_groups`,
re-derived here from `simulator.cost.rows`). The analytic rule (`simulator.cost.lbdf`) must
never hold less than this schedule's peak (its wavefront part) and, per group, takes the
smaller of that and the whole-row schedule, which a pixel buffer can run too.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost import lbdf
from simulator.cost.lbdf import _peaks, line_buffer_elems, peak_row_bytes
from simulator.cost.rows import row_deps
from simulator.hw import HardwareConfig, HardwareConfigError
from simulator.partition import components
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import ComputeGraph, Op, OpKind

_WHOLE = (OpKind.GLOBAL_POOL, OpKind.OPAQUE, OpKind.SOFTMAX, OpKind.LINEAR)
_WINDOWED = (OpKind.CONV, OpKind.DWCONV, OpKind.POOL)


# --- the brute-force schedule ---------------------------------------------------------------


def _dims(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(rows, pixels per row, elements per pixel); a tensor of other rank is one pixel."""
    if len(shape) == 4:
        return shape[2], shape[3], math.prod(shape) // (shape[2] * shape[3])
    return 1, 1, math.prod(shape)


def _columns(op: Op, k: int) -> list[tuple[int, int]]:
    """First and last input column each output column of `op` reads from input slot k."""
    (_, w_in, _), (_, w_out, _) = _dims(op.input_shapes[k]), _dims(op.output_shape)
    out = []
    for c in range(w_out):
        if len(op.output_shape) != 4 or len(op.input_shapes[k]) != 4 or op.kind in _WHOLE:
            lo, hi = 0, w_in - 1
        elif op.kind in _WINDOWED and not op.attr("adaptive", False):
            lo = c * op.stride[1] - op.padding[1]
            hi = lo + op.dilation[1] * (op.kernel[1] - 1)
        elif op.kind is OpKind.PAD:
            lo = hi = c - op.padding[1]
        elif op.kind is OpKind.RESIZE:
            lo, hi = c * w_in // w_out - 1, ((c + 1) * w_in - 1) // w_out + 1
        else:
            lo, hi = c * w_in // w_out, ((c + 1) * w_in - 1) // w_out
        out.append((min(max(lo, 0), w_in - 1), min(max(hi, 0), w_in - 1)))
    return out


def _blocks(op: Op) -> bool:
    rows = [_dims(s)[0] for s in op.input_shapes]
    return _dims(op.output_shape)[0] == 1 and any(h > 1 for h in rows)


def _row_groups(graph: ComputeGraph, refs: tuple[int, ...], index: dict[int, int],
                n_in: int) -> tuple[list[list], list[list]]:
    """Per tensor and row: its (time, epoch) and its wavefront step (docs/cost-model.md 4.1)."""
    deps = row_deps(graph)
    key: list[list] = []
    step: list[list] = []
    for k, ref in enumerate(refs):
        h = _dims(graph.tensor_shape(ref))[0]
        if k < n_in:
            key.append([(Fraction(j, h), 0) for j in range(h)])
            step.append([0] * h)
            continue
        op = graph[ref]
        ks: list = []
        ss: list = []
        for r in range(h):
            at = [(index[i], int(deps.hi[ref][s][r])) for s, i in enumerate(op.inputs)]
            srcs = [(key[kk][row], step[kk][row]) for kk, row in at]
            te = max(t for t, _ in srcs)
            if _blocks(op):
                te, st_ = (te[0], te[1] + 1), 0
            else:
                st_ = max(s_ for t, s_ in srcs if t == te)
            if r and ks[-1] == te:
                st_ = max(st_, ss[-1] + 1)
            ks.append(te)
            ss.append(st_)
        key.append(ks)
        step.append(ss)
    return key, step


def reference(graph: ComputeGraph, ops: tuple[int, ...]) -> int:
    """Peak elements a pixel-granular LBDF schedule of `ops` holds (brute force)."""
    ops = tuple(sorted(ops))
    deps = row_deps(graph)
    entering = graph.inputs_of(ops)
    refs = (*entering, *ops)
    index = {r: k for k, r in enumerate(refs)}
    dims = [_dims(graph.tensor_shape(r)) for r in refs]
    rkey, rstep = _row_groups(graph, refs, index, len(entering))
    keys: list[list] = []  # per tensor, per raster pixel: the event's sort key
    for k, ref in enumerate(refs):
        h, w, _ = dims[k]
        if k < len(entering):  # pixel (j, c) arrives at (j W + c) / (H W) of the stream
            keys.append([(*rkey[k][i // w], 0, Fraction(i, h * w), Fraction(0))
                         for i in range(h * w)])
            continue
        op, ks = graph[ref], []
        cols = [_columns(op, s) for s in range(len(op.inputs))]
        for r in range(h):
            prev = None
            for c in range(w):
                srcs = []
                for s, i in enumerate(op.inputs):
                    kk, row = index[i], int(deps.hi[ref][s][r])
                    if rkey[kk][row] == rkey[k][r] and not _blocks(op):  # it waits for it
                        srcs.append(keys[kk][row * dims[kk][1] + cols[s][c][1]])
                own = Fraction(c, w)
                if srcs:
                    t = max(x[3] for x in srcs)
                    pace = max([own] + [x[4] for x in srcs if x[3] == t])
                else:
                    t, pace = Fraction(0), own
                if prev is not None:  # a row is produced in raster order
                    t, pace = max(t, prev[0]), max(pace, prev[1]) if t <= prev[0] else pace
                prev = (t, pace)
                ks.append((*rkey[k][r], rstep[k][r], t, pace))
        keys.append(ks)
    events = sorted((keys[k][i], k, i) for k in range(len(refs)) for i in range(len(keys[k])))
    pos = [[0] * len(keys[k]) for k in range(len(refs))]
    for p, (_, k, i) in enumerate(events):
        pos[k][i] = p
    alloc = [list(p) for p in pos]
    need = [list(p) for p in pos]
    for k in range(len(entering)):  # one pixel in flight
        alloc[k][1:] = pos[k][:-1]
    for o in ops:
        op, ko = graph[o], index[o]
        h_o, w_o, _ = dims[ko]
        for s, i in enumerate(op.inputs):
            kk = index[i]
            if op.kind is OpKind.GLOBAL_POOL:  # folds every input pixel in as it arrives
                alloc[ko][0] = min(alloc[ko][0], pos[kk][0])
                continue
            w_in, cols = dims[kk][1], _columns(op, s)
            for r in range(h_o):
                for c in range(w_o):
                    at = pos[ko][r * w_o + c]
                    for ri in range(int(deps.lo[o][s][r]), int(deps.hi[o][s][r]) + 1):
                        for ci in range(cols[c][0], cols[c][1] + 1):
                            need[kk][ri * w_in + ci] = max(need[kk][ri * w_in + ci], at)
    last = len(events) - 1
    for o in graph.outputs_of(ops):  # written back: held until the next pixel exists
        k = index[o]
        for i in range(len(pos[k])):
            need[k][i] = max(need[k][i], pos[k][i + 1] - 1 if i + 1 < len(pos[k]) else last)
    total = [0] * (last + 1)
    for k in range(len(refs)):
        held = oldest = 0
        for p in range(last + 1):
            while held < len(alloc[k]) and alloc[k][held] <= p:
                held += 1
            while oldest < held and need[k][oldest] < p:
                oldest += 1
            total[p] += (held - oldest) * dims[k][2]
    return max(total)


# --- graphs ---------------------------------------------------------------------------------


def _graph(shape: tuple[int, ...], layers: list[tuple], outputs: list[str] | None = None
           ) -> ComputeGraph:
    """x, then (name, kind, inputs, output shape, fields) layers."""
    b = GraphBuilder("pixel")
    b.add_input("x", shape)
    for name, kind, inputs, out, fields in layers:
        b.add_op(name, kind, name, inputs, out, **fields)
    return b.build(outputs or [layers[-1][0]])


def conv(name: str, src: str, out: tuple[int, ...], k: int = 3, s: int = 1, p: int = 1,
         d: int = 1, groups: int = 1) -> tuple:
    return (name, OpKind.DWCONV if groups > 1 else OpKind.CONV, [src], out,
            {"kernel": (k, k), "stride": (s, s), "padding": (p, p, p, p), "dilation": (d, d),
             "groups": groups})


def unary(name: str, src: str, out: tuple[int, ...]) -> tuple:
    return (name, OpKind.ELTWISE_UNARY, [src], out, {})


def binary(name: str, a: str, b: str, out: tuple[int, ...], op: str = "add") -> tuple:
    return (name, OpKind.ELTWISE_BINARY, [a, b], out, {})


X = (1, 2, 6, 8)
GRAPHS = {
    "3x3 conv": _graph(X, [conv("c", "x", X)]),
    "5x5 conv": _graph(X, [conv("c", "x", X, k=5, p=2)]),
    "dilated 3x3 conv": _graph(X, [conv("c", "x", X, d=2, p=2)]),
    "strided 3x3 conv": _graph(X, [conv("c", "x", (1, 2, 3, 4), s=2)]),
    "1x1 conv": _graph(X, [conv("c", "x", (1, 3, 6, 8), k=1, p=0)]),
    "two 3x3 convs": _graph(X, [conv("c0", "x", X), conv("c1", "c0", X)]),
    "3x3, 1x1, strided 3x3": _graph(X, [conv("c0", "x", X), conv("c1", "c0", X, k=1, p=0),
                                         conv("c2", "c1", (1, 2, 3, 4), s=2)]),
    "residual block": _graph(X, [conv("c0", "x", X), unary("relu", "c0", X),
                                 conv("c1", "relu", X), binary("add", "c1", "x", X)]),
    "squeeze-and-excitation": _graph(X, [
        conv("dw", "x", X, groups=2),
        ("gap", OpKind.GLOBAL_POOL, ["dw"], (1, 2, 1, 1), {"kernel": (6, 8), "stride": (6, 8)}),
        ("fc", OpKind.CONV, ["gap"], (1, 2, 1, 1), {}),
        binary("mul", "dw", "fc", X), conv("proj", "mul", X, k=1, p=0)]),
    "concat": _graph(X, [conv("a", "x", X), conv("b", "x", X, k=1, p=0),
                         ("cat", OpKind.CONCAT, ["a", "b"], (1, 4, 6, 8), {})]),
    "max pool": _graph(X, [conv("c", "x", X), ("pool", OpKind.POOL, ["c"], (1, 2, 3, 4),
                                                {"kernel": (2, 2), "stride": (2, 2)})]),
    "upsample": _graph((1, 2, 3, 4), [("up", OpKind.RESIZE, ["x"], X, {}), conv("c", "up", X)]),
    "classifier": _graph(X, [
        ("gap", OpKind.GLOBAL_POOL, ["x"], (1, 2, 1, 1), {"kernel": (6, 8), "stride": (6, 8)}),
        ("flat", OpKind.RESHAPE, ["gap"], (1, 2), {}),
        ("fc", OpKind.LINEAR, ["flat"], (1, 5), {})]),
}
# where the rule is the pixel schedule's peak exactly (elsewhere it is above, within a row of
# each tensor: `test_the_rule_never_holds_less_than_the_pixel_schedule`)
EXACT = ["3x3 conv", "5x5 conv", "dilated 3x3 conv", "strided 3x3 conv", "1x1 conv",
         "two 3x3 convs", "max pool"]


def _wavefront(graph: ComputeGraph, ops: tuple[int, ...]) -> tuple[int, int]:
    """(whole-row schedule peak, pixel wavefront peak) in elements."""
    return _peaks(graph, ops)


def _row_sum(graph: ComputeGraph, ops: tuple[int, ...]) -> int:
    refs = (*graph.inputs_of(ops), *ops)
    return sum(row_deps(graph).row_elems_of[r] for r in refs)


@pytest.mark.parametrize("name", list(GRAPHS))
def test_the_rule_never_holds_less_than_the_pixel_schedule(name):
    graph = GRAPHS[name]
    ops = tuple(range(len(graph)))
    rows, wave = _wavefront(graph, ops)
    ref = reference(graph, ops)
    assert ref <= wave <= ref + _row_sum(graph, ops)  # conservative by less than a row each
    assert line_buffer_elems(graph, ops) == min(rows, wave)
    assert rows == peak_row_bytes(graph, ops) == line_buffer_elems(graph, ops, "row")
    if name in EXACT:
        assert wave == ref


@pytest.mark.parametrize(("k", "d", "w"), [(3, 1, 8), (3, 1, 13), (5, 1, 9), (3, 2, 11)])
def test_a_window_holds_k_minus_1_rows_and_k_pixels(k, d, w):
    # the paper's Fig. 1: a k x k window (dilation d) over a stream W wide and C channels
    # deep holds d(k-1) rows + d(k-1)+1 pixels, not d(k-1)+1 rows: here the input, plus the
    # pixel in flight, and the output's pixel being written
    c = 3
    graph = _graph((1, c, 9, w), [conv("c", "x", (1, 2, 9, w), k=k, d=d, p=d * (k // 2))])
    window = d * (k - 1)
    expected = (window * w + window + 1) * c + c + 2
    assert reference(graph, (0,)) == expected == line_buffer_elems(graph, (0,))
    assert peak_row_bytes(graph, (0,)) == (window + 2) * w * c + w * 2  # rows: +1 in flight


def test_row_granularity_and_unknown_granularities():
    graph = GRAPHS["two 3x3 convs"]
    assert line_buffer_elems(graph, (0, 1), "row") == peak_row_bytes(graph, (0, 1))
    with pytest.raises(HardwareConfigError, match="lbdf_buffer = 'rows': must be"):
        line_buffer_elems(graph, (0, 1), "rows")
    hw = HardwareConfig(name="t", buffer_bytes=1 << 20, dram_bandwidth=8.0, dram_latency=1,
                        clock_hz=1e9, macs_per_cycle=8, buffer_bandwidth=8.0,
                        energy_dram_pj_per_byte=1.0, energy_buffer_pj_per_byte=1.0,
                        energy_mac_pj=1.0, dtype_bytes=2)
    cost = lbdf.group_cost(graph, (0, 1), hw)
    assert cost.buffer_bytes == cost.weight_buffer_bytes + 2 * line_buffer_elems(graph, (0, 1))
    row = lbdf.group_cost(graph, (0, 1), hw.with_overrides(lbdf_buffer="row"))
    assert row.buffer_bytes > cost.buffer_bytes and row.dram_bytes == cost.dram_bytes


# --- random groups --------------------------------------------------------------------------


@st.composite
def small_groups(draw) -> tuple[ComputeGraph, tuple[int, ...]]:
    """A small random graph (3x3, 1x1, strided and dilated convs, elementwise ops, concat,
    squeeze-and-excitation, pooling, upsampling, global pooling) and a connected group of it."""
    h, w, c = draw(st.integers(3, 6)), draw(st.integers(2, 7)), draw(st.integers(1, 2))
    b = GraphBuilder("random")
    b.add_input("x", (1, c, h, w))
    tensors = [("x", (1, c, h, w))]
    for n in range(draw(st.integers(1, 6))):
        name = f"t{n}"
        src, shape = draw(st.sampled_from(tensors[-3:]))
        if len(shape) != 4:
            break
        _, ch, hh, ww = shape
        kind = draw(st.sampled_from(["conv", "conv", "1x1", "unary", "add", "concat", "se",
                                     "pool", "up", "gap"]))
        if kind == "conv":
            k, s, d = draw(st.sampled_from([(3, 1, 1), (3, 2, 1), (3, 1, 2), (5, 1, 1)]))
            p = draw(st.sampled_from([d * (k // 2), 0]))
            ho = (hh + 2 * p - d * (k - 1) - 1) // s + 1
            wo = (ww + 2 * p - d * (k - 1) - 1) // s + 1
            if ho < 1 or wo < 1:
                continue
            b.add_op(name, OpKind.CONV, "conv", [src], (1, ch, ho, wo), kernel=(k, k),
                     stride=(s, s), padding=(p, p, p, p), dilation=(d, d))
            tensors.append((name, (1, ch, ho, wo)))
        elif kind in ("1x1", "unary"):
            b.add_op(name, OpKind.CONV if kind == "1x1" else OpKind.ELTWISE_UNARY, kind, [src],
                     shape)
            tensors.append((name, shape))
        elif kind in ("add", "concat"):
            same = [t for t, s2 in tensors if s2 == shape and t != src]
            if not same:
                continue
            other = draw(st.sampled_from(same))
            out = shape if kind == "add" else (1, 2 * ch, hh, ww)
            b.add_op(name, OpKind.ELTWISE_BINARY if kind == "add" else OpKind.CONCAT, kind,
                     [src, other], out)
            tensors.append((name, out))
        elif kind == "se":
            b.add_op(name + "g", OpKind.GLOBAL_POOL, "avg", [src], (1, ch, 1, 1),
                     kernel=(hh, ww), stride=(hh, ww))
            b.add_op(name + "f", OpKind.CONV, "conv", [name + "g"], (1, ch, 1, 1))
            b.add_op(name, OpKind.ELTWISE_BINARY, "mul", [src, name + "f"], shape)
            tensors.append((name, shape))
        elif kind == "pool" and hh >= 2 and ww >= 2:
            b.add_op(name, OpKind.POOL, "max", [src], (1, ch, hh // 2, ww // 2), kernel=(2, 2),
                     stride=(2, 2))
            tensors.append((name, (1, ch, hh // 2, ww // 2)))
        elif kind == "up" and hh <= 4:
            b.add_op(name, OpKind.RESIZE, "nearest", [src], (1, ch, 2 * hh, 2 * ww))
            tensors.append((name, (1, ch, 2 * hh, 2 * ww)))
        elif kind == "gap":
            b.add_op(name, OpKind.GLOBAL_POOL, "avg", [src], (1, ch, 1, 1), kernel=(hh, ww),
                     stride=(hh, ww))
            tensors.append((name, (1, ch, 1, 1)))
    if len(tensors) == 1:
        b.add_op("t", OpKind.CONV, "conv", ["x"], (1, c, h, w), kernel=(3, 3),
                 padding=(1, 1, 1, 1))
        tensors.append(("t", (1, c, h, w)))
    graph = b.build([tensors[-1][0]])
    first = draw(st.integers(0, len(graph) - 1))
    last = draw(st.integers(first, len(graph) - 1))
    return graph, tuple(sorted(max(components(graph, range(first, last + 1)), key=len)))


@settings(max_examples=150, deadline=None)
@given(small_groups())
def test_random_groups_never_hold_less_than_the_pixel_schedule(case):
    graph, ops = case
    rows, wave = _wavefront(graph, ops)
    ref = reference(graph, ops)
    assert ref <= wave <= ref + _row_sum(graph, ops)
    assert line_buffer_elems(graph, ops) == min(rows, wave) <= peak_row_bytes(graph, ops)
