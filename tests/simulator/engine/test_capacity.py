"""The simulator never holds more than the buffer (docs/simulator.md, "Capacity"): every group,
fused, layer by layer or tiled, on three networks at two buffers under LBDF and BRR; a plan
that cannot run is refused with its reason (`SimulationError`, exit status 2 in the CLI).
`benchmarks/simulator_capacity.py` runs the same checks on the whole zoo."""

from __future__ import annotations

import pytest

from simulator.cost import CostCache, evaluate_plan
from simulator.engine import simulate
from simulator.hw import HardwareConfig
from simulator.plan import PartitionPlan, layer_by_layer, segment_plan
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import ComputeGraph, OpKind
from simulator.workload.loader import load_zoo

NETWORKS = ("mobilenet_v2", "resnet18", "squeezenet1_1")


def hw(buffer: int) -> HardwareConfig:
    return HardwareConfig(
        name="test", buffer_bytes=buffer, dram_bandwidth=16.0, dram_latency=100,
        clock_hz=1e9, macs_per_cycle=1024, buffer_bandwidth=128.0,
        energy_dram_pj_per_byte=160.0, energy_buffer_pj_per_byte=2.5, energy_mac_pj=0.3,
    )


def greedy_segments(graph: ComputeGraph, cache: CostCache) -> PartitionPlan:
    """Segments grown while every component runs (an unfusable op stays alone)."""
    unfusable, cuts, start = set(cache.unfusable), [], 0
    while start < len(graph):
        end = start + 1
        while end < len(graph):
            groups = [g.ops for g in segment_plan(graph, [start, end + 1])
                      if start <= g.ops[0] <= end]
            if any(len(g) > 1 and unfusable & set(g) for g in groups) or not all(
                    cache.run(g).fits for g in groups):
                break
            end += 1
        cuts.append(end)
        start = end
    return segment_plan(graph, cuts)


@pytest.mark.parametrize("name", NETWORKS)
@pytest.mark.parametrize("buffer", [16 * 1024, 64 * 1024])
@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_no_group_ever_holds_more_than_the_buffer(name, buffer, scheme):
    graph = load_zoo(name, (1, 3, 96, 96))
    config = hw(buffer)
    cache = CostCache(graph, config, scheme)
    tiled = 0
    for plan in (layer_by_layer(graph), greedy_segments(graph, cache)):
        analytic = evaluate_plan(graph, plan, config, scheme, cache)
        assert analytic.valid, analytic.violations[:1]
        report = simulate(graph, plan, config, scheme, record=True, cache=cache)
        assert max(level for _, level in report.occupancy) <= buffer
        for g in report.groups:
            a = analytic.groups[g.index]
            assert g.peak_buffer_bytes == a.buffer_bytes <= buffer, g.index
            assert g.dram_bytes == a.dram_bytes, g.index
            tiled += g.tiling not in ("", "rows streamed (fits as a single-op LBDF group)")
        assert report.dram_bytes == analytic.dram_bytes
    if scheme == "lbdf":  # 16 KiB tiles layers in every one of these networks
        assert tiled > 0 or buffer > 16 * 1024


def test_the_layer_by_layer_reference_is_the_lbdf_layer_by_layer_plan():
    graph = load_zoo("resnet18", (1, 3, 96, 96))
    for buffer in (16 * 1024, 64 * 1024):
        cost = evaluate_plan(graph, layer_by_layer(graph), hw(buffer), "lbdf")
        lbl = evaluate_plan(graph, layer_by_layer(graph), hw(buffer), "lbl")
        assert cost.dram_bytes == cost.lbl_dram == lbl.dram_bytes
        rereads = sum(g.reread_act_bytes + g.reread_weight_bytes for g in cost.groups)
        assert (rereads > 0) == (buffer == 16 * 1024)  # at 64 KiB every tiling is ideal


def test_a_plan_that_cannot_run_is_refused_with_the_reason(cli, tmp_path):
    b = GraphBuilder("chain")
    b.add_input("x", (1, 4, 8, 8))
    for name, src in (("conv0", "x"), ("conv1", "conv0")):
        b.add_op(name, OpKind.CONV, "conv", [src], (1, 4, 8, 8), kernel=(3, 3),
                 padding=(1, 1, 1, 1), weight_elems=148, macs=256 * 36)
    path = tmp_path / "chain.json"
    path.write_text(b.build(["conv1"]).to_json())
    for scheme in ("lbl", "lbdf", "brr"):
        code, _, err = cli("simulate", str(path), "--buffer", "64", "--scheme", scheme)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "group 0 (conv0, 1 ops) cannot run: 'conv0' cannot run layer by layer: its " \
               "smallest tile (1 output row of 1 output channel and 1 input channel) needs " \
               "66 B > buffer 64 B" in err
    code, out, _ = cli("simulate", str(path), "--buffer", "128", "--format", "json")
    assert code == 0 and '"peak_buffer_bytes": 106' in out


def test_a_layer_by_layer_group_of_several_ops_is_refused():
    graph = load_zoo("squeezenet1_1", (1, 3, 64, 64))
    plan = PartitionPlan.of([[0, 1]] + [[o] for o in range(2, len(graph))])
    with pytest.raises(Exception, match="layer-by-layer runs one op per group"):
        simulate(graph, plan, hw(1 << 20), "lbl")
