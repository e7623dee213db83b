"""Split buffers (a weight buffer and an activation buffer): the worked example of
docs/cost-model.md section 4.5, every number derived by hand there from example (a) of
section 9.1 (x -> conv0 -> conv1, 3x3 convs of 4 channels, 148 weights each, int8, pixel line
buffers), and the simulator enforcing each buffer."""

from __future__ import annotations

import pytest

from simulator.cost import CostCache, Failure, brr, evaluate_plan, lbdf, lbl
from simulator.engine import SimulationError, simulate
from simulator.hw import HardwareConfig
from simulator.plan import PartitionPlan
from tests.search.conftest import Net
from tests.simulator.cost.test_tiled_layers import chain_graph, hw

GROUP = (0, 1)


def split(weights: int, activations: int) -> HardwareConfig:
    """Section 9's hardware with a weight buffer and an activation buffer."""
    return hw(weights + activations).with_overrides(weight_buffer=weights,
                                                    activation_buffer=activations)


def test_the_same_512_bytes_fit_lbdf_one_way_and_not_the_other():
    """F_beta = 296 B of weights + 160 B of pixel line buffers = 456 B (section 9.1). Shared,
    512 B hold it; split 256/256 they do not (296 > 256), 320/192 they do (296 <= 320,
    160 <= 192), 360/152 they do not (160 > 152)."""
    g = chain_graph()
    shared = lbdf.group_cost(g, GROUP, hw(512))
    assert (shared.fits, shared.buffer_bytes, shared.weight_buffer_bytes) == (True, 456, 296)
    weights_over = lbdf.group_cost(g, GROUP, split(256, 256))
    assert not weights_over.fits and weights_over.failure is Failure.WEIGHTS_OVER_BUFFER
    assert weights_over.reason == "weights (296 B) exceed the weight buffer (256 B)"
    fits = lbdf.group_cost(g, GROUP, split(320, 192))
    assert fits.fits and (fits.buffer_bytes, fits.weight_buffer_bytes) == (456, 296)
    assert fits.timing.cycles == shared.timing.cycles == 1344  # the same row schedule
    lines_over = lbdf.group_cost(g, GROUP, split(360, 152))
    assert not lines_over.fits and lines_over.failure is Failure.OVER_BUFFER
    assert lines_over.reason == "line buffers need 160 B > activation buffer 152 B"
    assert lbdf.group_cost(g, GROUP, split(296, 160)).fits  # both exactly full


def test_a_group_that_does_not_fit_falls_back_to_its_ops_streamed():
    """Split 256/256: each conv alone holds 148 B of weights and 84 B of pixels (232 B), both
    within their buffers, so layer by layer streams them: F_D 2 x 660 = 1,320 B, against the
    808 B the shared 512 B buffer reaches by fusing."""
    g = chain_graph()
    for o in GROUP:
        t = lbl.layer_tiling(g, o, split(256, 256))
        assert t.streamed and (t.buffer_bytes, t.weight_buffer_bytes, t.dram_bytes) == \
            (232, 148, 660)
    fused = PartitionPlan.of([GROUP])
    assert evaluate_plan(g, fused, hw(512), "lbdf").dram_bytes == 808
    assert not evaluate_plan(g, fused, split(256, 256), "lbdf").valid


def test_brr_one_channel_slices_against_the_weight_buffer():
    """At T = 1 each BRR position holds 576 B of activations and a conv streamed in
    one-channel slices 37 B of weights (section 9.1): 64/576 fits at T = 1 in 4 slices per conv
    (F_beta 37 + 576 = 613 B, F_D 808 B), as the shared 640 B does; 36/604 fits at no tile
    count, since no slice holds fewer than 37 weights."""
    g = chain_graph()
    shared = brr.group_cost(g, GROUP, hw(640))
    roomy = brr.group_cost(g, GROUP, split(64, 576))
    for c in (shared, roomy):
        assert c.fits and (c.tiles, c.buffer_bytes, c.weight_buffer_bytes, c.dram_bytes) == \
            (1, 613, 37, 808)
        assert c.weight_slices == ((0, "out", 4), (1, "out", 4))
    tight = brr.group_cost(g, GROUP, split(36, 604))
    assert not tight.fits and tight.failure is Failure.OVER_BUFFER
    assert "needs 37 B of weights (weight buffer 36 B)" in tight.reason


def test_a_tiled_layer_splits_its_input_channels_for_a_small_weight_buffer():
    """Split 36/220: one output channel's 37 weights exceed the weight buffer, so conv0 alone
    is tiled in blocks of 2 input channels (2 x 9 + 1 bias = 19 weights), its weights re-read
    per band; the shared 256 B streams it."""
    g = chain_graph()
    t = lbl.layer_tiling(g, 0, split(36, 220))
    assert t.fits and not t.streamed and t.in_block == 2 and t.out_block == 1
    assert t.weight_buffer_bytes == 19 and t.buffer_bytes - t.weight_buffer_bytes <= 220
    assert lbl.layer_tiling(g, 0, hw(256)).streamed


def test_the_simulator_enforces_each_buffer():
    g = chain_graph()
    plan = PartitionPlan.of([GROUP])
    ok = simulate(g, plan, split(320, 192), "lbdf", record=False)
    assert ok.peak_by_buffer == {"weights": 296, "activations": 160}
    assert ok.peak_buffer_bytes == 456 and ok.dram_bytes == 808
    assert simulate(g, plan, hw(512), "lbdf", record=False).peak_by_buffer == {}
    with pytest.raises(SimulationError, match=r"exceed the weight buffer \(148 B held of 256 B\)"):
        simulate(g, plan, split(256, 256), "lbdf", record=False)
    with pytest.raises(SimulationError, match=r"exceed the activation buffer .* of 152 B\)"):
        simulate(g, plan, split(360, 152), "lbdf", record=False)


@pytest.mark.parametrize("scheme", ["lbdf", "brr", "lbl", "hybrid"])
@pytest.mark.parametrize("caps", [(2_048, 6_144), (6_144, 2_048), (3_000, 3_000)])
def test_simulated_peaks_stay_within_each_buffer_and_the_analytic_parts(scheme, caps):
    """A residual network under every dataflow: DRAM bytes equal the model's, and each
    buffer's simulated peak is within its capacity and within the group's weight (F_beta's
    weight part) or activation part."""
    net = Net("res", (1, 16, 16, 16))
    a = net.unary("r0", net.conv("c0", "x", 16))
    b = net.conv("c1", a, 16)
    graph = net.build(net.unary("r2", net.conv("c2", net.add("add", b, a), 16, k=1)))
    machine = split(*caps)
    cache = CostCache(graph, machine, scheme)
    groups = [(0, 1), (2, 3), (4, 5)]
    plan = PartitionPlan.of([g if cache.run(g).fits else () for g in groups]
                            + [(o,) for g in groups if not cache.run(g).fits for o in g])
    report = simulate(graph, plan, machine, scheme, record=False, cache=cache)
    assert report.dram_bytes == sum(cache.run(g.ops).dram_bytes for g in plan.groups)
    for g in report.groups:
        cost = cache.run(plan.groups[g.index].ops)
        peaks = dict(g.peak_by_buffer)
        assert peaks["weights"] <= min(caps[0], cost.weight_buffer_bytes)
        assert peaks["activations"] <= min(caps[1], cost.buffer_bytes - cost.weight_buffer_bytes)
