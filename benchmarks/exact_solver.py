"""Speed of the exact solver over the zoo, and the gap of the segment DP to the optimum.

Issue [exact] goals: every CNN zoo network x {64, 128, 256, 512 KiB, 1, 2 MiB} x {LBDF, BRR} on the
edge-npu preset solved exactly, p95 <= 3 s and max <= 20 s per instance (enumeration + DP on a
cold cost cache). Per instance it prints the time, the candidate sets, the sets the lazy DP
costed, the down-sets expanded, the optimum DRAM and the segment DP's gap to it; the optimum
plan is re-costed with `evaluate_plan` (valid, same DRAM) before it is reported. Prints
figures, asserts nothing else.

    python benchmarks/exact_solver.py [--models a,b] [--schemes lbdf,brr] [--buffers 64KiB,...]
        [--stages none,fuse,fuse+fission] [--search auto|eager|lazy]
        [--no-caps | --caps-scale 4 | --time-limit 60] [--json out.json]
        [--heuristics ls,nsga2 --budget 2000 --seeds 0,1,2]

By default the solver runs under its work caps (`search.exact.solver.DEFAULT_CAPS`);
``--no-caps`` lifts them (the counts it prints are what the defaults must leave room for),
``--caps-scale N`` multiplies each by N (how far a capped answer's bound moves with N times the
work, and what that work costs in time and memory);
``--stages`` solves the graph as imported (``none``), after the default ``fuse`` stage, or after
other stages joined by ``+`` (``fuse+fission``: the operator fission of
`search.substitution.stages`). ``--models`` takes zoo names and ``cnn`` (the 13 CNNs),
``transformers`` (ViT-B/16, DeiT-S, BERT-base), ``zoo`` (all 16), and the wide synthetic graphs
of `simulator.workload.synthetic`: ``hrnet_like`` (timm's hrnet_w18_small), ``hrnet_stages``
(its stages 2-3 on 16 x 16 maps, no stem or head) and ``parallel_branches`` (three stages of four
branches of three convs). ``--search`` picks the eager search alone (the solver before the lazy
search), the lazy search alone, or ``auto`` (`search.exact.optimum`'s default).
    python benchmarks/exact_solver.py --markdown out.json   # docs/exact.md's table of a run

Per instance it also prints the CPU seconds (`time.process_time`, the cost models included;
the one-off compilation of their kernels is done first, untimed, and printed on its own),
which search answered (``one_group``: the whole network as one group, proven at once), the
down-sets listed (eager) or reached (lazy) and the down-sets settled; the summary gives the
proven count and the p50/p95/max CPU seconds. A capped answer that is not proven comes with the
solver's proven lower bound of the optimum (``bound_bytes``): the column "at most" is how far
above the optimum the answer can be (answer / bound - 1).

With --heuristics, each named search (random repair) also runs per seed with the plan budget,
and its mean gap to the optimum is printed (slow: minutes per instance).
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import time

import numpy as np

from search.baselines import segment_dp
from search.exact import optimum
from search.exact.solver import DEFAULT_CAPS, ExactCaps
from search.substitution.stages import run_stages
from simulator.cost import CostCache, evaluate_plan
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo
from simulator.workload.synthetic import hrnet_like, parallel_branches
from simulator.workload.zoo import CNN, TRANSFORMER, zoo_names

BUFFERS = ("64KiB", "128KiB", "256KiB", "512KiB", "1MiB", "2MiB")
SYNTHETIC = {
    "hrnet_like": lambda: hrnet_like(name="hrnet_like"),
    "hrnet_stages": lambda: hrnet_like(resolution=16, widths=(2, 4, 8), blocks=1, head=False,
                                       stem=False, name="hrnet_stages"),
    "parallel_branches": lambda: parallel_branches(),
}
"""The wide graphs of `simulator.workload.synthetic` the benchmark knows by name."""


def model_names(spec: str) -> list[str]:
    """The models of a ``--models`` value: names, ``cnn``, ``transformers`` and ``zoo``."""
    groups = {"cnn": zoo_names(CNN), "transformers": zoo_names(TRANSFORMER), "zoo": zoo_names()}
    return [m for part in spec.split(",") for m in groups.get(part, [part])]


def load_model(name: str):
    """A zoo network or a synthetic one (`SYNTHETIC`)."""
    return SYNTHETIC[name]() if name in SYNTHETIC else load_zoo(name)


def heuristic_gaps(graph, hw, scheme: str, optimum_bytes: int, names: list[str], budget: int,
                   seeds: list[int]) -> dict[str, float]:
    """Mean gap of each named search (random repair, `budget` plans) to the optimum."""
    from search import SearchProblem, make_algorithm, run_search

    gaps = {}
    for name in names:
        found = [run_search(SearchProblem(graph, hw, scheme), make_algorithm(name), budget,
                            np.random.default_rng(seed)).cost.dram_bytes for seed in seeds]
        gaps[name] = float(np.mean(found)) / optimum_bytes - 1.0
    return gaps


def instance(graph, scheme: str, buffer: str, time_limit: float | None,
             heuristics: list[str] = (), budget: int = 2000, seeds: list[int] = (),
             caps: ExactCaps = DEFAULT_CAPS, stage: str = "none", search: str = "auto") -> dict:
    """Solve one instance (after graph stages `stage`); its figures as a dict."""
    hw = load_hw("edge-npu", {"buffer": buffer})
    if stage != "none":
        graph = run_stages(graph, stage, hw, scheme).graph
    cache = CostCache(graph, hw, scheme)
    t, cpu = time.perf_counter(), time.process_time()
    res = optimum(graph, cache, caps=caps, time_limit=time_limit, search=search)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    cost = evaluate_plan(graph, res.plan, hw, scheme, cache)
    if not cost.valid or cost.dram_bytes != res.dram_bytes:
        raise RuntimeError(f"{graph.name} {scheme} {buffer}: solver plan invalid or mis-costed")
    dp = segment_dp(graph, cache)
    gaps = heuristic_gaps(graph, hw, scheme, res.dram_bytes, list(heuristics), budget,
                          list(seeds)) if heuristics else {}
    return {"model": graph.name, "scheme": scheme, "buffer": buffer, "stage": stage,
            "ops": len(graph), "seconds": seconds, "cpu_s": cpu, "search": res.search,
            "enum_s": res.enumeration_seconds, "candidates": res.candidates,
            "costed": res.costed, "states": res.states, "listed": res.listed,
            "dram": res.dram_bytes, "cycles": res.cycles, "source": res.source,
            "optimal": res.optimal, "cap": res.cap_reason, "bound": res.bound_bytes,
            "dp_gap": dp.dram_bytes / res.dram_bytes - 1.0, "heuristic_gaps": gaps}


WARM_CAPS = ExactCaps(max_sets=2_000, max_states=2_000, max_costed=200)
"""The work caps of `warm_kernels`' solves."""


