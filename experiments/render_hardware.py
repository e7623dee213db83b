"""Render the hardware trade-off sweep (experiments/specs/hardware.yaml; docs/hardware.md).

    python experiments/render_hardware.py STORE [--out experiments/results/hardware]
        [--image docs/images/hardware-tradeoff.png] [--image-models resnet50,mobilenet_v2,vgg16]
        [--within 5%]

Writes into --out: ``tradeoff.png`` (a row per network: DRAM, latency, energy and SRAM area
against buffer size, per dataflow), ``recommended.md`` and ``recommended.csv`` (per network and
metric, energy and latency: the smallest buffer within --within of the best, its dataflow, its
value, and the best's), ``curves.csv`` (every network's best value per buffer and metric, the
curves the recommendations are read from); --image: the panels of --image-models. Every file
is recorded in experiments/results/provenance.json with the store's points.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import provenance  # noqa: E402 - experiments/ is not a package

from fusion_dse.figure_style import size_text  # noqa: E402
from fusion_dse.sweep import load_sweep  # noqa: E402
from fusion_dse.sweep.plots import save_figure, tradeoff_figure  # noqa: E402
from fusion_dse.sweep.tradeoff import METRICS, parse_within, recommend, with_figures  # noqa: E402

PANELS = ("dram", "cycles", "energy", "area")
RECOMMEND = ("energy", "cycles")


def recommendations(frame: pd.DataFrame, within: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per network and metric of `RECOMMEND`: the recommendation, and the curves read."""
    figures = with_figures(frame)
    rows, curves = [], []
    for model in sorted(set(figures["model"])):
        for metric in RECOMMEND:
            r = recommend(figures, metric, within, model=model)
            m = METRICS[metric]
            rows.append({"model": model, "metric": metric, "unit": m.unit,
                         "buffer_bytes": r.buffer_bytes, "buffer": size_text(r.buffer_bytes),
                         "dataflow": r.scheme, "value": r.value,
                         "vs_best": r.value / r.best_value - 1,
                         "best_buffer": size_text(r.best_buffer), "best_dataflow": r.best_scheme,
                         "best_value": r.best_value})
            curves.append(r.curve.assign(model=model, metric=metric, unit=m.unit))
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def markdown(table: pd.DataFrame, within: float) -> str:
    """The recommendations as a Markdown table, a row per network."""
    lines = [f"Smallest buffer within {within:.0%} of the best, and its dataflow "
             "(edge-npu, 45 nm SRAM model; docs/hardware.md)", "",
             "| network | energy: buffer | dataflow | mJ (vs best) | best at | "
             "latency: buffer | dataflow | ms (vs best) | best at |",
             "|---|---|---|---|---|---|---|---|---|"]
    for model, part in table.groupby("model", sort=True):
        cells = []
        for metric in RECOMMEND:
            r = part[part["metric"] == metric].iloc[0]
            cells += [r["buffer"], r["dataflow"].upper(),
                      f"{r['value']:.4g} ({r['vs_best']:+.1%})",
                      f"{r['best_buffer']} {r['best_dataflow'].upper()}"]
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Render the store's trade-offs and recommendations."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store", metavar="STORE")
    p.add_argument("--out", type=Path, default=Path("experiments/results/hardware"))
    p.add_argument("--image", type=Path, default=Path("docs/images/hardware-tradeoff.png"))
    p.add_argument("--image-models", default="resnet50,mobilenet_v2,vgg16")
    p.add_argument("--within", default="5%")
    args = p.parse_args(argv)
    command = ["python", "experiments/render_hardware.py",
               *(sys.argv[1:] if argv is None else argv)]
    within = parse_within(args.within)
    frame = load_sweep(args.store, blobs=True)
    frame = frame[frame["status"] == "done"]
    args.out.mkdir(parents=True, exist_ok=True)
    written = [save_figure(tradeoff_figure(frame, PANELS)[0], args.out / "tradeoff.png")]
    shown = frame[frame["model"].isin(args.image_models.split(","))]
    written.append(save_figure(tradeoff_figure(shown, PANELS)[0], args.image))
    table, curves = recommendations(frame, within)
    table.to_csv(args.out / "recommended.csv", index=False)
    curves.to_csv(args.out / "curves.csv", index=False)
    (args.out / "recommended.md").write_text(markdown(table, within), encoding="utf-8")
    written += [args.out / "recommended.csv", args.out / "curves.csv",
                args.out / "recommended.md"]
    provenance.record_outputs(written, argv=command, inputs=[args.store], rows=frame)
    print(markdown(table, within))
    print("written: " + ", ".join(shlex.quote(str(w)) for w in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
