"""Reproduce the setups of Mills et al. Tables II-IV with the random repair (no GET).

ResNet-18, ResNet-50, MobileNetV2, VGG16 and SqueezeNet 1.0 at 128 KiB under LBDF and BRR with
a 2,000-plan budget (Tables III-IV), EfficientNet-B3 and ResNet-152 at 256 KiB under LBDF with
5,000 plans (Table II). For each setup: DRAM of random search, local search and NSGA-II (mean
over seeds), the optimum (`search.exact`, which the paper does not have), the DNNFusion greedy
plan, the optimal segment plan, layer by layer and the compulsory lower bound, in the paper's
scope (fuseable ops) and for the whole network; and every plan's gap to the optimum.

    python experiments/paper_tables.py [--seeds 3] [--out DIR] [--only resnet18,vgg16]
                                       [--budget-scale 1.0] [--exact-time-limit 120]

Writes DIR/paper_tables.csv (one row per setup, method and seed; the optimum row says whether
it is proven, ``optimal``) and DIR/paper_tables.md. An optimum a time cap cut is marked with a
dagger: it is then the best plan among the sets the solver costed, not the optimum.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from search import SearchProblem, make_algorithm, reference_baselines, run_search
from search.exact import optimum
from simulator.cost import CostCache, evaluate_plan
from simulator.hw import load_hw
from simulator.scheme import FUSED_SCHEMES, Scheme
from simulator.workload.loader import load_zoo

ALGORITHMS = ("rs", "ls", "nsga2")
BASELINES = ("greedy", "segment_dp", "lbl", "lower_bound")
COLUMNS = ("RS", "LS", "NSGA-II", "optimum", "greedy", "segment DP", "LBL", "lower bound")
LABEL = dict(zip((*ALGORITHMS, "optimum", *BASELINES), COLUMNS, strict=True))
EXACT_TIME_LIMIT = 120.0
"""Seconds the exact solver may take per setup (all 13 x 6 LBDF benchmark instances finish
in less, docs/exact.md)."""


@dataclass(frozen=True)
class Setup:
    """One row of the paper's tables."""

    model: str
    scheme: Scheme
    buffer_kib: int
    budget: int


SETUPS = tuple(
    [Setup(m, s, 128, 2000) for s in FUSED_SCHEMES
     for m in ("resnet18", "resnet50", "mobilenet_v2", "vgg16", "squeezenet1_0")]
    + [Setup(m, Scheme.LBDF, 256, 5000) for m in ("efficientnet_b3", "resnet152")]
)


def optimum_row(graph, hw, scheme: Scheme, time_limit: float | None) -> dict:
    """The optimum's figures (`search.exact.optimum`), ``optimal`` False when capped."""
    cache = CostCache(graph, hw, scheme)
    exact = optimum(graph, cache, time_limit=time_limit)
    cost = evaluate_plan(graph, exact.plan, hw, scheme, cache)
    return {"method": "optimum", "seed": None, "dram_bytes": cost.dram_bytes,
            "dram_bytes_fuseable": cost.dram_bytes_fuseable, "mbu_bytes": cost.mbu,
            "seconds": round(exact.seconds, 2), "optimal": exact.optimal}


def run_setup(setup: Setup, seeds: int, budget_scale: float,
              exact_time_limit: float | None = EXACT_TIME_LIMIT) -> list[dict]:
    """Rows (method, seed, DRAM, MBU, seconds) of one setup, the optimum's included."""
    graph = load_zoo(setup.model)
    hw = load_hw("edge-npu", {"buffer": setup.buffer_kib * 1024})
    budget = max(1, round(setup.budget * budget_scale))
    base = {"model": setup.model, "scheme": setup.scheme, "buffer_kib": setup.buffer_kib,
            "budget": budget}
    rows = []
    for algo in ALGORITHMS:
        for seed in range(seeds):
            started = time.perf_counter()
            result = run_search(SearchProblem(graph, hw, setup.scheme), make_algorithm(algo),
                                budget, np.random.default_rng(seed))
            rows.append({**base, "method": algo, "seed": seed,
                         "dram_bytes": result.cost.dram_bytes,
                         "dram_bytes_fuseable": result.cost.dram_bytes_fuseable,
                         "mbu_bytes": result.cost.mbu,
                         "seconds": round(time.perf_counter() - started, 2)})
    rows.append({**base, **optimum_row(graph, hw, setup.scheme, exact_time_limit)})
    started = time.perf_counter()
    refs = reference_baselines(graph, hw, setup.scheme, CostCache(graph, hw, setup.scheme))
    seconds = round(time.perf_counter() - started, 2)
    for name in BASELINES:
        b = refs[name]
        rows.append({**base, "method": name, "seed": None, "dram_bytes": b.dram_bytes,
                     "dram_bytes_fuseable": b.dram_bytes_fuseable, "mbu_bytes": b.mbu_bytes,
                     "seconds": seconds})
    return rows


