"""Figures from a sweep store: trade-off, budget, Pareto fronts and dataflow comparison.

Each kind is a pair: ``<kind>_data(frame)`` computes what is drawn (a DataFrame, tested) and
``<kind>_figure(frame)`` draws it and returns ``(Figure, data)``. `save_figure` writes PNG,
SVG or PDF by the file's extension. Every figure's title names the hardware and the budget.
The frame is `fusion_dse.load_sweep(path, blobs=True)` (the budget and Pareto figures read
the history and front blobs).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from fusion_dse.figure_style import (
    DRAM_LABEL,
    OKABE_ITO,
    color_of,
    kib,
    legend_outside,
    mib,
    run_label,
    search_label,
    size_text,
    styled,
)
from fusion_dse.outputs import check_figure_file
from simulator.errors import InputError

__all__ = ["KINDS", "budget_data", "budget_figure", "compare_data", "compare_figure",
           "pareto_data", "pareto_figure", "save_figure", "tradeoff_data", "tradeoff_figure"]

_RUN = ["scheme", "search", "repair"]


def _done(frame: pd.DataFrame) -> pd.DataFrame:
    """The finished points, ``graph_stages`` spelled out (``none`` where the store has NULL):
    figures of different graphs are never mixed in one line, reference or cell."""
    done = frame[frame["status"] == "done"]
    stages = done["graph_stages"] if "graph_stages" in done else pd.Series("none", done.index)
    return done.assign(graph_stages=stages.fillna("none").astype(str))


def _stages_label(stages: str, several: bool) -> str:
    """`` [graph stages X]`` when the store holds several graph-stage settings, else ''."""
    return f" [{stages}]" if several else ""


def _searched(frame: pd.DataFrame) -> pd.DataFrame:
    done = _done(frame)
    return done[done["search"].notna()]


def _caption(frame: pd.DataFrame) -> str:
    """'M on X, buffers B' / 'searches; budget N plans; S seeds' for a figure title: the
    models, hardware, buffers and what was searched."""
    done = _done(frame)
    hws = ", ".join(sorted(set(done["hw_name"].dropna().astype(str)))) or "?"
    models = ", ".join(sorted(set(done["model"].dropna().astype(str)))) or "?"
    sizes = sorted({int(b) for b in done["buffer_bytes"].dropna()})
    buffers = (f"buffer {size_text(sizes[0])}" if len(sizes) == 1 else
               f"buffers {size_text(sizes[0])}..{size_text(sizes[-1])} ({len(sizes)})"
               if sizes else "no buffer")
    budgets = sorted({int(b) for b in done["budget"].dropna()})
    seeds = done["seed"].dropna().nunique()
    budget = (f"budget {budgets[0]:,} plans" if len(budgets) == 1
              else f"budgets {', '.join(f'{b:,}' for b in budgets)} plans" if budgets
              else "no search")
    labels = sorted({search_label(None if pd.isna(a) else a, None if pd.isna(r) else r)
                     for a, r in zip(done["search"], done["repair"], strict=True)
                     if not pd.isna(a)})
    # more than three settings would run off the figure: the legend names them
    searched = "; ".join(labels) if len(labels) <= 3 else f"{len(labels)} search settings"
    return (f"{models} on {hws}, {buffers}\n{searched or 'layer by layer'}; {budget}"
            + (f"; {seeds} seed(s)" if seeds else ""))


def _panels(n: int, title: str, sharey: bool = False) -> tuple[Figure, list]:
    cols = min(3, max(1, n))
    rows = -(-n // cols)
    fig = Figure(figsize=(max(6.0, 4.2 * cols) + 2.6, 3.3 * rows + 0.9), layout="constrained")
    axes = list(np.atleast_1d(fig.subplots(rows, cols, squeeze=False,
                                           sharey=sharey)).ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title)
    return fig, axes[:n]


def _require(frame: pd.DataFrame, what: str) -> None:
    if frame.empty:
        raise InputError(f"the store has no {what} to plot")


# --- trade-off ------------------------------------------------------------------------------


def tradeoff_data(frame: pd.DataFrame, metric: str = "dram") -> dict[str, pd.DataFrame]:
    """`metric` (`fusion_dse.sweep.tradeoff.METRICS`) against buffer size, each line and
    reference of one graph (graph stages).

    Returns:
        ``lines``: per model, scheme, search, repair, graph stages and buffer, the mean, min
        and max of the metric's column over seeds (``n`` runs); ``references``: per model,
        graph stages and buffer, layer by layer (``lbl``: the lbl points of those graph
        stages, else, for DRAM, the searched points' own reference, costed on the graph they
        ran on) and, for DRAM, the compulsory lower bound (``lower_bound``).
    """
    from fusion_dse.sweep.tradeoff import METRICS, check_metric, with_figures

    m = METRICS[metric]
    done = _done(frame)
    _require(done, "finished points")
    if m.name != "dram":
        done = with_figures(done)
        check_metric(done, m)
    searched = done[done["search"].notna()]
    lines = (searched.groupby(["model", *_RUN, "graph_stages", "buffer_bytes"])[m.column]
             .agg(mean="mean", min="min", max="max", n="count").reset_index())
    cell = ["model", "graph_stages", "buffer_bytes"]
    lbl_points = done[done["search"].isna()].groupby(cell)[m.column].min()
    if m.name != "dram":
        return {"lines": lines, "references": lbl_points.rename("lbl").reset_index()}
    own = done.groupby(cell)["lbl_dram_bytes"].min()
    refs = pd.DataFrame({"lbl": lbl_points.reindex(own.index).fillna(own).astype("Int64"),
                         "lower_bound": done.groupby(cell)["lower_bound_bytes"].min()})
    return {"lines": lines, "references": refs.reset_index()}


@styled
def tradeoff_figure(frame: pd.DataFrame, metrics: tuple[str, ...] = ("dram",)
                    ) -> tuple[Figure, dict[str, Any]]:
    """A panel per model and metric (`fusion_dse.sweep.tradeoff.METRICS`; one metric: a
    panel per model, several: a row per model, a column per metric): the mean with a min-max
    band over seeds, layer by layer and (DRAM) the lower bound; one colour per run setting in
    every panel, one legend beside the panels.

    Returns:
        The figure and `tradeoff_data`: of the metric, or of each metric by name.
    """
    from fusion_dse.sweep.tradeoff import METRICS

    data = {m: tradeoff_data(frame, m) for m in metrics}
    models = sorted(set().union(*(set(d["lines"]["model"]) | set(d["references"]["model"])
                                  for d in data.values())))
    first = data[metrics[0]]
    several = pd.concat([d["lines"]["graph_stages"] for d in data.values()]).nunique() > 1
    runs = sorted({tuple(r) for r in first["lines"][[*_RUN, "graph_stages"]]
                   .itertuples(index=False)})
    searches = sorted({r[1] for r in runs})
    what = (f"{METRICS[metrics[0]].label} against buffer size" if len(metrics) == 1 else
            f"{', '.join(METRICS[m].label for m in metrics)} against buffer size")
    title = f"{what[0].upper()}{what[1:]}\n{_caption(frame)}"
    if len(metrics) == 1:
        fig, flat = _panels(len(models), title)
        grid = [[ax] for ax in flat]
    else:
        fig, flat = _grid(len(models), len(metrics), title)
        grid = [flat[k * len(metrics):(k + 1) * len(metrics)] for k in range(len(models))]
    for row, model in zip(grid, models, strict=True):
        for ax, metric in zip(row, metrics, strict=True):
            _tradeoff_panel(ax, data[metric], METRICS[metric], model, runs, searches, several)
            ax.set_title(model if len(metrics) == 1 else f"{model}: {METRICS[metric].label}")
    legend_outside(fig)
    return fig, data if len(metrics) > 1 else data[metrics[0]]


def _tradeoff_panel(ax, data: dict[str, pd.DataFrame], metric, model: str,  # noqa: ANN001
                    runs: list, searches: list, several: bool) -> None:
    """One model's lines of one metric (`tradeoff_figure`)."""
    lines, refs = data["lines"], data["references"]
    def scale(v: pd.Series) -> pd.Series:
        return v.astype(float) / metric.scale
    for run, part in lines[lines["model"] == model].groupby([*_RUN, "graph_stages"]):
        part = part.sort_values("buffer_bytes")
        label = run_label(*run[:3]) + _stages_label(run[3], several)
        color = color_of(tuple(run), runs) if tuple(run) in runs else "0.3"
        dash = _DASHES[searches.index(run[1]) % len(_DASHES)] if run[1] in searches else "-"
        ax.plot(part["buffer_bytes"], scale(part["mean"]), marker="o", ms=3, color=color,
                ls=dash, label=label)  # equal lines stay visible: a dash per search
        ax.fill_between(part["buffer_bytes"], scale(part["min"]), scale(part["max"]),
                        color=color, alpha=0.2, lw=0)
    for stages, ref in refs[refs["model"] == model].groupby("graph_stages"):
        ref = ref.sort_values("buffer_bytes")
        tag = _stages_label(stages, several)
        ax.plot(ref["buffer_bytes"], scale(ref["lbl"]), color="0.45", ls=":",
                label=f"layer by layer{tag}")
        if "lower_bound" in ref:
            ax.plot(ref["buffer_bytes"], scale(ref["lower_bound"]), color="black", ls="--",
                    lw=1, label=f"compulsory lower bound{tag}")
    _buffer_axis(ax)
    ax.set_ylabel(DRAM_LABEL if metric.name == "dram" else metric.axis)


