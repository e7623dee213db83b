"""Speed of the explanation-guided repairs (issue [speed], part 4; prints figures, asserts none).

Random search with a GET repair on ResNet-50, BRR, 128 KiB (the defaults), through `optimize`
as ``fusion-dse optimize resnet50 --scheme brr --buffer 128KiB --search rs --repair R --seed S
--no-optimum`` runs it: the graph stages, the search, the baselines. For every repair and seed
it prints plans per second of the search, the run's wall and CPU seconds, the search's best
DRAM and the splitter's figures; then the mean best DRAM over the seeds.

``--legacy`` adds ``gnne-legacy``: GNNExplainer as it ran before batching (PyG's
`GNNExplainer`, one group at a time, each mask seeded from the search's generator, nothing
explained ahead or reused), for before/after figures on the same machine in the same run. It
takes about an hour per seed at 2,000 plans on a 2-core machine; ``--budget 100`` shows the
ratio in a few minutes.

    python benchmarks/get_repair_speed.py [--budget 2000] [--seeds 0,1,2]
        [--repairs gnne,pg,rg] [--legacy] [--model resnet50] [--scheme brr] [--buffer 128KiB]
"""

from __future__ import annotations

import argparse
import statistics
import time

from fusion_dse.optimization import optimize
from search.registry import EXPLAINERS, REPAIRS, Strategy

LEGACY = "gnne-legacy"


def _register_legacy() -> None:
    if LEGACY not in EXPLAINERS:
        EXPLAINERS.register(Strategy(LEGACY, "explain.explainers:GnnExplainerGET",
                                     "GNNExplainer before batching", defaults=(("legacy", True),)))
    if LEGACY not in REPAIRS:
        REPAIRS.register(Strategy(LEGACY, "explain.tree_split:guided_splitter",
                                  "Algorithm 1 over GNNExplainer before batching",
                                  defaults=(("explainer", LEGACY),)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=2000)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--repairs", default="gnne,pg,rg")
    p.add_argument("--legacy", action="store_true", help="also run gnne-legacy (slow)")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--scheme", default="brr")
    p.add_argument("--buffer", default="128KiB")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    repairs = [r for r in args.repairs.split(",") if r]
    if args.legacy:
        _register_legacy()
        repairs.append(LEGACY)
    print(f"{args.model} {args.scheme} {args.buffer}, random search, {args.budget:,} plans, "
          f"seeds {args.seeds}")
    for repair in repairs:
        drams = []
        for seed in seeds:
            wall, cpu = time.perf_counter(), time.process_time()
            result = optimize(args.model, scheme=args.scheme, search="rs", repair=repair,
                              budget=args.budget, seed=seed, overrides={"buffer": args.buffer},
                              compute_optimum=False)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            doc = result.summary.to_dict()
            best = (doc.get("search_best") or doc["best"])["dram_bytes"]
            drams.append(best)
            s = doc.get("splitter") or {}
            own = ", ".join(f"{k} {s[k]:,}" for k in ("masks_optimised", "mask_batches",
                                                       "masks_reused") if k in s)
            print(f"  {repair:12s} seed {seed}: {args.budget / doc['seconds']:7.1f} plans/s "
                  f"(search {doc['seconds']:.1f} s); run {wall:.1f} s wall, {cpu:.1f} s CPU; "
                  f"best DRAM {best:,} B; {s.get('requests', 0):,} groups split, "
                  f"{s.get('explanations', 0):,} explanations, explainer "
                  f"{s.get('explain_seconds', 0.0):.1f} s{'; ' + own if own else ''}")
        print(f"  {repair:12s} mean best DRAM over seeds {args.seeds}: "
              f"{statistics.mean(drams):,.0f} B")


if __name__ == "__main__":
    main()
