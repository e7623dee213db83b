"""The best plan's DRAM of the zoo's Llama-style decoder against context length C (decode) and
prompt length L (prefill), under LBDF, BRR and hybrid, at two buffer sizes (issue
[workloads-2], Deliver 4; docs/workloads.md, "LLM decoders: prefill and decode").

    python experiments/decoder_sweep.py --store experiments/results/workloads/decoder.csv \\
        --figure docs/images/decoder.png --markdown experiments/results/workloads/decoder.md

Each point is ``llama_tiny_decode@C`` or ``llama_tiny_prefill@L`` on the ``edge-npu`` preset
(int8) at the buffer, as imported (no graph stage), solved by the exact solver
(`search.exact.optimum`) under the work caps `CAPS` (counted work, never time: the same
figures on any machine); a point whose solve a cap cut says so (``optimal`` False) and its plan
is the best the solver found (never worse than the segment DP and greedy plans it starts from).
The store is one CSV row per point (written whole at the end); the figure is drawn from it.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

__all__ = ["CAPS", "main", "points", "solve_point"]

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from search.exact.solver import ExactCaps  # noqa: E402

if TYPE_CHECKING:
    from simulator.plan import PartitionPlan

CAPS = ExactCaps(max_sets=4_000, max_states=4_000, max_costed=1_000)
"""The work caps of every point (a fiftieth of the default `DEFAULT_CAPS` sets and states, a
twentieth of its costing: the sweep fits in minutes on two busy cores)."""
CONTEXTS = (256, 1024, 4096)
PROMPTS = (64, 256, 1024)
BUFFERS = (256 * 1024, 1024 * 1024)
SCHEMES = ("lbdf", "brr", "hybrid")
FIELDS = ("phase", "tokens", "buffer_bytes", "scheme", "dram_bytes", "optimal", "cap_reason",
          "lbl_bytes", "lower_bound_bytes", "groups", "seconds")


def points() -> list[tuple[str, int, int, str]]:
    """(phase, tokens, buffer, scheme) of every point, in sweep order."""
    return [(phase, n, b, s) for phase, lengths in (("decode", CONTEXTS), ("prefill", PROMPTS))
            for n in lengths for b in BUFFERS for s in SCHEMES]


def solve_point(phase: str, tokens: int, buffer: int, scheme: str,
                members: Mapping[str, PartitionPlan] | None = None
                ) -> tuple[dict[str, object], PartitionPlan]:
    """One point's figures (`FIELDS`) and its plan. A hybrid point starts from its own
    segment DP and greedy plans and from `members`, the LBDF and BRR points' plans by scheme
    (valid hybrid plans), instead of re-solving each member's optimum under the default caps;
    each is named ``<scheme>_point`` in the reasons ("a descent from lbdf_point")."""
    from search.baselines import greedy_fusion, segment_dp
    from search.exact.solver import optimum, plan_incumbent
    from simulator.cost import CostCache, evaluate_plan
    from simulator.cost.traffic import compulsory_bytes
    from simulator.hw import load_hw
    from simulator.plan import layer_by_layer
    from simulator.workload.loader import load

    graph = load(f"llama_tiny_{phase}@{tokens}")
    hw = replace(load_hw("edge-npu"), buffer_bytes=buffer)
    cache = CostCache(graph, hw, scheme)
    start = time.process_time()
    incumbents = None
    if members:  # the hybrid's own segment DP and greedy plans, and the members' plans
        plans = [("segment_dp", segment_dp(graph, cache).plan),
                 ("greedy_fit", greedy_fusion(graph, cache, False)),
                 *((f"{name}_point", p) for name, p in members.items())]
        incumbents = [inc for name, p in plans
                      if (inc := plan_incumbent(graph, cache, p, name)) is not None]
    best = optimum(graph, cache, caps=CAPS, incumbents=incumbents)
    lbl = evaluate_plan(graph, layer_by_layer(graph), hw, "lbl")
    return {"phase": phase, "tokens": tokens, "buffer_bytes": buffer, "scheme": scheme,
            "dram_bytes": best.dram_bytes, "optimal": best.optimal,
            "cap_reason": best.cap_reason, "lbl_bytes": lbl.dram_bytes,
            "lower_bound_bytes": compulsory_bytes(graph, range(len(graph)), hw.dtype_bytes),
            "groups": len(best.plan.groups),
            "seconds": round(time.process_time() - start, 1)}, best.plan


def figure(rows: list[dict[str, str]], path: Path) -> None:
    """DRAM (MiB) against C (decode, left) and L (prefill, right) in the house style
    (`fusion_dse.figure_style`): a colour per dataflow, a line style per buffer, the compulsory
    lower bound dotted, one legend below the panels, a two-line title naming the hardware and
    what was searched."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fusion_dse.figure_style import (
        DRAM_LABEL,
        color_of,
        legend_outside,
        mib,
        size_text,
        styled,
    )

    @styled
    def draw() -> plt.Figure:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), layout="constrained")
        lines = {BUFFERS[0]: "-", BUFFERS[1]: "--"}
        for ax, phase, label in ((axes[0], "decode", "context C (tokens in the KV cache)"),
                                 (axes[1], "prefill", "prompt length L (tokens)")):
            mine = [r for r in rows if r["phase"] == phase]
            for buffer in BUFFERS:
                for scheme in SCHEMES:
                    pts = sorted((int(r["tokens"]), mib(int(r["dram_bytes"]))) for r in mine
                                 if r["scheme"] == scheme and int(r["buffer_bytes"]) == buffer)
                    if pts:
                        ax.plot(*zip(*pts, strict=True), lines[buffer], marker="o", ms=3,
                                color=color_of(scheme, SCHEMES),
                                label=f"{scheme.upper()}, buffer {size_text(buffer)}")
            bound = sorted({(int(r["tokens"]), mib(int(r["lower_bound_bytes"]))) for r in mine})
            if bound:
                ax.plot(*zip(*bound, strict=True), ":", color="black",
                        label="compulsory lower bound")
            ax.set_xscale("log", base=2)
            ax.set_xlabel(label)
            ax.set_ylabel(f"best plan's {DRAM_LABEL}")
            ax.set_title(f"llama_tiny_{phase}")
        fig.suptitle("llama_tiny (2 layers, width 256, 8 query / 2 KV heads) on edge-npu, int8, "
                     f"buffers {size_text(BUFFERS[0])} and {size_text(BUFFERS[1])}\n"
                     f"best plan of the exact solver within {CAPS.max_sets:,} sets and "
                     f"{CAPS.max_costed:,} costed per point (proven only where marked in the "
                     "table)")
        handles, labels = axes[1].get_legend_handles_labels()
        legend_outside(fig, handles, labels, ncols=4)
        return fig

    fig = draw()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def markdown(rows: list[dict[str, str]]) -> str:
    """The points as a table: DRAM in MB (10^6 bytes) per phase, tokens, buffer and scheme,
    the layer-by-layer plan and the compulsory lower bound beside them."""
    from fusion_dse.figure_style import size_text

    head = ("| phase | tokens | buffer | scheme | best DRAM, MB | optimum | layer by layer, MB | "
            "lower bound, MB | best / lower bound |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        dram, bound = int(r["dram_bytes"]), int(r["lower_bound_bytes"])
        status = "proven" if r["optimal"] == "True" else \
            "at the lower bound" if dram == bound else "capped"
        lines.append(f"| {r['phase']} | {int(r['tokens']):,} | "
                     f"{size_text(int(r['buffer_bytes']))} | {r['scheme']} | {dram / 1e6:.3f} | "
                     f"{status} | {int(r['lbl_bytes']) / 1e6:.3f} | {bound / 1e6:.3f} | "
                     f"{dram / bound:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", type=Path, required=True, help="CSV of the points (written)")
    p.add_argument("--figure", type=Path, help="PNG drawn from the store")
    p.add_argument("--markdown", type=Path, help="the points as a markdown table (written)")
    p.add_argument("--render-only", action="store_true",
                   help="draw the figure and the table from --store")
    args = p.parse_args(argv)
    if not args.render_only:
        rows, plans = [], {}
        for phase, tokens, buffer, scheme in points():
            members = {s: plans[(phase, tokens, buffer, s)] for s in SCHEMES[:2]} \
                if scheme == "hybrid" else None
            row, plans[(phase, tokens, buffer, scheme)] = solve_point(phase, tokens, buffer,
                                                                      scheme, members)
            rows.append(row)
            print(", ".join(f"{k}={v}" for k, v in rows[-1].items() if k != "cap_reason"),
                  flush=True)
        args.store.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.store.with_suffix(".tmp")
        with tmp.open("w", newline="") as f:
            w = csv.DictWriter(f, FIELDS)
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, args.store)
    with args.store.open() as f:
        rows = list(csv.DictReader(f))
    if args.figure:
        figure(rows, args.figure)
    if args.markdown:
        args.markdown.write_text(markdown(rows), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
