"""Reproduce the GET experiments: Table V (rectify rate and search time per explainer) and a
Table III/IV-style comparison of repairs (LS and RS with random, alledges, GNNE, PG and RG
repair on MobileNetV2, ResNet-18, ResNet-50, VGG16 and SqueezeNet at 128 KiB, LBDF and BRR).

    python experiments/get_tables.py [--table v|repairs|both] [--budget 2000] [--seeds 0]
                                     [--out experiments/results]

Writes CSV and markdown next to each other; numbers are measured on this machine with this
project's cost models (not the paper's).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from explain.stats import markdown_table
from fusion_dse.optimization import optimize
from simulator.errors import InputError

TABLE_V = [("ls", r) for r in ("gnne", "pg", "rg")] + [("rs", r) for r in ("gnne", "pg", "rg")]
NETWORKS = ("mobilenet_v2", "resnet18", "resnet50", "vgg16", "squeezenet1_0")
REPAIRS = ("random", "alledges", "gnne", "pg", "rg")


def run(model: str, scheme: str, search: str, repair: str, budget: int, seed: int) -> dict:
    start = time.perf_counter()
    r = optimize(model, scheme=scheme, search=search, repair=repair, budget=budget, seed=seed,
                 overrides={"buffer": "128KiB"})
    s = r.summary
    row = {"network": model, "scheme": scheme, "search": search, "repair": repair,
           "seed": seed, "budget": budget, "dram_fuseable_mb": r.cost.dram_bytes_fuseable / 1e6,
           "mbu_kib": r.cost.mbu / 1024, "seconds": round(time.perf_counter() - start, 1)}
    if "splitter" in s:
        row.update(rectify_rate=s["splitter"]["rectify_rate"],
                   invalid_groups=s["splitter"]["requests"],
                   explainer_seconds=round(s["splitter"]["explain_seconds"], 1),
                   fallbacks=s["splitter"]["fallbacks"],
                   fbeta_queries=s["splitter"]["fbeta_queries"],
                   fd_queries=s["splitter"]["fd_queries"])
    return row


def collect(runs, out: Path, stem: str) -> pd.DataFrame:
    """Run each configuration, rewriting the CSV and markdown after every row (nothing
    computed is lost if a later run fails); unsupported combinations are skipped."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for args in runs:
        try:
            rows.append(run(*args))
        except InputError as err:
            print(f"skipped {args}: {err}", flush=True)
            continue
        df = pd.DataFrame(rows)
        df.to_csv(out / f"{stem}.csv", index=False)
        (out / f"{stem}.md").write_text(markdown_table(df.round(3)) + "\n")
        print(" ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    return pd.DataFrame(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", choices=("v", "repairs", "both"), default="both")
    p.add_argument("--budget", type=int, default=2000)
    p.add_argument("--seeds", default="0", help="comma-separated seeds")
    p.add_argument("--repairs", default=",".join(REPAIRS))
    p.add_argument("--schemes", default="lbdf,brr")
    p.add_argument("--out", default="experiments/results")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out)
    if args.table in ("v", "both"):
        collect([("mobilenet_v2", "lbdf", search, repair, args.budget, seed)
                 for search, repair in TABLE_V for seed in seeds
                 if repair in args.repairs.split(",")], out, "table_v")
    if args.table in ("repairs", "both"):
        collect([(n, scheme, search, repair, args.budget, seed)
                 for scheme in args.schemes.split(",") for n in NETWORKS
                 for search in ("ls", "rs") for repair in args.repairs.split(",")
                 for seed in seeds], out, "repairs")


if __name__ == "__main__":
    main()
