"""Dataset statistics: the Table I-style count per network and the Fig. 3-style validity plot.

Mills et al. report how many fusion groups they drew from each network (Table I) and the share
of valid groups as the buffer doubles from 128 KB to 2 MB, per network and dataflow (Fig. 3).
`dataset_table` and `plot_validity` give the same for a `Dataset`; `write_dataset_table` writes
the table as CSV and Markdown.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from explain.dataset import Dataset

__all__ = ["dataset_table", "markdown_table", "plot_validity", "validity_by_buffer",
           "write_dataset_table"]


def validity_by_buffer(ds: Dataset) -> pd.DataFrame:
    """Valid share in percent: one row per network, one column per buffer size (KiB)."""
    rows = {name: 100.0 * ds.labels[ds.network_index == k].mean(axis=0)
            for k, name in enumerate(ds.networks)}
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(ds.config.buffers_kib))


def dataset_table(ds: Dataset) -> pd.DataFrame:
    """Per network (and in total): groups, samples, group sizes and valid % per buffer size."""
    sizes = np.array([len(g) for g in ds.ops])
    n_buf = len(ds.config.buffers_kib)
    masks = [(name, ds.network_index == k) for k, name in enumerate(ds.networks)]
    masks.append(("total", np.ones(ds.num_groups, dtype=bool)))
    rows = []
    for name, m in masks:
        valid = 100.0 * ds.labels[m].mean(axis=0) if m.any() else np.zeros(n_buf)
        rows.append({
            "network": name, "groups": int(m.sum()), "samples": int(m.sum()) * n_buf,
            "mean ops": round(float(sizes[m].mean()), 1) if m.any() else 0.0,
            "ops": f"{sizes[m].min()}-{sizes[m].max()}" if m.any() else "",
            **{f"valid % @{kib} KiB": round(float(v), 1)
               for kib, v in zip(ds.config.buffers_kib, valid, strict=True)},
        })
    return pd.DataFrame(rows)


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub Markdown table of a data frame (numbers right-aligned)."""
    def cell(v: object) -> str:
        return f"{v:,}" if isinstance(v, (int, np.integer)) else str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    align = "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(df[c]) else "---"
                           for c in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([head, align, *body]) + "\n"


def write_dataset_table(df: pd.DataFrame, out_dir: str | Path, stem: str) -> list[Path]:
    """Write ``<stem>.csv`` and ``<stem>.md`` into `out_dir`; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv, md = out / f"{stem}.csv", out / f"{stem}.md"
    df.to_csv(csv, index=False)
    md.write_text(markdown_table(df))
    return [csv, md]


def plot_validity(datasets: Mapping[str, Dataset], path: str | Path) -> Path:
    """Valid % against buffer size, one line per network, one panel per dataflow (Fig. 3).

    Args:
        datasets: Datasets keyed by dataflow name (panel title).
        path: Image file to write (the format follows the suffix).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(n for ds in datasets.values() for n in ds.networks))
    colour = {n: plt.get_cmap("tab20" if len(names) > 10 else "tab10")(k)
              for k, n in enumerate(names)}  # one colour per network in every panel
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 4.2),
                             squeeze=False, sharey=True)
    for ax, (scheme, ds) in zip(axes[0], datasets.items(), strict=True):
        table = validity_by_buffer(ds)
        for name, row in table.iterrows():
            ax.plot(table.columns, row.values, marker="o", label=name, color=colour[name])
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(table.columns), [str(c) for c in table.columns])
        ax.set_xlabel("buffer size (KiB)")
        ax.set_title(f"{scheme.upper()}: valid fusion groups")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("valid groups (%)")
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_lines()}
    fig.legend(handles.values(), handles.keys(), loc="center left", bbox_to_anchor=(1.0, 0.5),
               fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
