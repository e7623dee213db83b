"""The OCGGS substitution searches compared (issue [graph-stages], item 3; prints, asserts only
that the shared group-cost memo gave the exact segment-DP cost).

For each network and search: `search.substitution.search.substitute` over every rule of
`search.substitution.rules.RULES`, the cost of a graph being the DRAM (bytes, whole network)
of its optimal segment plan (`search.baselines.segment_dp(...).dram_bytes`) on the edge-npu
preset with the buffer overridden, each search on a cold cost cache; the final graph's cost is
recomputed with a plain `CostCache` and must agree. Columns: DRAM of the input and of the
result, the gain, rewrites applied, distinct graphs costed, sequences examined, seconds, and
whether the limit on graphs (or time) stopped the search.

    python benchmarks/substitution.py [--models mobilenet_v2,...] [--algorithms sampling,...]
        [--scheme lbdf] [--buffer 128KiB] [--max-graphs 200] [--time-limit S]
        [--max-length 10] [--seed 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

from search.baselines import segment_dp
from search.substitution.base import RuleContext
from search.substitution.cost import GraphCost
from search.substitution.rules import RULES
from search.substitution.search import ALGORITHMS, substitute
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo

MODELS = ("mobilenet_v2", "squeezenet1_0", "resnet50", "efficientnet_b0")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--algorithms", default=",".join(ALGORITHMS))
    p.add_argument("--scheme", default="lbdf")
    p.add_argument("--buffer", default="128KiB")
    p.add_argument("--max-graphs", type=int, default=200)
    p.add_argument("--time-limit", type=float, default=None)
    p.add_argument("--max-length", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the rows to this file")
    args = p.parse_args()
    hw = load_hw("edge-npu", {"buffer": args.buffer})
    rules = list(RULES.values())
    print(f"rules ({len(rules)}): {', '.join(RULES)}")
    print(f"{args.scheme}, buffer {args.buffer}, K = {args.max_length}, limit "
          f"{args.max_graphs} graphs" + (f" / {args.time_limit:g} s" if args.time_limit else ""))
    header = (f"{'model':<16}{'ops':>5} {'search':<9}{'DRAM before':>14}{'DRAM after':>14}"
              f"{'gain':>8}{'rewrites':>9}{'graphs':>8}{'seqs':>7}{'seconds':>9}  limited")
    print(header)
    rows = []
    for model in args.models.split(","):
        graph = load_zoo(model)
        matches = sum(len(r.find(graph, RuleContext(hw, args.scheme))) for r in rules)
        for algorithm in args.algorithms.split(","):
            opts = {"max_graphs": args.max_graphs, "time_limit": args.time_limit}
            if algorithm != "greedy":
                opts["max_length"] = args.max_length
            cost = GraphCost(hw, args.scheme)  # cold caches for every search
            started = time.perf_counter()
            r = substitute(graph, rules, RuleContext(hw, args.scheme), cost,
                           algorithm=algorithm, seed=args.seed, **opts)
            seconds = time.perf_counter() - started
            check = segment_dp(r.graph, CostCache(r.graph, hw, args.scheme)).dram_bytes
            assert check == r.cost_after, (model, algorithm, check, r.cost_after)
            print(f"{model:<16}{len(graph):>5} {algorithm:<9}{r.cost_before:>14,.0f}"
                  f"{r.cost_after:>14,.0f}{r.gain:>8.2%}{len(r.matches):>9}"
                  f"{r.graphs_costed:>8}{r.sequences:>7}{seconds:>9.1f}  "
                  f"{'yes' if r.limited else 'no'}", flush=True)
            rows.append({"model": model, "ops": len(graph), "matches_at_start": matches,
                         "seconds": round(seconds, 2),
                         "rewrites_applied": [str(m) for m in r.matches], **r.report()})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scheme": args.scheme, "buffer": args.buffer, "rules": list(RULES),
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
