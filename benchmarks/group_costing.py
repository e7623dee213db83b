"""Groups costed per CPU-second, this tree against a baseline revision, in one run ([speed]).

For each network (MobileNetV2, ResNet-50, EfficientNet-B3 by default) and dataflow (LBDF with
pixel line buffers, LBDF with row line buffers, BRR) it costs the same random groups of 1..30
ops (connected pieces of the topological order, `cost_models.random_groups`) with the
dataflow's uncached ``group_cost`` on the ``edge-npu`` preset, and prints groups per CPU-second
(``time.process_time``, so other jobs on the machine slow the wall clock, not the figure). It
also checks every figure of every group (F_beta, F_D parts, fits, tiles, weight plan, cycles,
energy) against the baseline's, so a speed-up that changes a number is reported as a mismatch.

The baseline is a git revision checked out in a temporary worktree and measured in a
subprocess (its own interpreter, its own imports) within the same run, interleaved with this
tree's rounds, so both see the same machine load.

    python benchmarks/group_costing.py [--baseline REV] [--groups 1000] [--rounds 3]
        [--models a,b] [--buffer 256KiB] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASELINE = "9d83b56"  # main before issue [speed]
CASES = {"lbdf-pixel": ("lbdf", {"lbdf_buffer": "pixel"}),
         "lbdf-row": ("lbdf", {"lbdf_buffer": "row"}),
         "brr": ("brr", {})}


def figures(cost) -> tuple:
    """Every figure of a GroupCost that a report reads (floats rounded to 10 digits)."""
    t = cost.timing
    return (cost.ops, cost.buffer_bytes, cost.weight_buffer_bytes, cost.dram_act_read,
            cost.dram_weight_read, cost.dram_write, cost.macs, cost.fits, cost.reason,
            cost.tiles, cost.weights_streamed, str(cost.failure),
            cost.resident_weight_bytes, tuple(cost.weight_slices),
            t.cycles, float(f"{t.energy_pj:.10g}"))


def measure(models: list[str], groups_n: int, buffer: str, seed: int) -> dict:
    """{case/model: (groups per CPU-second, digest of the figures)} for the tree on sys.path."""
    sys.path.insert(0, str(Path.cwd() / "benchmarks"))
    from cost_models import random_groups

    from simulator.cost import brr, lbdf
    from simulator.hw import load_hw
    from simulator.workload.loader import load_zoo

    fns = {"lbdf": lbdf.group_cost, "brr": brr.group_cost}
    out = {}
    for model in models:
        graph = load_zoo(model)
        groups = random_groups(graph, random.Random(seed), groups_n)
        for case, (scheme, over) in CASES.items():
            hw = load_hw("edge-npu", {"buffer": buffer, **over})
            fn = fns[scheme]
            for g in groups[:20]:  # warm-up: per-graph tables, compiled kernels
                fn(graph, g, hw)
            digest = hashlib.sha256()
            t = time.process_time()
            costs = [fn(graph, g, hw) for g in groups]
            cpu = time.process_time() - t
            for c in costs:
                digest.update(repr(figures(c)).encode())
            out[f"{case}/{model}"] = (len(groups) / cpu, digest.hexdigest()[:16])
    return out


def _child(args: argparse.Namespace) -> None:
    print(json.dumps(measure(args.models.split(","), args.groups, args.buffer, args.seed)))


def _run(tree: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--models", args.models,
           "--groups", str(args.groups), "--buffer", args.buffer, "--seed", str(args.seed)]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"measurement in {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", default=DEFAULT_BASELINE,
                   help=f"git revision to compare with (default {DEFAULT_BASELINE}); '' for none")
    p.add_argument("--groups", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3, help="rounds per tree; the best is kept")
    p.add_argument("--models", default="mobilenet_v2,resnet50,efficientnet_b3")
    p.add_argument("--buffer", default="256KiB")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"now": ROOT}
        if args.baseline:
            base = Path(tmp) / "baseline"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f",
                            str(base), args.baseline], check=True, capture_output=True)
            trees["baseline"] = base
        try:
            rounds: dict[str, list[dict]] = {k: [] for k in trees}
            for r in range(args.rounds):
                for name, tree in trees.items():
                    rounds[name].append(_run(tree, args))
                    print(f"round {r + 1}/{args.rounds} {name} done", file=sys.stderr)
        finally:
            if args.baseline:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(base)], check=False, capture_output=True)
    best = {name: {k: max(rd[k][0] for rd in rs) for k in rs[0]} for name, rs in rounds.items()}
    digests = {name: rs[0] for name, rs in rounds.items()}
    print(f"groups costed per CPU-second, {args.groups} random groups of 1..30 ops, edge-npu "
          f"{args.buffer}, best of {args.rounds} rounds (baseline {args.baseline or '-'})")
    print(f"{'case':28s} {'baseline':>10s} {'now':>10s} {'speed-up':>9s}  figures")
    ratios = []
    for key in best["now"]:
        now = best["now"][key]
        if "baseline" in best:
            base = best["baseline"][key]
            same = digests["now"][key][1] == digests["baseline"][key][1]
            ratios.append(now / base)
            print(f"{key:28s} {base:10,.0f} {now:10,.0f} {now / base:8.1f}x  "
                  f"{'identical' if same else 'MISMATCH'}")
        else:
            print(f"{key:28s} {'-':>10s} {now:10,.0f}")
    if ratios:
        print(f"least speed-up {min(ratios):.1f}x, geometric mean "
              f"{(__import__('math').prod(ratios)) ** (1 / len(ratios)):.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"best": best, "rounds": rounds}, indent=1))


if __name__ == "__main__":
    main()