def _grid(rows: int, cols: int, title: str) -> tuple[Figure, list]:
    """`rows` x `cols` panels, row-major."""
    fig = Figure(figsize=(3.6 * cols + 2.6, 2.7 * rows + 0.9), layout="constrained")
    axes = list(np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel())
    fig.suptitle(title)
    return fig, axes


_DASHES = ["-", (0, (5, 2)), (0, (1, 1.5)), "-."]
"""Line styles of the searches of a trade-off figure: two searches that reach the same DRAM
draw one line over the other, both seen."""


def _buffer_axis(ax) -> None:  # noqa: ANN001 - a matplotlib Axes
    """A log2 axis of buffer sizes, labelled as the inputs spell them (64 KiB, 2 MiB)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_text(v)))
    ax.tick_params(axis="x", labelrotation=45)  # 8 sizes side by side
    ax.set_xlabel("buffer size")


# --- budget ---------------------------------------------------------------------------------


def _history(blob: str | None) -> pd.DataFrame:
    return pd.read_json(io.StringIO(blob), orient="split") if blob else pd.DataFrame()


def budget_data(frame: pd.DataFrame) -> pd.DataFrame:
    """Best DRAM of the fuseable ops so far against plans evaluated (Mills et al. Fig. 5).

    Returns:
        Per model, scheme, search, repair, buffer and evaluation: mean, min and max over
        seeds of ``best_dram_bytes_fuseable``.
    """
    searched = _searched(frame)
    parts = []
    for _, row in searched.iterrows():
        h = _history(row.get("history"))
        if h.empty:
            continue
        parts.append(pd.DataFrame({
            **{c: row[c] for c in ["model", *_RUN, "buffer_bytes", "seed"]},
            "evaluation": h["evaluation"], "best": h["best_dram_bytes_fuseable"]}))
    if not parts:
        raise InputError("the store has no search histories to plot")
    runs = pd.concat(parts, ignore_index=True)
    return (runs.groupby(["model", *_RUN, "buffer_bytes", "evaluation"])["best"]
            .agg(mean="mean", min="min", max="max").reset_index())


@styled
def budget_figure(frame: pd.DataFrame) -> tuple[Figure, pd.DataFrame]:
    """Facets, not a tangle: one panel per model and buffer, one line per run setting
    (dataflow, search, repair: the same colour in every panel, one legend beside them),
    mean over seeds with a min-max band; the plans axis is logarithmic (the curves flatten
    within the first plans) and each panel's DRAM axis its own (buffers differ tenfold)."""
    data = budget_data(frame)
    cells = sorted({(m, int(b)) for m, b in zip(data["model"], data["buffer_bytes"],
                                                 strict=True)})
    runs = sorted({tuple(r) for r in data[_RUN].itertuples(index=False)})
    fig, axes = _panels(len(cells), f"Best DRAM traffic against plans evaluated\n"
                        f"{_caption(frame)}")
    for ax, (model, buffer) in zip(axes, cells, strict=True):
        cell = data[(data["model"] == model) & (data["buffer_bytes"] == buffer)]
        last = int(cell["evaluation"].max())
        for run, part in cell.groupby(_RUN):
            color = color_of(tuple(run), runs)
            if len(part) == 1:  # one plan: the optimum proven at plan 1, level to the end
                ax.plot([1, max(last, 2)], mib(part["mean"].iloc[[0, 0]]), color=color,
                        ls="--", marker="o", markevery=[0], label=f"{run_label(*run)} "
                        "(one plan)")
                continue
            ax.step(part["evaluation"], mib(part["mean"]), where="post", color=color,
                    label=run_label(*run))
            ax.fill_between(part["evaluation"], mib(part["min"]), mib(part["max"]),
                            step="post", color=color, alpha=0.2, lw=0)
        if cell["evaluation"].max() > 50:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_title(f"{model}, buffer {size_text(buffer)}")
        ax.set_xlabel("partition plans evaluated")
        ax.set_ylabel(f"best {DRAM_LABEL}, fuseable ops")
    legend_outside(fig)
    return fig, data


