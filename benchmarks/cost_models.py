"""Speed of the analytic cost models (issue [cost-models] goals; prints figures, asserts none).

Goals: uncached F_beta + F_D of groups of <= 30 ops >= 2,000 groups/s; an uncached whole
EfficientNet-B3 plan evaluation >= 100 plans/s; a cached group lookup < 5 us.

    python benchmarks/cost_models.py [--groups 2000] [--plans 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import time

from simulator.cost import CostCache, brr, evaluate_plan, lbdf
from simulator.hw import load_hw
from simulator.partition import components
from simulator.plan import PartitionPlan, segment_plan
from simulator.workload.loader import load_zoo


def random_segment_plan(graph, rng: random.Random, max_len: int = 12) -> PartitionPlan:
    """Contiguous segments of the topological order split into connected components."""
    cuts, at = [], 0
    while at < len(graph):
        at += rng.randint(1, max_len)
        cuts.append(at)
    return segment_plan(graph, cuts)


def random_groups(graph, rng: random.Random, n: int, max_ops: int = 30) -> list[tuple[int, ...]]:
    groups = []
    while len(groups) < n:
        start = rng.randrange(len(graph))
        comp = components(
            graph, range(start, min(len(graph), start + rng.randint(1, max_ops))))
        groups.append(tuple(sorted(max(comp, key=len))))
    return groups


def groups_per_second(fn, graph, groups, hw) -> float:
    t = time.perf_counter()
    for g in groups:
        fn(graph, g, hw)
    return len(groups) / (time.perf_counter() - t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groups", type=int, default=2000)
    p.add_argument("--plans", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = random.Random(args.seed)
    hw = load_hw("edge-npu", {"buffer": "256KiB"})
    for name in ("mobilenet_v2", "resnet50", "efficientnet_b3"):
        graph = load_zoo(name)
        groups = random_groups(graph, rng, args.groups)
        mean = sum(map(len, groups)) / len(groups)
        for scheme, fn in (("lbdf", lbdf.group_cost), ("brr", brr.group_cost)):
            rate = groups_per_second(fn, graph, groups, hw)
            print(f"{name:16s} {scheme}: uncached group cost {rate:8,.0f} groups/s "
                  f"({len(groups)} groups of 1..30 ops, mean {mean:.1f})")
    graph = load_zoo("efficientnet_b3")
    plans = [random_segment_plan(graph, rng) for _ in range(args.plans)]
    for scheme in ("lbdf", "brr"):
        t = time.perf_counter()
        for plan in plans:
            evaluate_plan(graph, plan, hw, scheme, CostCache(graph, hw, scheme))
        rate = len(plans) / (time.perf_counter() - t)
        print(f"efficientnet_b3  {scheme}: uncached whole-plan evaluation {rate:8,.1f} plans/s "
              f"(mean {sum(map(len, plans)) / len(plans):.0f} groups)")
    cache = CostCache(graph, hw, "lbdf")
    keys = [g.ops for g in plans[0].groups]
    for k in keys:
        cache.group(k)
    t = time.perf_counter()
    reps = 200
    for _ in range(reps):
        for k in keys:
            cache.group(k)
    per = (time.perf_counter() - t) / (reps * len(keys)) * 1e6
    print(f"cached group lookup: {per:.2f} us (hit rate {cache.hit_rate:.3f})")


if __name__ == "__main__":
    main()
