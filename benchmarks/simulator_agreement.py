"""Simulator vs analytic models across the zoo, and simulator speed (prints figures).

For every CNN zoo network, LBDF and BRR (BRR only where it applies) at 256 KiB and 2 MiB: a valid
fused plan (segments grown while they fit) and the layer-by-layer plan are simulated; printed:
DRAM mismatch (bytes), worst peak-occupancy deviation from F_beta (bytes and relative), and the
range of analytic/simulated cycles. Speed: simulated events/s, and a whole ResNet-50 LBDF plan.

    python benchmarks/simulator.py [--networks resnet18,mobilenet_v2] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import time

from simulator.cost import CostCache, evaluate_plan
from simulator.engine import simulate
from simulator.hw import load_hw
from simulator.plan import layer_by_layer, segment_plan
from simulator.workload.loader import load_zoo
from simulator.workload.zoo import CNN, zoo_names


def fitting_segments(graph, cache, rng, longest=10):
    unfusable = set(cache.unfusable)
    cuts, start = [], 0
    while start < len(graph):
        end, limit = start + 1, min(len(graph), start + rng.randint(1, longest))
        while end < limit:
            groups = [g.ops for g in segment_plan(graph, [start, end + 1])
                      if start <= g.ops[0] <= end]
            if any(len(g) > 1 and unfusable & set(g) for g in groups) or not all(
                    cache.group(g).fits or g[0] in unfusable for g in groups):
                break
            end += 1
        cuts.append(end)
        start = end
    return segment_plan(graph, cuts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--networks", default=",".join(zoo_names(CNN)))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = random.Random(args.seed)
    worst_dram, worst_peak, worst_rel, ratios = 0, 0, 0.0, []
    events, seconds = 0, 0.0
    for name in args.networks.split(","):
        graph = load_zoo(name)
        for scheme in ("lbdf", "brr"):
            for buffer in ("256KiB", "2MiB"):
                hw = load_hw("edge-npu", {"buffer": buffer})
                cache = CostCache(graph, hw, scheme)
                plan = fitting_segments(graph, cache, rng)
                for label, pl in (("fused", plan), ("lbl", layer_by_layer(graph))):
                    analytic = evaluate_plan(graph, pl, hw, scheme, cache)
                    if not analytic.valid:
                        print(f"{name:30s} {scheme} {buffer:6s} {label}: skipped "
                              f"({analytic.violations[0][:60]})")
                        continue
                    t = time.perf_counter()
                    rep = simulate(graph, pl, hw, scheme, record=False)
                    seconds += time.perf_counter() - t
                    events += rep.events
                    dram = abs(rep.dram_bytes - analytic.dram_bytes)
                    dev = [(g.peak_buffer_bytes - analytic.groups[g.index].buffer_bytes,
                            g.peak_buffer_bytes / analytic.groups[g.index].buffer_bytes)
                           for g in rep.groups]
                    peak = max(abs(d) for d, _ in dev)
                    rel = max(abs(1 - r) for _, r in dev)
                    ratio = analytic.cycles / rep.cycles
                    worst_dram, worst_peak = max(worst_dram, dram), max(worst_peak, peak)
                    worst_rel = max(worst_rel, rel)
                    ratios.append(ratio)
                    print(f"{name:30s} {scheme} {buffer:6s} {label:5s} {len(pl):4d} groups: "
                          f"DRAM diff {dram} B, worst peak diff {peak} B ({rel:.2%}), "
                          f"analytic/sim cycles {ratio:.3f}")
    print(f"\nworst DRAM mismatch {worst_dram} B; worst peak deviation {worst_peak} B "
          f"({worst_rel:.2%}); analytic/simulated cycles in [{min(ratios):.3f}, "
          f"{max(ratios):.3f}] over {len(ratios)} runs")
    print(f"speed: {events:,} events in {seconds:.1f} s = {events / seconds:,.0f} events/s")
    graph = load_zoo("resnet50")
    hw = load_hw("edge-npu", {"buffer": "2MiB"})
    cache = CostCache(graph, hw, "lbdf")
    for label, pl in (("layer-by-layer", layer_by_layer(graph)),
                      ("fused", fitting_segments(graph, cache, random.Random(1)))):
        t = time.perf_counter()
        rep = simulate(graph, pl, hw, "lbdf")
        dt = time.perf_counter() - t
        print(f"resnet50 LBDF 2 MiB {label} plan ({len(pl)} groups): {dt:.2f} s, "
              f"{rep.events:,} events, {rep.events / dt:,.0f} events/s (recording on)")


if __name__ == "__main__":
    main()
