"""The simulator never holds more than the buffer, on the whole zoo (issue 15; prints figures,
asserts none).

For every CNN zoo network at 64 KiB, 128 KiB, 256 KiB and 2 MiB, under LBDF and BRR, two plans
(the layer-by-layer plan and the segment-DP plan of `search.baselines.segment_dp`) are costed
and simulated. Each row prints the simulated peak next to the buffer, the largest gap between
a group's simulated peak and its analytic F_beta, the analytic and the simulated DRAM, and how
many groups ran as tiled layers (ops on their own that do not stream their rows). The summary
line gives the highest peak / buffer ratio (never above 1) and the worst mismatches.

    python benchmarks/simulator_capacity.py [--networks vgg16,resnet18] [--plans lbl,dp]
                                            [--buffers 64KiB,128KiB] [--schemes lbdf,brr]
"""

from __future__ import annotations

import argparse
import time

from search.baselines import segment_dp
from simulator.cost import CostCache, evaluate_plan
from simulator.engine import SimulationError, simulate
from simulator.hw import format_size, load_hw
from simulator.plan import layer_by_layer
from simulator.workload.loader import load_zoo
from simulator.workload.zoo import CNN, zoo_names

STREAMED = "rows streamed (fits as a single-op LBDF group)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--networks", default=",".join(zoo_names(CNN)))
    p.add_argument("--buffers", default="64KiB,128KiB,256KiB,2MiB")
    p.add_argument("--schemes", default="lbdf,brr")
    p.add_argument("--plans", default="lbl,dp")
    p.add_argument("--hw", default="edge-npu")
    args = p.parse_args()
    worst_ratio, worst_peak_gap, worst_dram_gap, runs, refused = 0.0, 0, 0, 0, []
    start = time.perf_counter()
    print(f"{'network':29s} {'buffer':>8s} {'scheme':6s} {'plan':4s} {'groups':>6s} "
          f"{'tiled':>5s} {'sim peak':>11s} {'peak/buf':>8s} {'|peak-Fb|':>9s} "
          f"{'analytic DRAM':>14s} {'sim DRAM':>14s} {'s':>6s}")
    for name in args.networks.split(","):
        graph = load_zoo(name)
        for size in args.buffers.split(","):
            hw = load_hw(args.hw, {"buffer": size})
            for scheme in args.schemes.split(","):
                cache = CostCache(graph, hw, scheme)
                for kind in args.plans.split(","):
                    t0 = time.perf_counter()
                    plan = layer_by_layer(graph) if kind == "lbl" else \
                        segment_dp(graph, cache).plan
                    analytic = evaluate_plan(graph, plan, hw, scheme, cache)
                    try:
                        rep = simulate(graph, plan, hw, scheme, record=False, cache=cache)
                    except SimulationError as err:
                        refused.append(f"{name} {size} {scheme} {kind}: {err}")
                        print(f"{name:29s} {size:>8s} {scheme:6s} {kind:4s} refused: {err}")
                        continue
                    runs += 1
                    gap = max(abs(g.peak_buffer_bytes - analytic.groups[g.index].buffer_bytes)
                              for g in rep.groups)
                    tiled = sum(g.tiling not in ("", STREAMED) for g in rep.groups)
                    ratio = rep.peak_buffer_bytes / hw.buffer_bytes
                    dram_gap = abs(rep.dram_bytes - analytic.dram_bytes)
                    worst_ratio = max(worst_ratio, ratio)
                    worst_peak_gap = max(worst_peak_gap, gap)
                    worst_dram_gap = max(worst_dram_gap, dram_gap)
                    print(f"{name:29s} {format_size(hw.buffer_bytes):>8s} {scheme:6s} "
                          f"{kind:4s} {len(plan):6d} {tiled:5d} {rep.peak_buffer_bytes:11,d} "
                          f"{ratio:8.3f} {gap:9,d} {analytic.dram_bytes:14,d} "
                          f"{rep.dram_bytes:14,d} {time.perf_counter() - t0:6.1f}",
                          flush=True)
    print(f"\n{runs} runs in {time.perf_counter() - start:.0f} s: highest peak / buffer "
          f"{worst_ratio:.4f}; worst |simulated peak - F_beta| {worst_peak_gap:,} B; worst "
          f"DRAM mismatch {worst_dram_gap:,} B; {len(refused)} refused")
    for line in refused:
        print("  refused:", line)


if __name__ == "__main__":
    main()
