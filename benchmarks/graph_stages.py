"""Effect of the graph stages on the best plan: issue [graph-stages] item 5.

For every CNN zoo network x {LBDF, BRR} x {128 KiB, 256 KiB, 2 MiB} (edge-npu preset) and every
stage setting (none, fuse, fission, fuse+fission, all by default), the graph is rewritten by
`search.substitution.stages.run_stages` and its optimal plan solved exactly
(`search.exact.optimum` within its default work caps, counted work, so every cell is the same on
any machine; a capped cell is marked). Per cell it prints
the whole-network and fuseable DRAM of that plan, the ops of the graph, the ops that fit no
group, the seconds the stages took and the seconds of the exact solve. The optimum plan is
re-costed with `evaluate_plan` (valid, same DRAM) before it is reported.

    python benchmarks/graph_stages.py [--models a,b] [--schemes lbdf,brr]
        [--buffers 128KiB,256KiB,2MiB] [--stages none,fuse,fission,fuse+fission,all]
        [--substitution sampling] [--max-graphs 200] [--workers 2] [--json out.json]
    python benchmarks/graph_stages.py --markdown out.json [more.json ...]
        # docs/graph-stages.md's summary and tables

Points run in worker processes (--workers, default 1); timings are per point, so compare
them only between runs on an equally loaded machine; the DRAM figures do not depend on the load
(`--time-limit` and `--substitute-seconds` opt in to wall-clock limits, which make them depend
on it).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor

from search.exact import optimum
from search.substitution.stages import run_stages
from simulator.cost import CostCache, evaluate_plan
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo
from simulator.workload.zoo import CNN, zoo_names

BUFFERS = ("128KiB", "256KiB", "2MiB")
STAGE_SETS = ("none", "fuse", "fission", "fuse+fission", "all")


def cell(model: str, scheme: str, buffer: str, stages: str, substitution: str,
         time_limit: float | None, substitute_seconds: float | None = None,
         max_graphs: int | None = None) -> dict:
    """One (network, dataflow, buffer, stages) point; its figures as a dict."""
    import torch

    torch.set_num_threads(1)
    hw = load_hw("edge-npu", {"buffer": buffer})
    graph = load_zoo(model)
    t = time.perf_counter()
    options = {} if substitute_seconds is None else {"time_limit": substitute_seconds}
    if max_graphs is not None:
        options["max_graphs"] = max_graphs
    staged = run_stages(graph, stages, hw, scheme, algorithm=substitution, seed=0,
                        options=options)
    stage_seconds = time.perf_counter() - t
    g = staged.graph
    cache = CostCache(g, hw, scheme)
    t = time.perf_counter()
    res = optimum(g, cache, time_limit=time_limit)
    solve_seconds = time.perf_counter() - t
    cost = evaluate_plan(g, res.plan, hw, scheme, cache)
    if not cost.valid or cost.dram_bytes != res.dram_bytes:
        raise RuntimeError(f"{model} {scheme} {buffer} {stages}: optimum invalid or mis-costed")
    return {
        "model": model, "scheme": scheme, "buffer": buffer, "stages": stages,
        "ops": len(g), "ops_source": len(graph), "rewrites": len(staged.rewrites),
        "unfusable_ops": len(cost.unfusable),
        "dram_bytes": cost.dram_bytes, "dram_bytes_fuseable": cost.dram_bytes_fuseable,
        "optimal": res.optimal, "stage_seconds": round(stage_seconds, 3),
        "solve_seconds": round(solve_seconds, 3),
        "per_stage": [r.to_dict() for r in staged.reports],
    }


def summary(rows: list[dict], against: str = "none") -> str:
    """Per stage setting, over the cells that also have `against`: the whole-network DRAM
    change (mean, min, max), cells better / worse, ops fitting no group (sums), capped solves
    and the seconds the stages took (mean, max)."""
    base = {(r["model"], r["scheme"], r["buffer"]): r for r in rows if r["stages"] == against}
    out = [f"| stage setting | cells | whole-network DRAM against {against}: mean (min, max) "
           "| better / worse | ops fitting no group | capped solves | stage seconds, mean "
           "(max) |", "|---|---|---|---|---|---|---|"]
    for stages in dict.fromkeys(r["stages"] for r in rows):
        if stages == against:
            continue
        pairs = [(base[k], r) for r in rows if r["stages"] == stages
                 and (k := (r["model"], r["scheme"], r["buffer"])) in base]
        if not pairs:
            continue
        change = [100 * (r["dram_bytes"] / b["dram_bytes"] - 1) for b, r in pairs]
        better = sum(r["dram_bytes"] < b["dram_bytes"] for b, r in pairs)
        worse = sum(r["dram_bytes"] > b["dram_bytes"] for b, r in pairs)
        secs = [r["stage_seconds"] for _, r in pairs]
        out.append(
            f"| `{stages}` | {len(pairs)} | {sum(change) / len(change):+.2f} % "
            f"({min(change):+.2f} %, {max(change):+.2f} %) | {better} / {worse} | "
            f"{sum(b['unfusable_ops'] for b, _ in pairs):,} -> "
            f"{sum(r['unfusable_ops'] for _, r in pairs):,} | "
            f"{sum(not r['optimal'] for _, r in pairs)} | "
            f"{sum(secs) / len(secs):.1f} ({max(secs):.1f}) |")
    return "\n".join(out)


def markdown(rows: list[dict]) -> str:
    """One table per dataflow and buffer: networks down, stage settings across."""
    stages = list(dict.fromkeys(r["stages"] for r in rows))
    out = []
    for scheme in dict.fromkeys(r["scheme"] for r in rows):
        for buffer in dict.fromkeys(r["buffer"] for r in rows):
            sel = {(r["model"], r["stages"]): r for r in rows
                   if r["scheme"] == scheme and r["buffer"] == buffer}
            if not sel:
                continue
            out.append(f"\n**{scheme.upper()}, {buffer}**: whole-network DRAM MB / fuseable "
                       "DRAM MB of the optimal plan, ops fitting no group, seconds the stages "
                       "took († capped solve)\n")
            out.append("| network | " + " | ".join(stages) + " |")
            out.append("|---|" + "---|" * len(stages))
            for model in dict.fromkeys(m for m, _ in sel):
                cells = []
                for s in stages:
                    r = sel.get((model, s))
                    cells.append("" if r is None else
                                 f"{r['dram_bytes'] / 1e6:.3f} / "
                                 f"{r['dram_bytes_fuseable'] / 1e6:.3f}"
                                 f"{'' if r['optimal'] else '†'}, {r['unfusable_ops']} unfit, "
                                 f"{r['stage_seconds']:.1f} s")
                out.append(f"| {model} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(zoo_names(CNN)))
    p.add_argument("--schemes", default="lbdf,brr")
    p.add_argument("--buffers", default=",".join(BUFFERS))
    p.add_argument("--stages", default=",".join(STAGE_SETS),
                   help="stage settings, comma separated; combine stages with '+'")
    p.add_argument("--substitution", default="sampling")
    p.add_argument("--time-limit", type=float,
                   help="opt-in wall-clock limit of the exact solve (default: none, the work "
                        "caps alone)")
    p.add_argument("--max-graphs", type=int,
                   help="graphs the substitute stage may cost (default: its own, 200)")
    p.add_argument("--substitute-seconds", type=float,
                   help="opt-in wall-clock limit of the substitute stage (default: none)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--json", help="write the rows to this file")
    p.add_argument("--markdown", nargs="+", metavar="JSON",
                   help="print the summary and the tables of --json files (rows merged) and "
                        "exit")
    a = p.parse_args()
    if a.markdown:
        rows = [r for path in a.markdown for r in json.loads(open(path).read())]
        print(summary(rows))
        print(markdown(rows))
        return
    jobs = [(m, s, b, st, a.substitution, a.time_limit, a.substitute_seconds, a.max_graphs)
            for m in a.models.split(",")
            for s in a.schemes.split(",") for b in a.buffers.split(",")
            for st in a.stages.split(",")]
    rows = []
    with ProcessPoolExecutor(max_workers=a.workers) as pool:
        for row in pool.map(cell, *zip(*jobs, strict=True)):
            rows.append(row)
            print(f"{row['model']:<30} {row['scheme']:<4} {row['buffer']:>6} "
                  f"{row['stages']:<13} ops {row['ops_source']:>4}->{row['ops']:<4} "
                  f"DRAM {row['dram_bytes'] / 1e6:9.3f} MB fuseable "
                  f"{row['dram_bytes_fuseable'] / 1e6:9.3f} MB unfit {row['unfusable_ops']:>3} "
                  f"stages {row['stage_seconds']:7.2f} s solve {row['solve_seconds']:6.2f} s"
                  f"{'' if row['optimal'] else ' (capped)'}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(summary(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
