"""The LBDF window floors (`simulator.cost.lbdf.window_floors`) and the pruning rule the exact
solver builds on them: a group holding an op holds, besides all its weights, at least that op's
window floor, so weights + the largest floor over the buffer rules a set out with its
supersets (docs/exact.md, "Candidate sets")."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.exact import optimum
from search.exact.candidates import _Growth, enumerate_space, lbdf_buffer_bound
from search.exact.lazy import _Search
from search.substitution.stages import run_stages
from simulator.cost import CostCache
from simulator.cost.lbdf import line_buffer_elems, window_floors
from simulator.hw import load_hw
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.loader import load_zoo
from simulator.workload.synthetic import hrnet_like
from tests.search.conftest import Net
from tests.search.test_exact import _brute, _grown_convex

_MODELS = ("resnet18", "mobilenet_v3_small", "squeezenet1_0", "deit_s", "hrnet_like")


@cache
def _graph(model: str) -> ComputeGraph:
    graph = hrnet_like() if model == "hrnet_like" else load_zoo(model)
    return run_stages(graph, "fuse").graph


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(_MODELS), granularity=st.sampled_from(["pixel", "row"]),
       at=st.integers(0, 10_000), steps=st.lists(st.integers(0, 50), max_size=30))
def test_window_floors_never_exceed_what_a_group_holds(model, granularity, at, steps):
    """On random convex groups of CNNs, a transformer and an HRNet, at both granularities: the
    largest window floor of the group's ops is at most the line buffers the cost model holds,
    and the pruning bound (weights + that floor) at most F_beta."""
    graph = _graph(model)
    ops = _grown_convex(graph, at % len(graph), steps)
    floors = window_floors(graph)
    assert max(floors[o] for o in ops) <= line_buffer_elems(graph, ops, granularity)
    hw = load_hw("edge-npu", {"buffer": "1MiB", "lbdf_buffer": granularity})
    cost = CostCache(graph, hw, "lbdf").group(ops)
    assert lbdf_buffer_bound(graph, ops, hw.dtype_bytes) <= cost.buffer_bytes


def test_window_floor_of_an_op_is_its_window_less_a_row():
    """A 3x3 conv holds two rows of its input (stride 1 or 2: each inner output row reads
    three input rows), a 1x1 conv and an elementwise op none, a global pooling none (it folds
    its rows in), a flatten every row but one; the pixel line buffer holds two rows and three
    pixels, the floor stays below it."""
    n = Net("window", (1, 8, 8, 8))
    a = n.conv("a", "x", 8)
    b = n.conv("b", a, 8, stride=2)
    c = n.conv("c", b, 8, k=1)
    r = n.unary("r", c)
    n.b.add_op("gp", OpKind.GLOBAL_POOL, "avg", [r], (1, 8, 1, 1), kernel=(4, 4), stride=(4, 4))
    n.b.add_op("flat", OpKind.RESHAPE, "flatten", [r], (1, 128))
    graph = n.b.build(["gp", "flat"])
    row = 8 * 8  # channels x width
    floors = dict(zip((op.name for op in graph), window_floors(graph), strict=True))
    assert floors == {"a": 2 * row, "b": 2 * row, "c": 0, "r": 0, "gp": 0,
                      "flat": 3 * 8 * 4}  # r: 4 rows of 8 channels x 4 pixels
    pixel = line_buffer_elems(graph, (0,), "pixel")
    assert 2 * row + 3 * 8 <= pixel  # (k - 1) rows + k pixels of 8 channels, and more
    assert floors["a"] < pixel


def test_window_rule_keeps_hrnets_transitions_apart():
    """hrnet_w18_small at 64 KiB: the two transitions reading the stem's 56-wide, 128-channel
    map fit by their weights (55,344 B), not with two rows of that map (14,336 B more); the
    rule rules the pair out, the growth prunes it, the real group does not fit, and the lazy
    heuristic's bound at the empty state counts the map's second read."""
    graph = _graph("hrnet_like")
    hw = load_hw("edge-npu", {"buffer": "64KiB"})
    cache = CostCache(graph, hw, "lbdf")
    ids = {op.name: op.id for op in graph}
    pair = (ids["transition1.0"], ids["transition1.1"])
    mask = 1 << pair[0] | 1 << pair[1]
    weights = sum(graph[o].weight_reads for o in pair) * hw.dtype_bytes
    assert weights == 55_344 <= hw.buffer_bytes
    assert not cache.group(pair).fits
    growth = _Growth(graph, cache, None, None)
    assert growth._prune(mask, weights)
    search = _Search(graph, cache, max_sets=1, max_states=1, budget=None, upper=None)
    assert search._never(mask)
    stem = graph[ids["layer1.0.add"]].output_elems * hw.dtype_bytes
    assert stem == 401_408
    # a second read of the stem's map (and more) beyond the bound without the window rule
    assert search.h(0)[0] >= 19_958_144 + stem


@pytest.mark.parametrize("buffer", [350, 400, 500])
def test_window_rule_prunes_and_keeps_the_optimum(buffer, hw):
    """A chain of 3x3 convs on 16-wide maps at buffers where two or three convs' weights fit, not
    with a window's two rows: the enumeration prunes sets whose weights fit, and the eager and
    lazy optima are brute force's."""
    n = Net("chain", (1, 4, 16, 16))
    t = "x"
    for k in range(5):
        t = n.unary(f"r{k}", n.conv(f"c{k}", t, 4))
    graph = n.build(t)
    cache = CostCache(graph, hw(buffer), "lbdf")
    d = cache.hw.dtype_bytes
    space = enumerate_space(graph, cache)
    kept = set(space.masks)
    floors = window_floors(graph)
    ruled = 0
    for mask in enumerate_space(graph, CostCache(graph, hw(1 << 30), "lbdf")).masks:
        ops = [o for o in range(len(graph)) if mask >> o & 1]
        weights = sum(graph[o].weight_reads for o in ops) * d
        if len(ops) > 1 and weights <= buffer < weights + max(floors[o] for o in ops) * d:
            ruled += 1
            assert mask not in kept
            assert not cache.group(tuple(ops)).fits
    assert ruled
    best = min(cost.dram_bytes for _, cost in _brute(graph, cache))
    for search in ("eager", "lazy"):
        assert optimum(graph, cache, search=search, incumbents=()).dram_bytes == best
