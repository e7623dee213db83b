"""Speed of the partition search (issue [search] goals; prints figures, asserts none).

Goals: a 2,000-plan local search on MobileNetV2, LBDF, 128 KiB, random repair, in <= 10 s; a
5,000-plan NSGA-II on EfficientNet-B3, LBDF, 256 KiB, in <= 60 s. Times cover `run_search`
(context, search, re-costing the best plan) on a cold cost cache; loading the network and the
reference baselines are timed separately.

    python benchmarks/search_speed.py [--seed 0] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from search import SearchProblem, make_algorithm, reference_baselines, run_search
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo

CASES = (
    ("mobilenet_v2", "lbdf", "128KiB", "ls", 2000, 10.0),
    ("efficientnet_b3", "lbdf", "256KiB", "nsga2", 5000, 60.0),
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scale", type=float, default=1.0, help="multiply the budgets")
    args = p.parse_args()
    for model, scheme, buffer, algo, budget, goal in CASES:
        budget = max(1, round(budget * args.scale))
        t = time.perf_counter()
        graph = load_zoo(model)
        load_s = time.perf_counter() - t
        hw = load_hw("edge-npu", {"buffer": buffer})
        t = time.perf_counter()
        result = run_search(SearchProblem(graph, hw, scheme), make_algorithm(algo), budget,
                            np.random.default_rng(args.seed))
        search_s = time.perf_counter() - t
        t = time.perf_counter()
        refs = reference_baselines(graph, hw, scheme)
        base_s = time.perf_counter() - t
        caches = result.summary.caches
        print(f"{model} {scheme} {buffer} {algo} {budget:,} plans: {search_s:.2f} s "
              f"(goal <= {goal:g} s, {budget / search_s:,.0f} plans/s); load {load_s:.2f} s, "
              f"baselines {base_s:.2f} s")
        print(f"  best DRAM {result.cost.dram_bytes:,} B (fuseable "
              f"{result.cost.dram_bytes_fuseable:,} B); segment DP "
              f"{refs['segment_dp'].dram_bytes:,} B; hit rates: groups "
              f"{caches['group'].hit_rate:.3f}, splits {caches['splitter'].hit_rate:.3f}, "
              f"plans {caches['plan'].hit_rate:.3f}")


if __name__ == "__main__":
    main()
