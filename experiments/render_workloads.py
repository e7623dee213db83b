"""Render the resolution and sequence-length sweeps of issue [workloads] (Deliver 4).

    python experiments/render_workloads.py \
        --resolution experiments/results/workloads-resolution.sqlite \
        --sequence experiments/results/workloads-sequence.sqlite \
        --out experiments/results/workloads --figures docs/images

Per network, dataflow and input size: the whole-network DRAM of the best plan (mean over the
seeds, with their min and max; the same value at every seed where `auto` proved the optimum),
whether it is the proven optimum, the layer-by-layer figure and the compulsory lower bound,
written as Markdown tables (`resolution.md`, `sequence.md`) and as figures (`resolution.png`,
`sequence.png`: DRAM against input size, log-log, with the layer-by-layer figure dotted and
the compulsory lower bound dashed; both are the same for LBDF and BRR).

With ``--doc docs/workloads.md`` each table also replaces the one between the doc's
``<!-- resolution-table -->`` / ``<!-- /resolution-table -->`` (``sequence-table``) markers.

A store may be given by its export (``.sql.gz``, `experiments/stores.py`). The files written
inside the repository are recorded in ``experiments/results/provenance.json`` with the
cost-model fingerprint of the points (`experiments/provenance.py`); so is the doc when its
tables are replaced (without a content digest: its prose is edited by hand).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import provenance  # noqa: E402
import stores  # noqa: E402

_NAMES = {"mobilenet_v2": "MobileNetV2", "resnet50": "ResNet-50",
          "deeplabv3_mobilenet_v3_large": "DeepLabV3-MobileNetV3-L", "bert_base": "BERT-base",
          "vit_b_16": "ViT-B/16"}


def _size(row: pd.Series, kind: str) -> tuple[str, int, int]:
    """(network, x, resolution or tokens as given) of a point."""
    model = str(row["model"])
    base, _, at = model.partition("@")
    if kind == "resolution":
        h = int(str(row["input_shape"]).split(",")[2])
        return base, h, h
    if base == "vit_b_16":
        r = int(at)
        return base, (r // 16) ** 2 + 1, r
    return base, int(at), int(at)


def points(store: Path) -> pd.DataFrame:
    """The done points of a store or an export (every column)."""
    path = stores.resolve(store)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:  # read while a sweep runs
        return pd.read_sql("SELECT * FROM points WHERE status = 'done'", con)


def summarise(store: Path, kind: str, df: pd.DataFrame | None = None) -> pd.DataFrame:
    df = points(store) if df is None else df
    if df.empty:
        raise SystemExit(f"render_workloads: no finished points in {store}")
    sizes = df.apply(lambda r: _size(r, kind), axis=1, result_type="expand")
    df["network"], df["x"], df["given"] = sizes[0], sizes[1], sizes[2]
    df["proven"] = df["summary"].map(
        lambda s: bool(json.loads(s).get("optimum", {}).get("optimal")) if s else False)
    rows = []
    order = {"lbdf": 0, "brr": 1}
    for (net, _, x), g in df.groupby(["network", df["scheme"].map(order), "x"], sort=True):
        scheme = str(g["scheme"].iloc[0])
        rows.append({
            "network": net, "scheme": scheme, "x": int(x), "given": int(g["given"].iloc[0]),
            "seeds": len(g), "dram_mean": g["dram_bytes"].mean(),
            "dram_min": int(g["dram_bytes"].min()), "dram_max": int(g["dram_bytes"].max()),
            "proven": bool(g["proven"].all()), "lbl": int(g["lbl_dram_bytes"].iloc[0]),
            "lower_bound": int(g["lower_bound_bytes"].iloc[0]),
            "seconds": g["search_seconds"].mean()})
    return pd.DataFrame(rows)


def _mb(b: float) -> str:
    return f"{b / 1e6:,.2f}"


def _status(r: object) -> str:
    """Whether the best plan is the optimum: proven by the exact solver at every seed, or equal
    to the compulsory lower bound (then optimal without a proof by the solver)."""
    if r.proven:  # type: ignore[attr-defined]
        return "proven"
    if r.dram_max == r.lower_bound:  # type: ignore[attr-defined]
        return "optimal (= lower bound)"
    return "not proven"


def markdown(t: pd.DataFrame, kind: str) -> str:
    xname = "resolution (px)" if kind == "resolution" else "tokens"
    lines = [f"| network | {xname} | scheme | seeds | best DRAM, MB (mean of seeds; min-max) | "
             "optimum | layer by layer, MB | lower bound, MB | best / lower bound | "
             "search s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in t.itertuples():
        x = f"{r.x:,}" if kind == "resolution" or r.network != "vit_b_16" \
            else f"{r.x:,} ({r.given} px)"
        spread = "" if r.dram_min == r.dram_max else \
            f" ({_mb(r.dram_min)}-{_mb(r.dram_max)})"
        lines.append(
            f"| {_NAMES.get(r.network, r.network)} | {x} | {r.scheme.upper()} | {r.seeds} | "
            f"{_mb(r.dram_mean)}{spread} | {_status(r)} | "
            f"{_mb(r.lbl)} | {_mb(r.lower_bound)} | {r.dram_mean / r.lower_bound:.2f}x | "
            f"{r.seconds:.0f} |")
    return "\n".join(lines) + "\n"


def figure(t: pd.DataFrame, kind: str, path: Path, title: str) -> None:
    nets = list(dict.fromkeys(t["network"]))
    fig, axes = plt.subplots(1, len(nets), figsize=(4.2 * len(nets), 3.6), squeeze=False)
    for ax, net in zip(axes[0], nets, strict=True):
        sub = t[t["network"] == net]
        for scheme, style in (("lbdf", "C0"), ("brr", "C3")):
            s = sub[sub["scheme"] == scheme].sort_values("x")
            if s.empty:
                continue
            ax.errorbar(s["x"], s["dram_mean"] / 1e6,
                        yerr=[(s["dram_mean"] - s["dram_min"]) / 1e6,
                              (s["dram_max"] - s["dram_mean"]) / 1e6],
                        color=style, marker="o", ms=4, capsize=2, label=f"{scheme.upper()} best")
        lb = sub.drop_duplicates("x").sort_values("x")  # both dataflows: the same references
        ax.plot(lb["x"], lb["lbl"] / 1e6, color="0.5", ls=":", lw=1.2, label="layer by layer")
        ax.plot(lb["x"], lb["lower_bound"] / 1e6, color="k", ls="--", lw=1,
                label="lower bound")
        ax.set_xscale("log", base=2)
        xs = sorted(set(sub["x"]))
        ax.set_xticks(xs, [f"{x:,}" for x in xs], fontsize=7)
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_yscale("log")
        ax.set_title(_NAMES.get(net, net), fontsize=10)
        ax.set_xlabel("input resolution (px)" if kind == "resolution" else "tokens")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("DRAM traffic (MB)")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def splice(doc: Path, kind: str, table: str) -> None:
    """Replace the table between the ``<!-- KIND-table -->`` markers of `doc` by `table`."""
    text = doc.read_text()
    start, end = f"<!-- {kind}-table -->\n", f"<!-- /{kind}-table -->"
    a, b = text.find(start), text.find(end)
    if a < 0 or b < a:
        raise SystemExit(f"render_workloads: {doc} has no {start.strip()} ... {end} markers")
    doc.write_text(text[:a + len(start)] + table + text[b:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--resolution", type=Path, help="store of experiments/specs/resolution.yaml")
    p.add_argument("--sequence", type=Path, help="store of experiments/specs/sequence.yaml")
    p.add_argument("--out", type=Path, default=Path("experiments/results/workloads"))
    p.add_argument("--figures", type=Path, default=Path("docs/images"))
    p.add_argument("--doc", type=Path, help="also replace the tables of this doc "
                   "(docs/workloads.md) between its <!-- KIND-table --> markers")
    args = p.parse_args(argv)
    if not (args.resolution or args.sequence):
        p.error("give --resolution and/or --sequence")
    args.out.mkdir(parents=True, exist_ok=True)
    command = ["python", "experiments/render_workloads.py",
               *(sys.argv[1:] if argv is None else argv)]
    used: list[pd.DataFrame] = []
    for kind, store, title in (
            ("resolution", args.resolution, "best plan's DRAM vs resolution (edge-npu, 1 MiB)"),
            ("sequence", args.sequence, "best plan's DRAM vs sequence length (edge-npu, 2 MiB)")):
        if store is None:
            continue
        if not store.exists():
            print(f"render_workloads: {store}: no such store", file=sys.stderr)
            return 2
        rows = points(store)
        t = summarise(store, kind, rows)
        (args.out / f"{kind}.md").write_text(markdown(t, kind))
        t.to_csv(args.out / f"{kind}.csv", index=False)
        figure(t, kind, args.figures / f"{kind}.png", title)
        if args.doc:
            splice(args.doc, kind, markdown(t, kind))
            used.append(rows)
        provenance.record_outputs([args.out / f"{kind}.md", args.out / f"{kind}.csv",
                                   args.figures / f"{kind}.png"], argv=command,
                                  inputs=[store], rows=rows, dram_only=True)
        print(f"{kind}: {len(t)} rows -> {args.out / (kind + '.md')}, "
              f"{args.figures / (kind + '.png')}")
    if args.doc:
        provenance.record_outputs([args.doc], argv=command, hashed=False, rows=pd.concat(used),
                                  dram_only=True,
                                  inputs=[s for s in (args.resolution, args.sequence) if s])
        print(f"tables of {args.doc} replaced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
