"""Speed of the LBDF pixel line-buffer model against whole rows, and a bit-exactness record.

Enumerates groups of zoo networks (random connected sub-groups of 1..30 ops, the groups of
random segment plans, and DNNFusion's greedy plans at 32 KiB..2 MiB), and:

* ``--record FILE`` writes, per group, F_beta and F_D of `simulator.cost.lbdf.group_cost` in
  both line-buffer modes (``pixel``, the default, and ``row``) and a digest of the pixel
  schedule `row_order` returns (what the simulator runs) to a JSON file;
* ``--check FILE`` recomputes them for the groups recorded there and counts the differences
  (exit status 1 if any);
* unless ``--no-time``, prints per network the time of an uncached pixel group cost over that of
  row mode, measured interleaved (chunks of 50 groups, each in pixel then in row mode, the
  whole repeated ``--reps`` times, best time per chunk and mode). Nothing is memoised per group
  between repetitions (`group_cost` is called directly, no `CostCache`); the per-graph row and
  column tables are built once before timing.

    python benchmarks/lbdf_pixel_speed.py --record /tmp/s15/lbdf_pixel_before.json
    python benchmarks/lbdf_pixel_speed.py --check /tmp/s15/lbdf_pixel_before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from simulator.cost import CostCache, lbdf
from simulator.hw import load_hw
from simulator.partition import components
from simulator.plan import segment_plan
from simulator.workload.loader import load_zoo

NETWORKS = ("mobilenet_v2", "resnet50", "efficientnet_b3", "squeezenet1_0",
            "deeplabv3_mobilenet_v3_large")
BUFFERS = ("32KiB", "128KiB", "512KiB", "2MiB")


def random_groups(graph, rng: random.Random, n: int, max_ops: int = 30) -> list[tuple[int, ...]]:
    """Largest connected component of a random run of 1..`max_ops` consecutive ops, n times."""
    groups = []
    while len(groups) < n:
        start = rng.randrange(len(graph))
        comp = components(graph, range(start, min(len(graph), start + rng.randint(1, max_ops))))
        groups.append(tuple(sorted(max(comp, key=len))))
    return groups


def segment_groups(graph, rng: random.Random, plans: int, max_len: int = 16
                   ) -> list[tuple[int, ...]]:
    """The groups of random segment plans (segments of 1..`max_len` ops, split into
    connected components)."""
    groups = []
    for _ in range(plans):
        cuts, at = [], 0
        while at < len(graph):
            at += rng.randint(1, max_len)
            cuts.append(at)
        groups += [tuple(sorted(g)) for g in segment_plan(graph, cuts).groups]
    return groups


def greedy_groups(graph, hw) -> list[tuple[int, ...]]:
    """The groups of DNNFusion's greedy plan (buffer-greedy variant) at each of `BUFFERS`."""
    from search.baselines import greedy_fusion  # the benchmark only; the library never does

    groups = []
    for buf in BUFFERS:
        h = load_hw("edge-npu", {"buffer": buf})
        plan = greedy_fusion(graph, CostCache(graph, h, "lbdf"), mapping_rules=False)
        groups += [tuple(sorted(g)) for g in plan.groups]
    return groups


def enumerate_groups(name: str, seed: int, n_random: int, n_plans: int, greedy: bool,
                     hw) -> list[tuple[int, ...]]:
    """Distinct groups of network `name`, in a reproducible order."""
    graph = load_zoo(name)
    rng = random.Random(f"{seed}:{name}")
    found = random_groups(graph, rng, n_random) + segment_groups(graph, rng, n_plans)
    if greedy:
        found += greedy_groups(graph, hw)
    return list(dict.fromkeys(found))


def schedule_digest(graph, ops: tuple[int, ...]) -> str:
    """Digest of the pixel schedule `row_order` hands the simulator."""
    o = lbdf.row_order(graph, ops, "pixel")
    h = hashlib.blake2b(digest_size=12)
    h.update(repr((o.refs, o.heights, o.n_entering)).encode())
    for a in (o.tensor, o.row, o.block, o.levels):
        h.update(b"-" if a is None else np.ascontiguousarray(a, dtype=np.int64).tobytes())
    return h.hexdigest()


