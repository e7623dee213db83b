"""Reproduce the setups of Mills et al. Tables II-IV with the random repair (no GET).

ResNet-18, ResNet-50, MobileNetV2, VGG16 and SqueezeNet 1.0 at 128 KiB under LBDF and BRR with
a 2,000-plan budget (Tables III-IV), EfficientNet-B3 and ResNet-152 at 256 KiB under LBDF with
5,000 plans (Table II). For each setup: DRAM of random search, local search and NSGA-II (mean
over seeds), the DNNFusion greedy plan, the optimal segment plan, layer by layer and the
compulsory lower bound, in the paper's scope (fuseable ops) and for the whole network.

    python experiments/paper_tables.py [--seeds 3] [--out DIR] [--only resnet18,vgg16]
                                       [--budget-scale 1.0]

Writes DIR/paper_tables.csv (one row per setup, method and seed) and DIR/paper_tables.md.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from search import SearchProblem, make_algorithm, reference_baselines, run_search
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.scheme import FUSED_SCHEMES, Scheme
from simulator.workload.loader import load_zoo

ALGORITHMS = ("rs", "ls", "nsga2")
BASELINES = ("greedy", "segment_dp", "lbl", "lower_bound")
COLUMNS = ("RS", "LS", "NSGA-II", "greedy", "segment DP", "LBL", "lower bound")
LABEL = dict(zip((*ALGORITHMS, *BASELINES), COLUMNS, strict=True))


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


def run_setup(setup: Setup, seeds: int, budget_scale: float) -> list[dict]:
    """Rows (method, seed, DRAM, MBU, seconds) of one setup."""
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
    started = time.perf_counter()
    refs = reference_baselines(graph, hw, setup.scheme, CostCache(graph, hw, setup.scheme))
    seconds = round(time.perf_counter() - started, 2)
    for name in BASELINES:
        b = refs[name]
        rows.append({**base, "method": name, "seed": None, "dram_bytes": b.dram_bytes,
                     "dram_bytes_fuseable": b.dram_bytes_fuseable, "mbu_bytes": b.mbu_bytes,
                     "seconds": seconds})
    return rows


def markdown(table: pd.DataFrame, column: str) -> str:
    """One line per setup, one column per method: mean DRAM in MB (10^6 bytes)."""
    mean = table.groupby(["model", "scheme", "buffer_kib", "budget", "method"], sort=False)[
        column].mean().unstack("method")
    mean = mean[[m for m in LABEL if m in mean.columns]].rename(columns=LABEL)
    lines = ["| network | scheme | buffer | budget | " + " | ".join(mean.columns) + " |",
             "|---|---|---|---|" + "---:|" * len(mean.columns)]
    for (model, scheme, kib, budget), row in mean.iterrows():
        cells = " | ".join(f"{v / 1e6:.3f}" for v in row)
        lines.append(f"| {model} | {scheme.upper()} | {kib} KiB | {budget:,} | {cells} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=1, help="seeds per search (default 1)")
    p.add_argument("--out", default="fusion-dse-out/paper-tables", help="output folder")
    p.add_argument("--only", default="", help="comma-separated networks to run")
    p.add_argument("--budget-scale", type=float, default=1.0, help="multiply every budget")
    args = p.parse_args()
    wanted = {m.strip() for m in args.only.split(",") if m.strip()}
    rows = []
    for setup in SETUPS:
        if wanted and setup.model not in wanted:
            continue
        started = time.perf_counter()
        rows += run_setup(setup, args.seeds, args.budget_scale)
        print(f"{setup.model:16s} {setup.scheme:4s} {setup.buffer_kib} KiB: "
              f"{time.perf_counter() - started:.1f} s", flush=True)
    table = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "paper_tables.csv", index=False)
    text = (f"DRAM access in MB of the fuseable ops (the paper's scope), mean of {args.seeds} "
            f"seed(s), random repair\n\n{markdown(table, 'dram_bytes_fuseable')}\n\n"
            f"DRAM access in MB, whole network\n\n{markdown(table, 'dram_bytes')}\n")
    (out / "paper_tables.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