# --- pareto ---------------------------------------------------------------------------------


def pareto_data(frame: pd.DataFrame) -> pd.DataFrame:
    """The Pareto fronts of the two-objective points, one row per front plan.

    Returns:
        Columns model, scheme, search, repair, buffer_bytes, seed, objectives, ``x`` (the
        second objective's value), ``dram_bytes``.
    """
    searched = _searched(frame)
    parts = []
    for _, row in searched[searched["pareto"].notna()].iterrows():
        front = _history(row["pareto"])
        second = front.columns[2]
        parts.append(pd.DataFrame({
            **{c: row[c] for c in ["model", *_RUN, "buffer_bytes", "seed", "objectives"]},
            "x": front[second], "dram_bytes": front["dram_bytes"]}))
    if not parts:
        raise InputError("the store has no two-objective points (objectives: dram,mbu or "
                         "dram,cycles) to plot")
    return pd.concat(parts, ignore_index=True)


_SECOND_AXIS = {"mbu": ("buffer the fused groups need (KiB)", kib),
                "cycles": ("cycles (millions)", lambda v: v / 1e6)}
"""The second objective's axis label and scale: the same units as a run's pareto.png."""


@styled
def pareto_figure(frame: pd.DataFrame) -> tuple[Figure, pd.DataFrame]:
    """One panel per model and objective pair: the fronts overlaid (buffer need in KiB,
    cycles in millions, DRAM in MiB, as in a run's pareto.png)."""
    data = pareto_data(frame)
    panels = sorted(set(zip(data["model"], data["objectives"], strict=True)))
    runs = sorted({tuple(r) for r in data[[*_RUN, "buffer_bytes", "seed"]]
                   .itertuples(index=False)})
    fig, axes = _panels(len(panels), f"Pareto fronts\n{_caption(frame)}")
    for ax, (model, objectives) in zip(axes, panels, strict=True):
        part = data[(data["model"] == model) & (data["objectives"] == objectives)]
        second = objectives.split(",")[1].strip()
        label, scale = _SECOND_AXIS.get(second, (second, lambda v: v))
        for run, front in part.groupby([*_RUN, "buffer_bytes", "seed"]):
            front = front.sort_values("x")
            ax.step(scale(front["x"]), mib(front["dram_bytes"]), where="post", marker="o",
                    ms=3, color=color_of(tuple(run), runs),
                    label=f"{run_label(*run[:3])}, {size_text(run[3])}, seed {run[4]}")
        ax.set_xlabel(label)
        ax.set_ylabel(DRAM_LABEL)
        ax.set_title(f"{model}: DRAM against {second}")
    legend_outside(fig)
    return fig, data