_SETUP = ["model", "scheme", "buffer_kib", "budget"]


def _capped(table: pd.DataFrame) -> set[tuple]:
    """Setups whose optimum a time cap cut."""
    if "optimal" not in table.columns:
        return set()
    rows = table[(table["method"] == "optimum") & (table["optimal"] == False)]  # noqa: E712
    return {tuple(r) for r in rows[_SETUP].itertuples(index=False)}


def markdown(table: pd.DataFrame, column: str) -> str:
    """One line per setup, one column per method: mean DRAM in MB (10^6 bytes); a capped
    optimum carries a dagger."""
    mean = table.groupby([*_SETUP, "method"], sort=False)[column].mean().unstack("method")
    mean = mean[[m for m in LABEL if m in mean.columns]].rename(columns=LABEL)
    capped = _capped(table)
    lines = ["| network | scheme | buffer | budget | " + " | ".join(mean.columns) + " |",
             "|---|---|---|---|" + "---:|" * len(mean.columns)]
    for key, row in mean.iterrows():
        model, scheme, kib, budget = key
        cells = " | ".join(f"{v / 1e6:.3f}" + ("†" if name == "optimum" and key in capped
                                              else "") for name, v in row.items())
        lines.append(f"| {model} | {scheme.upper()} | {kib} KiB | {budget:,} | {cells} |")
    return "\n".join(lines)


def gap_markdown(table: pd.DataFrame, column: str) -> str:
    """One line per setup, one column per plan: mean % of `column` above the optimum."""
    opt = table[table["method"] == "optimum"].set_index(_SETUP)[column]
    plans = table[~table["method"].isin(["optimum", "lower_bound"])]
    mean = plans.groupby([*_SETUP, "method"], sort=False)[column].mean().unstack("method")
    gap = 100 * (mean.div(opt.reindex(mean.index), axis=0) - 1)
    gap = gap[[m for m in LABEL if m in gap.columns]].rename(columns=LABEL)
    capped = _capped(table)
    lines = ["| network | scheme | buffer | budget | " + " | ".join(gap.columns) + " |",
             "|---|---|---|---|" + "---:|" * len(gap.columns)]
    for key, row in gap.iterrows():
        model, scheme, kib, budget = key
        mark = "†" if key in capped else ""
        cells = " | ".join(f"{v:+.1f}%" for v in row)
        lines.append(f"| {model} | {scheme.upper()}{mark} | {kib} KiB | {budget:,} | {cells} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=1, help="seeds per search (default 1)")
    p.add_argument("--out", default="fusion-dse-out/paper-tables", help="output folder")
    p.add_argument("--only", default="", help="comma-separated networks to run")
    p.add_argument("--budget-scale", type=float, default=1.0, help="multiply every budget")
    p.add_argument("--exact-time-limit", type=float, default=EXACT_TIME_LIMIT,
                   help=f"seconds the exact solver may take per setup (default "
                        f"{EXACT_TIME_LIMIT:g})")
    args = p.parse_args()
    wanted = {m.strip() for m in args.only.split(",") if m.strip()}
    rows = []
    for setup in SETUPS:
        if wanted and setup.model not in wanted:
            continue
        started = time.perf_counter()
        rows += run_setup(setup, args.seeds, args.budget_scale, args.exact_time_limit)
        print(f"{setup.model:16s} {setup.scheme:4s} {setup.buffer_kib} KiB: "
              f"{time.perf_counter() - started:.1f} s", flush=True)
    table = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "paper_tables.csv", index=False)
    text = (f"DRAM access in MB of the fuseable ops (the paper's scope), mean of {args.seeds} "
            f"seed(s), random repair\n\n{markdown(table, 'dram_bytes_fuseable')}\n\n"
            f"DRAM access in MB, whole network\n\n{markdown(table, 'dram_bytes')}\n\n"
            f"Fuseable-op DRAM above the optimum (mean over seeds; † capped optimum)\n\n"
            f"{gap_markdown(table, 'dram_bytes_fuseable')}\n")
    (out / "paper_tables.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
