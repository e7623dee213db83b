"""One question, one number: the default optimize answers the same bytes idle and under load.

For every instance (the 13 CNNs of the zoo x 64 KiB-2 MiB x LBDF/BRR on edge-npu by default),
`fusion_dse.optimize` runs twice with the run's defaults (``auto``, ``fuse`` graph stage, the
exact solver's work caps): once on the machine as it is, once with every core saturated by busy
processes this script starts. plan.json and summary.json are compared byte for byte with their
wall-clock fields left out (``seconds``, ``*_seconds``, ``reused``). Prints one line per instance
and the count of identical answers; exits 1 when any differs.

    python benchmarks/one_answer.py [--models a,b] [--schemes lbdf,brr]
        [--buffers 64KiB,128KiB,...] [--search auto] [--busy N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time

from fusion_dse import optimize
from fusion_dse.optimization import plan_document
from fusion_dse.pipeline import _PROVEN
from fusion_dse.sweep.point import without_timing
from simulator.workload.zoo import CNN, zoo_names

BUFFERS = ("64KiB", "128KiB", "256KiB", "512KiB", "1MiB", "2MiB")


def answer(model: str, scheme: str, buffer: str, search: str) -> str:
    """plan.json and summary.json of one default run, without wall-clock fields, as text."""
    _PROVEN.clear()  # every run solves anew, as a fresh process would
    result = optimize(model, scheme=scheme, search=search, overrides={"buffer": buffer})
    doc = {"plan": plan_document(result), "summary": result.summary.to_dict()}
    return json.dumps(without_timing(doc), sort_keys=True, default=str)


def _spin() -> None:
    while True:
        pass


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(zoo_names(CNN)))
    p.add_argument("--schemes", default="lbdf,brr")
    p.add_argument("--buffers", default=",".join(BUFFERS))
    p.add_argument("--search", default="auto")
    p.add_argument("--busy", type=int, default=os.cpu_count() or 2,
                   help="busy processes during the loaded pass (default: one per core)")
    p.add_argument("--json", default=None, help="also write the per-instance rows here")
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    instances = [(m, s, b) for m in args.models.split(",") for s in args.schemes.split(",")
                 for b in args.buffers.split(",")]
    idle = {}
    t = time.perf_counter()
    for inst in instances:
        idle[inst] = answer(*inst, args.search)
    idle_s = time.perf_counter() - t
    spinners = [mp.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for proc in spinners:
        proc.start()
    rows, same = [], 0
    t = time.perf_counter()
    try:
        for inst in instances:
            loaded = answer(*inst, args.search)
            ok = loaded == idle[inst]
            same += ok
            dram = json.loads(loaded)["summary"]["best"]["dram_bytes"]
            rows.append({"model": inst[0], "scheme": inst[1], "buffer": inst[2],
                         "identical": ok, "dram_bytes": dram})
            print(f"{inst[0]:<22}{inst[1]:<6}{inst[2]:>8}  {dram:>14,} B  "
                  f"{'identical' if ok else 'DIFFERS'}", flush=True)
    finally:
        for proc in spinners:
            proc.terminate()
    loaded_s = time.perf_counter() - t
    print(f"{same}/{len(instances)} identical under {args.busy} busy processes "
          f"(first pass {idle_s:.0f} s, loaded pass {loaded_s:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if same == len(instances) else 1


if __name__ == "__main__":
    sys.exit(main())
