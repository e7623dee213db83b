"""Hybrid plans against the best single dataflow: the 13 CNNs of the zoo x 32 KiB..4 MiB.

Per cell (network as optimize sees it, after the default ``fuse`` graph stage; the edge-npu
preset at the cell's buffer) it solves the exact optimum under LBDF, under BRR and under the
hybrid (`Scheme.HYBRID`: each group its least-DRAM dataflow, `simulator.dataflow.hybrid`), costs
the layer-by-layer plan, and prints the hybrid's DRAM against min(LBDF, BRR, LBL), its groups
per dataflow and the CPU seconds of the hybrid solve (which starts from each member's optimum
as an incumbent, `search.exact.mixed`, solved on its own cache: those CPU seconds included).
"Proven" is `ExactResult.optimal`: no work cap cut the solve, or the cap's lower bound reaches
the answer. The benchmark checks the hybrid optimum is <= the minimum on every cell (exit
status 1 and the cells named when not) and prints how often and by how much it is strictly
better.

    python benchmarks/hybrid.py [--models cnn|a,b] [--buffers 32KiB,...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from search.exact import optimum
from search.substitution.stages import run_stages
from simulator.cost import CostCache, evaluate_plan
from simulator.hw import load_hw, parse_size
from simulator.plan import layer_by_layer
from simulator.workload.loader import load_zoo
from simulator.workload.zoo import CNN, zoo_names

BUFFERS = ("32KiB", "64KiB", "128KiB", "256KiB", "512KiB", "1MiB", "2MiB", "4MiB")


def cell(graph, buffer: str) -> dict:
    """The optima of one network at one buffer (DRAM bytes, proven flags, hybrid shares)."""
    hw = load_hw("edge-npu", {"buffer": buffer})
    row: dict = {"model": graph.name, "buffer": buffer, "buffer_bytes": hw.buffer_bytes}
    for scheme in ("lbdf", "brr", "hybrid"):
        cache = CostCache(graph, hw, scheme)
        cpu = time.process_time()
        res = optimum(graph, cache)
        row[f"{scheme}_cpu_s"] = round(time.process_time() - cpu, 3)
        cost = evaluate_plan(graph, res.plan, hw, scheme, cache)
        assert cost.valid and cost.dram_bytes == res.dram_bytes, (graph.name, buffer, scheme)
        row[scheme], row[f"{scheme}_proven"] = res.dram_bytes, res.optimal
        if scheme == "hybrid":
            row["groups_by_dataflow"] = cost.groups_by_dataflow
    row["lbl"] = evaluate_plan(graph, layer_by_layer(graph), hw, "lbl").dram_bytes
    row["best_single"] = min(row["lbdf"], row["brr"], row["lbl"])
    row["gain"] = 1 - row["hybrid"] / row["best_single"]
    return row


def _shares(counts: dict[str, int]) -> str:
    total = sum(counts.values()) or 1
    return " ".join(f"{s}{100 * n / total:.0f}%" for s, n in counts.items())


def _line(r: dict) -> str:
    best = min(("lbdf", "brr", "lbl"), key=lambda s: r[s])
    proven = "".join("P" if r[f"{s}_proven"] else "-" for s in ("lbdf", "brr", "hybrid"))
    return (f"{r['model']:<18} {r['buffer']:>7} {r['lbdf'] / 1e6:>9.3f} {r['brr'] / 1e6:>9.3f} "
            f"{r['lbl'] / 1e6:>9.3f} {best:>6} {r['hybrid'] / 1e6:>9.3f} {100 * r['gain']:>6.2f}% "
            f"{proven:>5} {r['hybrid_cpu_s']:>6.1f}  {_shares(r['groups_by_dataflow'])}")


HEADER = (f"{'model':<18} {'buffer':>7} {'LBDF MB':>9} {'BRR MB':>9} {'LBL MB':>9} "
          f"{'best':>6} {'hybrid MB':>9} {'gain':>7} {'LBH':>5} {'cpu s':>6}  "
          "hybrid groups per dataflow")


def summary(rows: list[dict]) -> tuple[str, list[dict]]:
    """The summary lines and the cells where the hybrid is above the best single dataflow."""
    worse = [r for r in rows if r["hybrid"] > r["best_single"]]
    better = [r for r in rows if r["hybrid"] < r["best_single"]]
    gains = [r["gain"] for r in better]
    lines = [
        f"cells: {len(rows)}; hybrid proven optimal on {sum(r['hybrid_proven'] for r in rows)}, "
        f"LBDF on {sum(r['lbdf_proven'] for r in rows)}, BRR on "
        f"{sum(r['brr_proven'] for r in rows)}",
        f"hybrid <= min(LBDF, BRR, LBL) on {len(rows) - len(worse)} of {len(rows)} cells",
        f"hybrid strictly better on {len(better)} of {len(rows)} cells"
        + (f": DRAM saving mean {100 * statistics.mean(gains):.2f}%, median "
           f"{100 * statistics.median(gains):.2f}%, max {100 * max(gains):.2f}% "
           f"({max(better, key=lambda r: r['gain'])['model']} at "
           f"{max(better, key=lambda r: r['gain'])['buffer']})" if gains else ""),
        f"hybrid solve CPU seconds: median {statistics.median(r['hybrid_cpu_s'] for r in rows):.2f}"
        f", max {max(r['hybrid_cpu_s'] for r in rows):.2f} (LBDF + BRR solves: median "
        f"{statistics.median(r['lbdf_cpu_s'] + r['brr_cpu_s'] for r in rows):.2f})",
    ]
    return "\n".join(lines), worse


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="cnn", help="'cnn' (the 13 zoo CNNs) or names, a,b")
    p.add_argument("--buffers", default=",".join(BUFFERS))
    p.add_argument("--json", help="write every cell to this file")
    args = p.parse_args()
    models = zoo_names(CNN) if args.models == "cnn" else args.models.split(",")
    buffers = sorted(args.buffers.split(","), key=parse_size)
    print("LBH: P where the LBDF, BRR and hybrid optima are proven; gain: hybrid's DRAM "
          "saving over the best single dataflow (LBL: layer by layer)")
    print(HEADER, flush=True)
    rows = []
    for name in models:
        graph = run_stages(load_zoo(name), "fuse").graph
        for buffer in buffers:
            rows.append(cell(graph, buffer))
            print(_line(rows[-1]), flush=True)
    text, worse = summary(rows)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    for r in worse:
        print(f"HYBRID ABOVE THE BEST SINGLE DATAFLOW: {r['model']} at {r['buffer']}: "
              f"{r['hybrid']:,} > {r['best_single']:,}", file=sys.stderr)
    sys.exit(1 if worse else 0)


if __name__ == "__main__":
    main()
