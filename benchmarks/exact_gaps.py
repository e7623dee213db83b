"""How far the heuristics end from the optimum: a table per dataflow from a sweep store.

Reads a store of `experiments/specs/exact_gaps.yaml` (or any sweep with heuristic searches:
each point's summary carries the optimum computed on the same problem) and prints, per network
and buffer size, the gap of each search's best plan to the optimum in fuseable-op DRAM (the
part a partition decides; the paper's metric), as the mean over the seeds stored with the
worst seed in brackets, and the segment DP's gap (deterministic). A cell whose optimum was
capped (not proven) is marked with a dagger: its gap is then to the best of the capped solve.

Usage:
    fusion-dse sweep experiments/specs/exact_gaps.yaml --store gaps.sqlite
    python benchmarks/exact_gaps.py gaps.sqlite [--seeds 0] [--optima brr.json lbdf.json]
                                    [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from fusion_dse.sweep import load_sweep
from simulator.hw import format_size, parse_size

SEARCH_LABEL = {"ls": "LS", "nsga2": "NSGA-II", "rs": "RS", "auto": "auto"}


def proven_optima(paths: list[str]) -> dict[tuple[str, str, int], int]:
    """Whole-network optimum DRAM by (model, scheme, buffer bytes) from JSON files of
    `benchmarks/exact_solver.py --json` (proven instances only)."""

    optima = {}
    for path in paths:
        for row in json.loads(Path(path).read_text()):
            if row["optimal"]:
                optima[row["model"], row["scheme"], parse_size(row["buffer"])] = row["dram"]
    return optima


def gap_rows(store: str | Path, seeds: set[int] | None = None,
             optima: dict[tuple[str, str, int], int] | None = None) -> pd.DataFrame:
    """One row per stored heuristic point (of `seeds`, default all): its gap, the segment DP's
    and the optimum's status (fuseable-op DRAM). A point whose stored optimum was capped takes
    the proven one from `optima` (whole-network bytes) when it has it: the part outside the
    fuseable ops is the same in every plan, so the fuseable optimum is that minus it."""
    frame = load_sweep(store, blobs=True)
    frame = frame[(frame["status"] == "done") & frame["search"].notna()]
    if seeds is not None:
        frame = frame[frame["seed"].isin(seeds)]
    rows = []
    for point in frame.itertuples():
        summary = json.loads(point.summary) if isinstance(point.summary, str) else point.summary
        opt = summary["optimum"]
        if "dram_bytes_fuseable" not in opt:
            continue  # not computed
        best, proven = opt["dram_bytes_fuseable"], bool(opt["optimal"])
        fixed = point.dram_bytes - point.dram_bytes_fuseable  # outside the fuseable ops
        key = (point.model, point.scheme, int(point.buffer_bytes))
        if not proven and optima and key in optima:
            best, proven = optima[key] - fixed, True
        sdp = summary["baselines"]["segment_dp"]["dram_bytes_fuseable"]
        rows.append({"model": point.model, "scheme": point.scheme, "buffer": point.buffer_bytes,
                     "search": point.search, "seed": point.seed,
                     "gap": point.dram_bytes_fuseable / best - 1, "sdp_gap": sdp / best - 1,
                     "optimum_mb": best / 1e6, "optimal": proven})
    return pd.DataFrame(rows)


def markdown(rows: pd.DataFrame) -> str:
    """Per dataflow: networks x buffers, each cell 'optimum MB: search gaps, segment DP'."""
    searches = [s for s in SEARCH_LABEL if s in set(rows["search"])]
    out = []
    for scheme, part in rows.groupby("scheme", sort=True):
        buffers = sorted(part["buffer"].unique())
        head = " / ".join(SEARCH_LABEL[s] for s in searches) + " / segment DP"
        out += [f"### {scheme.upper()}: gap to the optimum, fuseable-op DRAM (cell: optimum "
                f"MB; {head}: mean % over seeds [worst])", "",
                "| network | " + " | ".join(format_size(b) for b in buffers) + " |",
                "|---|" + "---|" * len(buffers)]
        for model, net in part.groupby("model", sort=False):
            cells = []
            for b in buffers:
                cell = net[net["buffer"] == b]
                if cell.empty:
                    cells.append("")
                    continue
                gaps = []
                for s in searches:
                    g = cell[cell["search"] == s]["gap"] * 100
                    gaps.append(f"{g.mean():+.1f} [{g.max():+.1f}]" if len(g) else "-")
                dagger = "" if cell["optimal"].all() else "†"
                cells.append(f"{cell['optimum_mb'].iloc[0]:.3f}{dagger}: " + " / ".join(gaps)
                             + f" / {cell['sdp_gap'].iloc[0] * 100:+.1f}")
            out.append(f"| {model} | " + " | ".join(cells) + " |")
        out.append("")
        proven = part[part["optimal"]]
        for s in searches:
            g = proven[proven["search"] == s]
            per_cell = g.groupby(["model", "buffer"])["gap"].mean()
            out.append(f"- {SEARCH_LABEL[s]}: {len(g)} runs on {len(per_cell)} proven optima; "
                       f"at the optimum in {(g['gap'] <= 1e-12).sum()} runs; mean gap "
                       f"{100 * g['gap'].mean():.2f} %, median of cells "
                       f"{100 * per_cell.median():.2f} %, worst run {100 * g['gap'].max():.1f} %"
                       + (f" ({_worst(g)})" if len(g) else ""))
        cells = proven.drop_duplicates(["model", "buffer"])
        out.append(f"- segment DP: at the optimum in {(cells['sdp_gap'] <= 1e-12).sum()} of "
                   f"{len(cells)} cells, worst {100 * cells['sdp_gap'].max():.1f} %")
        capped = part[~part["optimal"]].drop_duplicates(["model", "buffer"])
        if len(capped):
            out.append("- optimum capped (†, default 15 s cap of the optimum reference): "
                       + ", ".join(f"{m} {format_size(b)}" for m, b in zip(capped["model"],
                                                                    capped["buffer"],
                                                                    strict=True)))
        out.append("")
    return "\n".join(out)


def _worst(g: pd.DataFrame) -> str:
    w = g.loc[g["gap"].idxmax()]
    return f"{w['model']} {format_size(w['buffer'])} seed {w['seed']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="sweep store (.sqlite)")
    parser.add_argument("--seeds", metavar="S,S", help="only these seeds (default: all stored)")
    parser.add_argument("--optima", metavar="JSON", nargs="*", default=[],
                        help="benchmarks/exact_solver.py --json files: proven optima for the "
                             "cells whose stored optimum was capped")
    parser.add_argument("--markdown", metavar="OUT.md", help="also write the tables here")
    args = parser.parse_args()
    seeds = {int(s) for s in args.seeds.split(",")} if args.seeds else None
    rows = gap_rows(args.store, seeds, proven_optima(args.optima))
    if rows.empty:
        raise SystemExit(f"{args.store}: no heuristic point with an optimum")
    text = markdown(rows)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")


if __name__ == "__main__":
    main()
