"""Sweep machinery speed: 1 vs 2 Dask workers on a 40-point sweep, and per-point overhead.

Prints:

* the wall time of the same 40-point sweep (MobileNetV2, LBDF/BRR x 4 buffers x 5 seeds,
  local search) on 1 and on 2 single-threaded workers, and the speed-up. Each run gets a
  fresh store; the cluster is started and its workers warmed (package imported, model
  loaded) before the clock starts, so the figure is the sweep's throughput; the cold
  end-to-end time (cluster start included) is printed too;
* the per-point overhead of the machinery (scheduling, transfer, the store): the 1-worker
  sweep's wall time minus the time its points spent in `run_point`, per point, against the
  time of one 2,000-plan MobileNetV2 local search run in this process.

Usage: .venv/bin/python benchmarks/sweep_speed.py [--budget 1000] [--points 40]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from fusion_dse.sweep import load_sweep
from fusion_dse.sweep.engine import run_sweep
from fusion_dse.sweep.spec import SweepSpec, expand

MODEL = "mobilenet_v2"


def _warm() -> None:
    import torch as _torch

    from simulator.workload.loader import load

    _torch.set_num_threads(1)
    load(MODEL)


def _sweep(points, workers: int, out: Path) -> tuple[float, float, float]:
    """(warm wall s, seconds inside run_point, cold wall s incl. cluster start)."""
    from distributed import Client, LocalCluster

    cold = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.run(_warm)
        started = time.perf_counter()
        outcome = run_sweep(points, out, "bench", scheduler=cluster.scheduler_address,
                            quiet=True)
        wall = time.perf_counter() - started
    cold_wall = time.perf_counter() - cold
    assert outcome.done == len(points), outcome
    frame = load_sweep(out)
    inside = float((frame["finished"] - frame["started"]).sum())
    return wall, inside, cold_wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=1000, help="plans per sweep point")
    parser.add_argument("--points", type=int, default=40, help="points (multiple of 8)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds = max(1, args.points // 8)
    points = expand(SweepSpec(axes={"model": MODEL, "scheme": "lbdf,brr",
                                    "buffer": "128KiB..1MiB:x2", "seed": f"0..{seeds - 1}",
                                    "search": "ls", "budget": args.budget}))
    print(f"{len(points)} points: {MODEL}, LBDF/BRR x 4 buffers x {seeds} seeds, local search "
          f"{args.budget} plans")
    with tempfile.TemporaryDirectory() as tmp:
        one, inside_one, cold_one = _sweep(points, 1, Path(tmp) / "one.sqlite")
        two, _, cold_two = _sweep(points, 2, Path(tmp) / "two.sqlite")
    print(f"1 worker : {one:7.1f} s  (cold, cluster start included: {cold_one:.1f} s)")
    print(f"2 workers: {two:7.1f} s  (cold, cluster start included: {cold_two:.1f} s)")
    print(f"speed-up : {one / two:.2f}x  (cold: {cold_one / cold_two:.2f}x)")

    from fusion_dse.optimization import optimize

    optimize(MODEL, search="ls", budget=20)  # load the model and warm the imports
    started = time.perf_counter()
    optimize(MODEL, search="ls", budget=2000, seed=0)
    search = time.perf_counter() - started
    overhead = (one - inside_one) / len(points)
    print(f"per-point machinery overhead (1 worker): {overhead * 1e3:.1f} ms "
          f"= {100 * overhead / search:.2f} % of a 2,000-plan {MODEL} local search "
          f"({search:.2f} s)")


if __name__ == "__main__":
    main()
