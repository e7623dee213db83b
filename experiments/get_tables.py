"""Reproduce the GET experiments of Mills et al.: Table V (rectify rate and search time per
explainer), the Table III/IV comparison of repairs (local and random search with the random,
alledges, GNNE, PG and RG repairs on MobileNetV2, ResNet-18, ResNet-50, VGG16 and SqueezeNet at
128 KiB, LBDF and BRR, 2,000 plans) and Table II (EfficientNet-B3, ResNet-152 and
DeepLabV3-MobileNetV3 at 256 KiB, LBDF, 5,000 plans, local search, NSGA-II and random search).

    python experiments/get_tables.py [--table v|repairs|large|all] [--seeds 0,1]
                                     [--repairs random,rg] [--pure] [--jobs 4]
                                     [--out experiments/results]

Every explanation-guided repair runs with the baseline guard (the default of `fusion-dse
optimize`); `--pure` adds a run of each without it (`--no-baseline-guard`: Algorithm 1 alone,
as in the paper), repair named ``<name>-pure``. `--jobs` runs configurations in parallel
processes (each single-threaded); the CSV and markdown are rewritten after every finished run,
so nothing computed is lost if a later one fails. Then

    python experiments/get_tables.py --report [--out experiments/results]

prints the comparison tables (DRAM in MB over fuseable ops per repair, and where a repair is
worse than the random repair for the same search, seed and budget) from the CSVs, and, for the
rows that carry the optimum (`search.exact`, computed with every run), how much of the gap
between the random repair and the optimum each repair closes (1: it finds the optimum, 0: no
better than the random repair, negative: worse).
Numbers are measured with this project's cost models, GNN and explainers, not the paper's.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from pathlib import Path

import pandas as pd

from search.registry import REPAIRS

TABLE_V = [(s, r) for s in ("ls", "rs") for r in ("gnne", "pg", "rg")]
NETWORKS = ("mobilenet_v2", "resnet18", "resnet50", "vgg16", "squeezenet1_0")
LARGE = ("efficientnet_b3", "resnet152", "deeplabv3_mobilenet_v3_large")
# expected relative cost of a run, to start the longest first when running in parallel (1 for
# a repair not listed)
_WEIGHT = {"gnne": 20, "pg": 3, "rg": 3, "alledges": 2, "random": 1}
EXACT_TIME_LIMIT = 120.0
"""Seconds the exact solver may take per run (its optimum is the reference of every row)."""


def run(model: str, scheme: str, search: str, repair: str, budget: int, seed: int,
        buffer: str, exact_time_limit: float = EXACT_TIME_LIMIT) -> dict:
    """One search; returns its row (DRAM over fuseable ops in MB, splitter counters, the
    optimum)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from fusion_dse.optimization import optimize

    name, pure = repair.removesuffix("-pure"), repair.endswith("-pure")
    start = time.perf_counter()
    r = optimize(model, scheme=scheme, search=search, repair=name, budget=budget, seed=seed,
                 overrides={"buffer": buffer}, keep_baseline=not pure,
                 exact_time_limit=exact_time_limit)
    s = r.summary
    best = s.optimum.baseline if s.optimum is not None else None
    row = {"network": model, "scheme": scheme, "buffer": buffer, "search": search,
           "repair": repair, "seed": seed, "budget": budget,
           "dram_fuseable_mb": r.cost.dram_bytes_fuseable / 1e6,
           "dram_mb": r.cost.dram_bytes / 1e6, "mbu_kib": r.cost.mbu / 1024,
           "seconds": round(time.perf_counter() - start, 1),
           "distinct_plans": s.distinct_plans,
           "diversified_repairs": s.diversified_repairs,
           "optimum_fuseable_mb": None if best is None else best.dram_bytes_fuseable / 1e6,
           "optimum_mb": None if best is None else best.dram_bytes / 1e6,
           "optimum_proven": s.optimum is not None and s.optimum.optimal}
    if s.splitter is not None:
        sp = s.splitter
        row.update(rectify_rate=sp["rectify_rate"], invalid_groups=sp["requests"],
                   explainer_seconds=round(sp["explain_seconds"], 1),
                   fallbacks=sp["fallbacks"], baseline_kept=sp["baseline_kept"],
                   fbeta_queries=sp["fbeta_queries"], fd_queries=sp["fd_queries"])
    return row


def _write(rows: list[dict], out: Path, stem: str) -> None:
    from explain.stats import markdown_table

    df = pd.DataFrame(rows)
    df.to_csv(out / f"{stem}.csv", index=False)
    (out / f"{stem}.md").write_text(markdown_table(df.round(3)) + "\n")


