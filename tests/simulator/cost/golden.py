"""Golden cost-model figures per zoo network: `python tests/simulator/cost/golden.py --write`
regenerates golden_costs.json after a deliberate change of the models (review the diff)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simulator.cost import evaluate_plan
from simulator.hw import load_hw
from simulator.plan import layer_by_layer, segment_plan
from simulator.workload.loader import load_zoo
from simulator.workload.zoo import CNN, zoo_names

GOLDEN = Path(__file__).with_name("golden_costs.json")
BUFFERS = ("128KiB", "2MiB")
SCHEMES = ("lbdf", "brr")


def figures(name: str) -> dict:
    graph = load_zoo(name)
    fused = segment_plan(graph, range(0, len(graph), 4))
    out = {}
    for buffer in BUFFERS:
        hw = load_hw("edge-npu", {"buffer": buffer})
        for scheme in SCHEMES:
            lbl = evaluate_plan(graph, layer_by_layer(graph), hw, scheme)
            plan = evaluate_plan(graph, fused, hw, scheme)
            out[f"{scheme}@{buffer}"] = {
                "lower_bound": lbl.lower_bound,
                "lower_bound_fuseable": lbl.lower_bound_fuseable,
                "lbl_dram": lbl.lbl_dram,
                "unfusable_ops": len(lbl.unfusable),
                "segments4_dram": plan.dram_bytes,
                "segments4_dram_fuseable": plan.dram_bytes_fuseable,
                "segments4_mbu": plan.mbu,
                "segments4_valid": plan.valid,
                "segments4_cycles": plan.cycles,
            }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--write", action="store_true", help="rewrite golden_costs.json")
    args = p.parse_args()
    doc = {name: figures(name) for name in zoo_names(CNN)}  # the CNN zoo's figures
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    if args.write:
        GOLDEN.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