def figures(graph, ops: tuple[int, ...], pixel_hw, row_hw) -> dict:
    """F_beta and F_D of a group in both modes, and the pixel schedule's digest."""
    px, row = lbdf.group_cost(graph, ops, pixel_hw), lbdf.group_cost(graph, ops, row_hw)
    return {"ops": list(ops), "pixel": [px.buffer_bytes, px.dram_bytes],
            "row": [row.buffer_bytes, row.dram_bytes], "order": schedule_digest(graph, ops)}


def time_ratio(graph, groups: list[tuple[int, ...]], pixel_hw, row_hw, reps: int,
               chunk: int = 50) -> tuple[float, float, float]:
    """Seconds of pixel and row group costs over `groups` and their ratio: the groups are
    timed in chunks, a chunk in pixel mode then in row mode, `reps` times over; each chunk
    counts its best time in each mode (so that a machine whose speed drifts, or another
    process's burst, weighs on both modes alike)."""
    chunks = [groups[i:i + chunk] for i in range(0, len(groups), chunk)]
    best = {"pixel": [float("inf")] * len(chunks), "row": [float("inf")] * len(chunks)}
    for _ in range(reps):
        for c, part in enumerate(chunks):
            for mode, h in (("pixel", pixel_hw), ("row", row_hw)):
                t = time.perf_counter()
                for g in part:
                    lbdf.group_cost(graph, g, h)
                best[mode][c] = min(best[mode][c], time.perf_counter() - t)
    pixel, row = sum(best["pixel"]), sum(best["row"])
    return pixel, row, pixel / row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--record", type=Path, help="write the groups' figures to this JSON file")
    p.add_argument("--check", type=Path, help="compare with the figures recorded in this file")
    p.add_argument("--networks", nargs="+", default=list(NETWORKS))
    p.add_argument("--random", type=int, default=500, help="random groups per network")
    p.add_argument("--plans", type=int, default=12, help="random segment plans per network")
    p.add_argument("--no-greedy", action="store_true", help="leave the greedy plans' groups out")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--no-time", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    pixel_hw = load_hw("edge-npu", {"buffer": "256KiB"})
    row_hw = replace(pixel_hw, lbdf_buffer="row")
    assert pixel_hw.lbdf_buffer == "pixel"
    ref = json.loads(args.check.read_text()) if args.check else None
    record: dict[str, list[dict]] = {}
    status, compared = 0, 0
    for name in (list(ref) if ref else args.networks):
        graph = load_zoo(name)
        if ref:
            groups = [tuple(r["ops"]) for r in ref[name]]
        else:
            groups = enumerate_groups(name, args.seed, args.random, args.plans,
                                      not args.no_greedy, pixel_hw)
        if args.record or ref:
            record[name] = [figures(graph, g, pixel_hw, row_hw) for g in groups]
        if ref:
            bad = [(a, b) for a, b in zip(ref[name], record[name], strict=True) if a != b]
            compared += len(groups)
            print(f"{name:30s} {len(groups):5d} groups compared, {len(bad)} differ")
            for a, b in bad[:5]:
                print(f"    before {a}\n    after  {b}")
            status |= bool(bad)
        if not args.no_time:
            lbdf.group_cost(graph, groups[0], pixel_hw)  # per-graph tables built once
            tp, tr, ratio = time_ratio(graph, groups, pixel_hw, row_hw, args.reps)
            print(f"{name:30s} {len(groups):5d} groups: pixel {tp / len(groups) * 1e6:7.0f} us, "
                  f"row {tr / len(groups) * 1e6:7.0f} us per group, pixel/row {ratio:.2f}x "
                  f"(best of {args.reps}, interleaved by chunks)", flush=True)
    if args.record:
        args.record.write_text(json.dumps(record))
        print(f"recorded {sum(map(len, record.values()))} groups to {args.record}")
    if ref:
        print(f"bit-exact check: {compared} groups, {'FAIL' if status else 'all identical'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