# --- compare --------------------------------------------------------------------------------


def compare_data(frame: pd.DataFrame) -> pd.DataFrame:
    """The best dataflow per model and buffer, with its saving over each other scheme.

    A scheme's DRAM in a cell is the least DRAM any of its points reached there (any search,
    repair, seed). A cell is one graph: its model after one graph-stages setting (layer by
    layer included), so no saving compares plans of different graphs. Returns one row per
    model, graph stages and buffer: ``best`` (scheme), ``best_dram``, ``dram_<scheme>`` per
    scheme, and ``saving_<scheme>`` = 1 - best / that scheme's DRAM.
    """
    done = _done(frame)
    _require(done, "finished points")
    cell = (done.groupby(["model", "graph_stages", "buffer_bytes", "scheme"])["dram_bytes"]
            .min().unstack("scheme"))
    schemes = list(cell.columns)
    out = pd.DataFrame(index=cell.index)
    out["best"] = cell.idxmin(axis=1)
    out["best_dram"] = cell.min(axis=1)
    for s in schemes:
        out[f"dram_{s}"] = cell[s]
        out[f"saving_{s}"] = 1 - out["best_dram"] / cell[s]
    return out.reset_index()


_SCHEME_COLORS = {"lbdf": OKABE_ITO[0], "brr": OKABE_ITO[1], "lbl": "0.6"}