KEY = ("network", "scheme", "search", "repair", "budget", "seed", "buffer")
"""A run's identity; `run`'s arguments in this order."""


def _kept_rows(path: Path, runs: list[tuple]) -> list[dict]:
    """Rows of an earlier CSV whose configurations are not about to be run again."""
    if not path.is_file():
        return []
    again = {tuple(str(v) for v in args) for args in runs}
    old = pd.read_csv(path).to_dict("records")
    return [r for r in old if tuple(str(r[k]) for k in KEY) not in again]


def collect(runs: list[tuple], out: Path, stem: str, jobs: int = 1,
            exact_time_limit: float = EXACT_TIME_LIMIT) -> pd.DataFrame:
    """Run each configuration (in `jobs` processes), rewriting the CSV and markdown after
    every finished run; rows of configurations not run again are kept; unsupported
    combinations are reported and skipped."""
    from simulator.errors import InputError

    one = partial(run, exact_time_limit=exact_time_limit)

    out.mkdir(parents=True, exist_ok=True)
    rows = _kept_rows(out / f"{stem}.csv", runs)

    def done(args: tuple, row: dict | None, err: Exception | None) -> None:
        if err is not None:
            print(f"skipped {args}: {err}", flush=True)
            return
        rows.append(row)
        _write(rows, out, stem)
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)

    if jobs <= 1:
        for args in runs:
            try:
                done(args, one(*args), None)
            except InputError as err:
                done(args, None, err)
        return pd.DataFrame(rows)
    order = sorted(runs, key=lambda a: -_WEIGHT.get(a[3].removesuffix("-pure"), 1) * a[4])
    with ProcessPoolExecutor(jobs) as pool:
        futures = {pool.submit(one, *args): args for args in order}
        for fut in as_completed(futures):
            try:
                done(futures[fut], fut.result(), None)
            except InputError as err:
                done(futures[fut], None, err)
    return pd.DataFrame(rows)