def warm_kernels(schemes: list[str]) -> float:
    """Solve two small graphs under each scheme, so that no instance's time holds the one-off
    compilation of the cost models' numba kernels (a fresh install compiles them on first use,
    then loads them from numba's cache; loading them all takes seconds): ResNet-18 at 64 KiB
    runs the A* and BRR's fit bounds, the lazy search on a small wide graph (capped) its
    one-tile floor. `auto` on the wide graph alone answers with one group and loads only the
    group kernel: VGG-16 BRR 64 KiB, the first BRR instance of a zoo run, then took 3.4-3.8 s
    instead of 0.03 s, loading or compiling the rest. Returns the CPU seconds it took."""
    cpu = time.process_time()
    graph, cnn = SYNTHETIC["hrnet_stages"](), load_zoo("resnet18")
    for scheme in schemes:
        hw = load_hw("edge-npu", {"buffer": "64KiB"})
        optimum(cnn, CostCache(cnn, hw, scheme))
        optimum(graph, CostCache(graph, hw, scheme), search="lazy", caps=WARM_CAPS)
    return time.process_time() - cpu


def markdown(rows: list[dict]) -> str:
    """The rows as docs/exact.md's table: per network and scheme, one cell per buffer, "time /
    sets costed of candidates / states / segment DP's gap" (a dagger marks a capped
    instance)."""
    buffers = list(dict.fromkeys(r["buffer"] for r in rows))
    lines = ["| network | scheme | " + " | ".join(buffers) + " |",
             "|---|---|" + "---|" * len(buffers)]
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for r in rows:
        mark = "" if r["optimal"] else "†"
        cells.setdefault((r["model"], r["scheme"]), {})[r["buffer"]] = (
            f"{r['seconds']:.2f} s{mark} / {r['costed']:,} of {r['candidates']:,} / "
            f"{r['states']:,} / {r['dp_gap']:+.1%}")
    for (model, scheme), row in cells.items():
        lines.append(f"| {model} | {scheme} | "
                     + " | ".join(row.get(b, "") for b in buffers) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="cnn",
                   help="zoo names, cnn, transformers, zoo, " + ", ".join(SYNTHETIC))
    p.add_argument("--schemes", default="lbdf,brr")
    p.add_argument("--buffers", default=",".join(BUFFERS))
    p.add_argument("--stages", default="none",
                   help="graph stages, comma-separated: none, fuse, fuse+fission, ...")
    p.add_argument("--search", default="auto", choices=("auto", "eager", "lazy"))
    work = p.add_mutually_exclusive_group()
    work.add_argument("--no-caps", action="store_true", help="lift the solver's work caps")
    work.add_argument("--caps-scale", type=int, default=1, metavar="N",
                   help="multiply each default work cap by N (how a capped bound grows with "
                        "work)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="opt-in wall-clock cap per instance (s); capped answers say "
                        "optimal=False and reproducible=False")
    p.add_argument("--json", default=None, help="also write the rows to this file")
    p.add_argument("--heuristics", default="", help="searches to compare, e.g. ls,nsga2")
    p.add_argument("--budget", type=int, default=2000)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--markdown", default=None, help="print the table of a --json file, run nothing")
    args = p.parse_args()
    if args.markdown:
        with open(args.markdown) as f:
            print(markdown(json.load(f)))
        return
    heuristics = [h for h in args.heuristics.split(",") if h]
    seeds = [int(x) for x in args.seeds.split(",")]
    rows = []
    if args.caps_scale < 1:
        p.error(f"--caps-scale must be a positive integer, got {args.caps_scale}")
    caps = ExactCaps() if args.no_caps else ExactCaps(**{
        name: value * args.caps_scale for name, value in DEFAULT_CAPS.to_dict().items()})
    print(f"{'model':<28}{'scheme':<6}{'buffer':>8}{'stage':>13}{'time s':>8}{'cpu s':>8}"
          f"{'enum s':>7}{'search':>10}{'sets':>9}{'listed':>9}{'states':>8}{'costed':>7}"
          f"{'optimum B':>13}{'DP gap':>9}{'at most':>9}  optimal")
    warm = warm_kernels(args.schemes.split(","))
    print(f"(the cost models' compiled kernels loaded or compiled first, untimed: {warm:.2f} s "
          "CPU)")
    for model in model_names(args.models):
        graph = load_model(model)
        for scheme, buffer, stage in itertools.product(args.schemes.split(","),
                                                       args.buffers.split(","),
                                                       args.stages.split(",")):
            try:
                r = instance(graph, scheme, buffer, args.time_limit, heuristics, args.budget,
                             seeds, caps, stage, args.search)
            except ValueError as err:  # e.g. an op that runs at no buffer that small
                print(f"{model:<28}{scheme:<6}{buffer:>8}{stage:>13}  no plan runs: {err}")
                continue
            rows.append(r)
            listed = "-" if r["listed"] is None else f"{r['listed']:,}"
            # a capped answer: how far above the optimum it may be, by the proven lower bound
            most = (f"{r['dram'] / r['bound'] - 1:.2%}" if not r["optimal"] and r["bound"]
                    else "-")
            print(f"{model:<28}{scheme:<6}{buffer:>8}{stage:>13}{r['seconds']:>8.2f}"
                  f"{r['cpu_s']:>8.2f}{r['enum_s']:>7.2f}{r['search']:>10}"
                  f"{r['candidates']:>9,}{listed:>9}{r['states']:>8,}{r['costed']:>7,}"
                  f"{r['dram']:>13,}{r['dp_gap']:>9.2%}{most:>9}  {r['optimal'] or r['cap']}"
                  + "".join(f"  {h} {g:+.2%}" for h, g in r["heuristic_gaps"].items()),
                  flush=True)
    if not rows:
        return
    times = np.array([r["seconds"] for r in rows])
    cpu = np.array([r["cpu_s"] for r in rows])
    gaps = np.array([r["dp_gap"] for r in rows])
    print(f"{len(rows)} instances: proven {sum(r['optimal'] for r in rows)}/{len(rows)}; CPU "
          f"p50 {np.percentile(cpu, 50):.2f} s, p95 {np.percentile(cpu, 95):.2f} s, max "
          f"{cpu.max():.2f} s; wall p50 {np.percentile(times, 50):.2f} s, p95 "
          f"{np.percentile(times, 95):.2f} s, max {times.max():.2f} s; lazy search in "
          f"{sum(r['search'] == 'lazy' for r in rows)}, one group at once in "
          f"{sum(r['search'] == 'one_group' for r in rows)}; segment DP optimal in "
          f"{int((gaps <= 1e-12).sum())}/{len(rows)}, gap max {gaps.max():.2%}")
    capped = [r["dram"] / r["bound"] - 1 for r in rows if not r["optimal"] and r["bound"]]
    if capped:
        print(f"{len(capped)} capped answers with a proven lower bound: at most "
              f"{np.mean(capped):.2%} above the optimum on average, {max(capped):.2%} at worst")
    # the process's peak resident memory (kilobytes on Linux): what the caps' work held
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
