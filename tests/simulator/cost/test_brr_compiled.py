"""The compiled BRR group cost (`simulator.cost._brr_kernels.group`) takes the decisions of the
readable reference the simulator replays (`simulator.cost.brr.chosen_tiling`, `brr_cycles`):
the same tile count, weight plan, F_beta, F_D and cycles on random connected groups of zoo
networks, buffers and data types (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.cost import brr
from simulator.cost.cycles import brr_cycles
from simulator.hw import load_hw
from simulator.partition import components
from simulator.workload.loader import load_zoo

NETWORKS = ("resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0", "deit_s")


@st.composite
def groups(draw):
    graph = load_zoo(draw(st.sampled_from(NETWORKS)))
    start = draw(st.integers(0, len(graph) - 1))
    size = draw(st.integers(1, 40))
    comp = components(graph, range(start, min(len(graph), start + size)))
    return graph, tuple(sorted(max(comp, key=len)))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups(), st.sampled_from(["16KiB", "64KiB", "256KiB", "2MiB"]),
       st.sampled_from([1, 2]))
def test_compiled_cost_equals_reference(case, buffer, dtype_bytes):
    graph, ops = case
    hw = load_hw("edge-npu", {"buffer": buffer, "dtype_bytes": dtype_bytes})
    cost = brr.group_cost(graph, ops, hw)
    tiling = brr.chosen_tiling(graph, ops, hw)
    if tiling is None:  # BRR-incompatible: the reference path costs it
        assert not cost.fits
        return
    d = hw.dtype_bytes
    assert cost.tiles == tiling.tiles
    assert cost.buffer_bytes == tiling.buffer_elems * d
    assert cost.dram_act_read == tiling.act_read_elems * d
    assert cost.dram_weight_read == tiling.weight_read_elems * d
    assert cost.macs == tiling.macs
    assert cost.resident_weight_bytes == tiling.resident_elems * d
    assert cost.weight_slices == tuple((w.op, w.split, w.slices) for w in tiling.weights
                                       if not w.resident)
    assert cost.fits == (tiling.buffer_elems <= hw.buffer_bytes // d)
    if cost.fits:
        assert cost.timing.cycles == max(cost.timing.compute_cycles, cost.timing.dram_cycles,
                                         brr_cycles(graph, ops, tiling, hw))


def _windows_by_loop(lo, hi):
    """The definition, one window length at a time."""
    import numpy as np

    h = len(lo)
    w = np.zeros(h + 1, dtype=np.int64)
    for r in range(1, h + 1):
        w[r] = max(0, int((hi[r - 1:] - lo[:h - r + 1]).min()) + 1)
    return w


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 60), st.integers(-2, 6)), min_size=1, max_size=70),
       st.booleans(), st.sampled_from([1, 7, 1 << 22]))
def test_window_tables_are_the_least_window_of_every_length(rows, monotone, chunk):
    """`brr._window_table` (every window length at once, in chunks of start rows) equals the
    definition, min over a of hi[a+r-1] - lo[a] + 1, on arbitrary row tables: monotone as the
    cost model's, and not."""
    import numpy as np

    lo = np.array([a for a, _ in rows], dtype=np.int64)
    hi = lo + np.array([b for _, b in rows], dtype=np.int64)
    if monotone:
        lo, hi = np.sort(lo), np.sort(hi)
    saved = brr._WINDOW_CHUNK
    brr._WINDOW_CHUNK = chunk
    try:
        assert (brr._window_table(lo, hi) == _windows_by_loop(lo, hi)).all()
    finally:
        brr._WINDOW_CHUNK = saved