def comparison(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(DRAM over fuseable ops per repair, one row per network/scheme/buffer/search/seed;
    the rows where a repair costs more than the random repair)."""
    keys = ["network", "scheme", "buffer", "search", "seed"]
    wide = df.pivot_table(index=keys, columns="repair", values="dram_fuseable_mb",
                          aggfunc="first").reset_index()
    repairs = [c for c in wide.columns if c not in keys and c != "random"]
    worse = []
    for _, row in wide.iterrows():
        for r in repairs:
            if pd.notna(row[r]) and pd.notna(row.get("random")) and row[r] > row["random"] + 1e-9:
                worse.append({**{k: row[k] for k in keys}, "repair": r,
                              "dram_fuseable_mb": row[r], "random": row["random"]})
    return wide, pd.DataFrame(worse)


def over_seeds(df: pd.DataFrame) -> pd.DataFrame:
    """Per setup and repair: seeds run, mean DRAM over fuseable ops, and against the random
    repair with the same seed the seeds it is better / equal / worse on."""
    keys = ["network", "scheme", "buffer", "search"]
    wide, _ = comparison(df)
    repairs = [c for c in wide.columns if c not in [*keys, "seed", "random"]]
    rows = []
    for setup, part in wide.groupby(keys):
        for r in repairs:
            both = part[[r, "random"]].dropna()
            if both.empty:
                continue
            diff = both[r] - both["random"]
            rows.append({**dict(zip(keys, setup, strict=True)), "repair": r, "seeds": len(both),
                         "mean_mb": both[r].mean(), "random_mean_mb": both["random"].mean(),
                         "better": int((diff < -1e-9).sum()),
                         "equal": int((diff.abs() <= 1e-9).sum()),
                         "worse": int((diff > 1e-9).sum())})
    return pd.DataFrame(rows)


def gap_closed(df: pd.DataFrame) -> pd.DataFrame:
    """Per setup and repair: the share of the gap between the random repair and the optimum
    (DRAM over fuseable ops) that the repair closes, (random - repair) / (random - optimum),
    mean over the seeds with a gap; the seeds with none (random found the optimum) are
    counted apart. Rows whose optimum a cap cut (``optimum_proven`` false) are left out."""
    if "optimum_fuseable_mb" not in df.columns:
        return pd.DataFrame()
    keys = ["network", "scheme", "buffer", "search", "seed"]
    proven = df[df["optimum_proven"].astype(str) == "True"]
    opt = proven.groupby(keys)["optimum_fuseable_mb"].first()
    wide, _ = comparison(proven)
    if wide.empty or "random" not in wide.columns:
        return pd.DataFrame()
    wide = wide.set_index(keys)
    gap = wide["random"] - opt.reindex(wide.index)
    rows = []
    for r in [c for c in wide.columns if c != "random"]:
        closed = ((wide["random"] - wide[r]) / gap).where(gap > 1e-9)
        part = pd.DataFrame({"closed": closed, "has": wide[r].notna(), "nogap": gap <= 1e-9})
        for setup, g in part[part["has"]].groupby(level=[0, 1, 2, 3]):
            rows.append({**dict(zip(keys[:4], setup, strict=True)), "repair": r,
                         "seeds": len(g), "gap_closed": g["closed"].mean(),
                         "seeds_without_gap": int(g["nogap"].sum())})
    return pd.DataFrame(rows)


def report(out: Path) -> None:
    """Print the comparison tables of every CSV found in `out`."""
    for stem in ("repairs", "large", "table_v"):
        path = out / f"{stem}.csv"
        if not path.is_file():
            continue
        df = pd.read_csv(path)
        if stem == "table_v":
            cols = ["search", "repair", "seed", "rectify_rate", "invalid_groups", "seconds",
                    "explainer_seconds", "dram_fuseable_mb"]
            print(f"## {stem}\n{df[[c for c in cols if c in df]].to_string(index=False)}\n")
            continue
        wide, worse = comparison(df)
        print(f"## {stem}\n{wide.round(3).to_string(index=False)}\n")
        print(f"worse than random: {len(worse)} of "
              f"{int(wide.drop(columns=['random']).iloc[:, 5:].notna().sum().sum())}")
        if len(worse):
            print(worse.round(3).to_string(index=False))
        if df["seed"].nunique() > 1:
            seeds = over_seeds(df)
            print(f"\nover seeds (mean; seeds better / equal / worse than random):\n"
                  f"{seeds.round(3).to_string(index=False)}")
            print(f"setups whose mean is worse than random's: "
                  f"{int((seeds['mean_mb'] > seeds['random_mean_mb'] + 1e-9).sum())} "
                  f"of {len(seeds)}")
        closed = gap_closed(df)
        if len(closed):
            print("\nshare of the gap between the random repair and the optimum closed "
                  f"(mean over seeds):\n{closed.round(3).to_string(index=False)}")
        print()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", choices=("v", "repairs", "large", "all"), default="all")
    p.add_argument("--budget", type=int, default=None,
                   help="plans per search (default: 2000; 5000 for the large table)")
    p.add_argument("--seeds", default="0", help="comma-separated seeds")
    p.add_argument("--repairs", default=",".join(REPAIRS.names()))
    p.add_argument("--schemes", default="lbdf,brr")
    p.add_argument("--networks", default=None, help="override the table's networks")
    p.add_argument("--searches", default=None, help="override the table's searches")
    p.add_argument("--pure", action="store_true",
                   help="also run each GET repair without the baseline guard")
    p.add_argument("--jobs", type=int, default=1, help="parallel processes (default: 1)")
    p.add_argument("--out", default="experiments/results")
    p.add_argument("--report", action="store_true", help="only print tables from the CSVs")
    p.add_argument("--exact-time-limit", type=float, default=EXACT_TIME_LIMIT,
                   help="seconds the exact solver may take per run (default: "
                        f"{EXACT_TIME_LIMIT:g}); a capped optimum is left out of the gaps")
    args = p.parse_args()
    out = Path(args.out)
    if args.report:
        report(out)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    repairs = args.repairs.split(",")
    if args.pure:
        repairs += [f"{r}-pure" for r in repairs if r != "random"]

    def chosen(default: tuple[str, ...], override: str | None) -> tuple[str, ...]:
        return tuple(override.split(",")) if override else default

    if args.table in ("v", "all"):
        collect([("mobilenet_v2", "lbdf", search, repair, args.budget or 2000, seed, "128KiB")
                 for search, repair in TABLE_V for seed in seeds
                 if repair in repairs and search in chosen(("ls", "rs"), args.searches)],
                out, "table_v", args.jobs, args.exact_time_limit)
    if args.table in ("repairs", "all"):
        collect([(n, scheme, search, repair, args.budget or 2000, seed, "128KiB")
                 for scheme in args.schemes.split(",")
                 for n in chosen(NETWORKS, args.networks)
                 for search in chosen(("ls", "rs"), args.searches)
                 for repair in repairs for seed in seeds], out, "repairs", args.jobs,
                args.exact_time_limit)
    if args.table in ("large", "all"):
        collect([(n, "lbdf", search, repair, args.budget or 5000, seed, "256KiB")
                 for n in chosen(LARGE, args.networks)
                 for search in chosen(("ls", "nsga2", "rs"), args.searches)
                 for repair in repairs for seed in seeds], out, "large", args.jobs,
                args.exact_time_limit)


if __name__ == "__main__":
    main()