@styled
def compare_figure(frame: pd.DataFrame) -> tuple[Figure, pd.DataFrame]:
    """A models x buffers grid: the best dataflow in each cell and its saving over the rest."""
    data = compare_data(frame)
    several = data["graph_stages"].nunique() > 1
    data = data.assign(row=[f"{m}{_stages_label(g, several)}"
                            for m, g in zip(data["model"], data["graph_stages"], strict=True)])
    models = sorted(set(data["row"]))
    buffers = sorted(set(data["buffer_bytes"]))
    schemes = [c[len("dram_"):] for c in data.columns if c.startswith("dram_")]
    fig = Figure(figsize=(max(8.0, 1.8 + 1.6 * len(buffers)), 1.6 + 0.7 * len(models)),
                 layout="constrained")
    ax = fig.add_subplot()
    for _, row in data.iterrows():
        x, y = buffers.index(row["buffer_bytes"]), models.index(row["row"])
        others = [f"-{row[f'saving_{s}']:.0%} vs {s}" for s in schemes
                  if s != row["best"] and pd.notna(row[f"saving_{s}"])]
        ax.add_patch(_cell(x, y, _SCHEME_COLORS.get(row["best"], OKABE_ITO[2])))
        ax.text(x, y, "\n".join([row["best"].upper(), *others]), ha="center", va="center",
                fontsize=7)
    ax.set_xlim(-0.5, len(buffers) - 0.5)
    ax.set_ylim(len(models) - 0.5, -0.5)
    ax.set_xticks(range(len(buffers)), [size_text(b) for b in buffers])
    ax.set_yticks(range(len(models)), models)
    ax.set_xlabel("buffer size")
    ax.grid(False)
    fig.suptitle(f"Best dataflow (least DRAM) and its saving\n{_caption(frame)}")
    return fig, data.drop(columns="row")


def _cell(x: int, y: int, color: str):  # noqa: ANN202 - a matplotlib Rectangle
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=color, alpha=0.35, edgecolor="white")


KINDS: dict[str, Callable[[pd.DataFrame], tuple[Figure, object]]] = {
    "tradeoff": tradeoff_figure,
    "budget": budget_figure,
    "pareto": pareto_figure,
    "compare": compare_figure,
}
"""The plot kinds of ``fusion-dse plot``."""



def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write `fig` as PNG, SVG or PDF by the extension of `path`, whole or not at all (a
    temporary file beside it, then renamed: `fusion_dse.outputs.atomic_file`).

    Raises:
        InputError: another extension, or the file cannot be written (an earlier file there is
            left as it was).
    """
    from fusion_dse.outputs import atomic_file

    out = check_figure_file(path)
    try:
        with atomic_file(out) as tmp:
            fig.savefig(tmp, dpi=200, format=out.suffix.lower().lstrip("."))
    except OSError as err:
        raise InputError(f"cannot write {str(out)!r}: {err.strerror or err}") from err
    return out
