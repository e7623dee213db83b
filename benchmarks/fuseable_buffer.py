"""The smallest on-chip buffer at which every op of a network is fuseable (fits alone).

For each CNN zoo network and dataflow, bisects (to 1 KiB) the buffer below which some op does not
fit even alone (`CostCache.unfusable` is not empty: such an op runs layer by layer, tiled to
the buffer), and prints the op that needs the most. Whether one op fits is monotone in the
buffer (a larger buffer admits every configuration a smaller one does), so bisection is exact
at 1 KiB granularity. LBDF is reported for both line-buffer granularities.

    python benchmarks/fuseable_buffer.py [--models resnet18,vgg16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

from simulator.cost import COST_MODELS
from simulator.hw import load_hw
from simulator.scheme import Scheme
from simulator.workload.loader import load_zoo
from simulator.workload.zoo import CNN, zoo_names

KIB = 1024
TOP = 1 << 30  # 1 GiB: past every zoo network's largest op


def fits_all(graph, scheme: Scheme, hw) -> int | None:
    """The first op (by id) that does not fit alone on `hw`, or None."""
    fn = COST_MODELS[scheme]
    for op in graph:
        if not fn(graph, (op.id,), hw).fits:
            return op.id
    return None


def smallest_buffer(graph, scheme: Scheme, overrides: dict[str, str]) -> tuple[int, str]:
    """(bytes, name of the op that needs the most) at 1 KiB granularity."""
    def hw_at(kib: int):
        return load_hw("edge-npu", {**overrides, "buffer": f"{kib}KiB"})

    lo, hi = 0, TOP // KIB  # some op fails at lo (or lo = 0), all fit at hi
    if fits_all(graph, scheme, hw_at(hi)) is not None:
        return -1, graph[fits_all(graph, scheme, hw_at(hi))].name
    last_failing = None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        failing = fits_all(graph, scheme, hw_at(mid))
        if failing is None:
            hi = mid
        else:
            lo, last_failing = mid, failing
    return hi * KIB, graph[last_failing].name if last_failing is not None else "-"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(zoo_names(CNN)))
    p.add_argument("--json", help="also write the rows as JSON here")
    args = p.parse_args()
    settings = [("lbdf (pixel)", Scheme.LBDF, {"lbdf_buffer": "pixel"}),
                ("lbdf (row)", Scheme.LBDF, {"lbdf_buffer": "row"}),
                ("brr", Scheme.BRR, {})]
    rows = []
    print(f"{'network':<32} {'dataflow':<13} {'every op fuseable from':>22}  largest need")
    for name in args.models.split(","):
        graph = load_zoo(name)
        for label, scheme, overrides in settings:
            t = time.perf_counter()
            need, op = smallest_buffer(graph, scheme, overrides)
            rows.append({"model": name, "dataflow": label, "buffer_bytes": need, "op": op,
                         "seconds": round(time.perf_counter() - t, 1)})
            shown = "never (<= 1 GiB)" if need < 0 else f"{need // KIB:,} KiB"
            print(f"{name:<32} {label:<13} {shown:>22}  {op}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
