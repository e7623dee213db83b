"""Figures an architect looks at (matplotlib, Agg backend: files only, no display needed).

A search run's budget curve and Pareto front (`budget_figure`, `pareto_figure`, written by
`fusion_dse.optimization.write_outputs`), the simulator's occupancy, bandwidth and Gantt plot
(`plot_simulation`) and a group's explanation (`plot_explanation`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from fusion_dse.figure_style import (  # noqa: E402
    DRAM_LABEL,
    OKABE_ITO,
    kib,
    legend_outside,
    mib,
    search_label,
    size_text,
    styled,
    title_of,
)
from search.result import SearchResult, SearchSummary  # noqa: E402
from simulator.engine.report import SimReport  # noqa: E402
from simulator.scheme import Scheme  # noqa: E402

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["budget_data", "budget_figure", "pareto_data", "pareto_figure", "plot_explanation",
           "plot_simulation"]


@styled
def plot_simulation(report: SimReport, path: str | Path, title: str, buffer_bytes: int,
                    bins: int = 400) -> None:
    """Buffer occupancy and DRAM bandwidth over time with group boundaries, and a Gantt row
    per group (coloured by what bounds it)."""
    ms = 1e3 / report.clock_hz
    end = max(report.cycles, 1)
    fig, (occ, bw, gantt) = plt.subplots(
        3, 1, sharex=True, figsize=(12, 8), gridspec_kw={"height_ratios": [3, 2, 3]},
        layout="constrained")
    _occupancy(occ, report, ms, buffer_bytes)
    _bandwidth(bw, report, ms, end, bins)
    _gantt(gantt, report, ms)
    for ax in (occ, bw):
        for g in report.groups:
            ax.axvline(g.start * ms, color="0.85", linewidth=0.5, zorder=0)
    gantt.set_xlabel("time (ms)")
    fig.suptitle(title)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _occupancy(ax, report: SimReport, ms: float, buffer_bytes: int) -> None:
    t = np.array([c for c, _ in report.occupancy], dtype=float) * ms
    level = np.array([v for _, v in report.occupancy], dtype=float) / 1024
    ax.step(t, level, where="post", linewidth=0.8, color=OKABE_ITO[0], label="occupancy")
    alone = [g for g in report.groups if g.mode == Scheme.LBL]
    for k, g in enumerate(alone):  # ops on their own: streamed or tiled to the buffer
        ax.axvspan(g.start * ms, g.end * ms, color="0.9", zorder=0,
                   label="layer by layer" if k == 0 else None)
    ax.axhline(buffer_bytes / 1024, color=OKABE_ITO[3], linestyle="--", linewidth=1,
               label=f"buffer {size_text(buffer_bytes)}")
    ax.set_ylabel("buffer occupancy (KiB)")
    legend_outside(ax)


def _bandwidth(ax, report: SimReport, ms: float, end: int, bins: int) -> None:
    edges = np.linspace(0, end, bins + 1)
    for write, label in ((False, "read"), (True, "write")):
        moved = _bytes_moved_by(report, write, edges)
        ax.stairs(np.diff(moved) / np.diff(edges), edges * ms, label=label, fill=True,
                  alpha=0.6)
    ax.set_ylabel("DRAM (B/cycle)")
    legend_outside(ax)


def _bytes_moved_by(report: SimReport, write: bool, times: np.ndarray) -> np.ndarray:
    """Cumulative bytes moved by each time: every transfer spreads its bytes evenly over the
    cycles it holds the channel (transfers never overlap, so the curve is monotone)."""
    chosen = [t for t in report.transfers if t.write == write]
    if not chosen:
        return np.zeros_like(times)
    knots_t = np.array([[t.start, t.end] for t in chosen], dtype=float).ravel()
    done = np.cumsum([t.nbytes for t in chosen], dtype=float)
    knots_b = np.column_stack([np.concatenate(([0.0], done[:-1])), done]).ravel()
    order = np.argsort(knots_t, kind="stable")
    return np.interp(times, knots_t[order], knots_b[order])


def _gantt(ax, report: SimReport, ms: float) -> None:
    colors = {"compute": OKABE_ITO[2], "dram": OKABE_ITO[1]}
    for row, g in enumerate(report.groups):
        ax.barh(row, max(g.cycles, 1) * ms, left=g.start * ms, height=0.8,
                color=colors[g.bound], linewidth=0)
    ax.set_ylabel("group")
    ax.invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    legend_outside(ax, handles, [f"{k}-bound" for k in colors])


def plot_explanation(e, path: str | Path) -> None:
    """The group as a DAG, left to right by depth: pieces coloured, the explanation's edges
    thick in orange (thicker = more responsible), the cut dashed red (the paper's Fig. 4);
    edges spanning several levels (skips) are drawn as arcs."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(e.group)
    g.add_edges_from(e.graph.internal_edges(e.group))
    pos = _dag_layout(g)
    piece = {o: k for k, p in enumerate(e.pieces) for o in p}
    colors = plt.get_cmap("Set3")  # pastel: the explanation's orange stays readable
    xs, ys = [x for x, _ in pos.values()], [y for _, y in pos.values()]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.05 * (max(xs) - min(xs)) + 2.0),
                                    0.8 * (max(ys) - min(ys)) + 2.0))
    cut = set(e.cut)
    rank = {edge: k for k, edge in enumerate(e.edges)}
    for edges, style in (
        ([x for x in g.edges if x not in rank and x not in cut], dict(edge_color="0.65")),
        (sorted(rank, key=rank.get), dict(edge_color="tab:orange")),
        (sorted(cut), dict(edge_color="tab:red", style="dashed")),
    ):
        for u, v in edges:
            span = pos[v][0] - pos[u][0]
            w = max(1.5, 6.0 - 0.6 * rank[(u, v)]) if (u, v) in rank else 1.5
            nx.draw_networkx_edges(g, pos, edgelist=[(u, v)], ax=ax, width=w, arrows=True,
                                   arrowsize=10, node_size=700,
                                   connectionstyle=f"arc3,rad={0.35 if span > 1 else 0.0}",
                                   **style)
    nx.draw_networkx_nodes(g, pos, ax=ax, node_size=700,
                           node_color=[colors(piece[o] % 12) for o in g.nodes])
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=7,
                            labels={o: f"{o}\n{e.graph[o].op_type}" for o in g.nodes})
    status = "fits" if e.cost.fits else f"needs {e.cost.buffer_bytes / 1024:,.1f} KiB"
    ax.set_title(f"{e.graph.name}: ops {e.group[0]}..{e.group[-1]} ({len(e.group)}), "
                 f"{e.scheme}, buffer {e.hw.buffer_bytes / 1024:,.0f} KiB ({status}); "
                 f"explainer {e.explainer}\norange: explained edges (thicker = more "
                 f"responsible); red dashed: cut; colours: the {len(e.pieces)} pieces",
                 fontsize=9)
    ax.axis("off")
    ax.margins(0.08, 0.25)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _dag_layout(g, wrap: int = 12) -> dict[int, tuple[float, float]]:
    """x = longest-path depth, y = lane within the depth (op ids are topological); depths
    wrap into rows of `wrap`, every other row right to left, so a long chain fills the page
    instead of a thin strip."""
    depth: dict[int, int] = {}
    for n in sorted(g.nodes):
        depth[n] = 1 + max((depth[p] for p in g.predecessors(n)), default=-1)
    levels: dict[int, list[int]] = {}
    for n, d in depth.items():
        levels.setdefault(d, []).append(n)
    lanes = max(len(nodes) for nodes in levels.values())
    pos = {}
    for d, nodes in levels.items():
        r, col = divmod(d, wrap)
        x = col if r % 2 == 0 else wrap - 1 - col
        for k, n in enumerate(nodes):
            pos[n] = (float(x), -(r * (lanes + 1.0)) - (k - (len(nodes) - 1) / 2))
    return pos


_BASELINE_STYLE = {
    "lbl": ("layer by layer", "0.45", ":"),
    "greedy": ("DNNFusion greedy", OKABE_ITO[1], "--"),
    "greedy_fit": ("greedy, no mapping rules", OKABE_ITO[4], "--"),
    "segment_dp": ("segment DP (optimal segments)", OKABE_ITO[2], "-."),
    "lower_bound": ("compulsory lower bound", "black", ":"),
}


def _run_title(s: SearchSummary, what: str) -> str:
    searched = f"{str(s.scheme).upper()}, {search_label(s.search, s.repair)}"
    return title_of(s.model_label, s.hw, size_text(s.buffer_bytes), f"{searched}: {what}")


def budget_data(result: SearchResult) -> dict[str, pd.DataFrame]:
    """What `budget_figure` draws, in bytes.

    Returns:
        ``curve``: ``evaluation`` (1-based plans evaluated) and ``best`` (the best DRAM of the
        fuseable ops so far); ``references``: ``name``, ``label`` and ``dram_bytes_fuseable``
        of the optimum (when computed) and each baseline, least DRAM first.
    """
    import pandas as pd

    s, h = result.summary, result.history
    curve = pd.DataFrame({"evaluation": h["evaluation"].astype(int),
                          "best": h["best_dram_bytes_fuseable"].astype(int)}) if len(h) \
        else pd.DataFrame({"evaluation": [], "best": []}, dtype=int)
    rows = []
    if s.optimum is not None and s.optimum.baseline is not None:
        rows.append(("optimum", "optimum" if s.optimum.optimal
                     else "best of the capped exact solve",
                     s.optimum.baseline.dram_bytes_fuseable))
    for name, b in (s.baselines or {}).items():
        rows.append((name, _BASELINE_STYLE.get(name, (name,))[0], b.dram_bytes_fuseable))
    refs = pd.DataFrame(rows, columns=["name", "label", "dram_bytes_fuseable"])
    return {"curve": curve,
            "references": refs.sort_values("dram_bytes_fuseable", kind="stable")
            .reset_index(drop=True)}


@styled
def budget_figure(result: SearchResult) -> Figure:
    """Best DRAM of the fuseable ops against plans evaluated (Mills et al. Fig. 5), the
    optimum and the baselines as lines, legend beside the plot; the plans axis is
    logarithmic past 50 plans (curves flatten early). A run of one plan (the exact solver
    proved the optimum at plan 1) has no curve to draw: the figure is then a bar per plan,
    the run's and the references'."""
    s, data = result.summary, budget_data(result)
    curve, refs = data["curve"], data["references"]
    fig = Figure(figsize=(8, 4.2), layout="constrained")
    ax = fig.add_subplot()
    if len(curve) <= 1:
        _budget_bars(ax, s, curve, refs)
        return fig
    ax.step(curve["evaluation"], mib(curve["best"]), where="post", color=OKABE_ITO[0], lw=2,
            label=f"{search_label(s.search, s.repair)}: best so far")
    for _, ref in refs.iterrows():
        _, color, style = _BASELINE_STYLE.get(ref["name"], (None, OKABE_ITO[3], "-"))
        value = mib(ref["dram_bytes_fuseable"])
        ax.axhline(value, color=color, ls=style, lw=1.2, label=f"{ref['label']} "
                   f"({value:.3f} MiB)")
    if curve["evaluation"].max() > 50:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(1, max(2, int(curve["evaluation"].max())))
    values = [*mib(curve["best"]), *mib(refs["dram_bytes_fuseable"])]
    if min(values) > 0 and max(values) / min(values) > 20:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("partition plans evaluated (budget)")
    ax.set_ylabel(f"best {DRAM_LABEL}, fuseable ops")
    fig.suptitle(_run_title(s, f"best DRAM against plans evaluated "
                            f"({s.budget_used:,} of {s.budget or 0:,})"))
    legend_outside(ax)
    return fig


def _budget_bars(ax, s: SearchSummary, curve, refs) -> None:
    """One bar per plan: the run's (proven optimal at plan 1, or its one plan) and each
    reference's DRAM, least first."""
    proven = s.optimum is not None and s.optimum.optimal
    what = "proven optimal at plan 1" if proven and len(curve) else \
        f"no search ({s.status})" if not len(curve) else "one plan evaluated"
    names = [f"this run ({search_label(s.search, None if proven else s.repair)})"]
    values = [s.best.get("dram_bytes_fuseable", 0) if s.best else 0]
    colors = [OKABE_ITO[0]]
    for _, ref in refs.iterrows():
        if ref["name"] == "optimum":
            continue  # the run's own plan when proven
        names.append(ref["label"])
        values.append(ref["dram_bytes_fuseable"])
        colors.append(_BASELINE_STYLE.get(ref["name"], (None, "0.5"))[1])
    y = range(len(names))
    bars = ax.barh(y, mib(np.asarray(values, dtype=float)), color=colors, height=0.6)
    ax.bar_label(bars, labels=[f"{mib(v):.3f} MiB" for v in values], padding=3, fontsize=8)
    ax.set_yticks(list(y), names)
    ax.invert_yaxis()
    ax.grid(False, axis="y")
    ax.set_xlim(0, mib(max(values)) * 1.25 if max(values) else 1)
    ax.set_xlabel(f"{DRAM_LABEL}, fuseable ops")
    ax.figure.suptitle(_run_title(s, f"{what}, no budget curve: the plan's DRAM next to "
                                  "the references"))


def pareto_data(result: SearchResult) -> dict[str, pd.DataFrame]:
    """What `pareto_figure` draws, in bytes (cycles as counted).

    Returns:
        ``evaluated``: ``x`` (the second objective) and ``dram_bytes`` of every plan
        evaluated; ``front``: the same of the Pareto front, by ``x``.
    """
    import pandas as pd

    front, h = result.pareto, result.history
    assert front is not None, "pareto_figure needs a multi-objective result"
    column = front.columns[2]
    line = front.sort_values(column)
    return {"evaluated": pd.DataFrame({"x": h[column], "dram_bytes": h["dram_bytes"]}),
            "front": pd.DataFrame({"x": line[column].to_numpy(),
                                   "dram_bytes": line["dram_bytes"].to_numpy()}),
            "column": pd.DataFrame({"column": [column]})}


@styled
def pareto_figure(result: SearchResult) -> Figure:
    """DRAM against the second objective: every evaluated plan, and the Pareto front (the
    buffer the fused groups need in KiB, or cycles in millions; DRAM in MiB)."""
    s, data = result.summary, pareto_data(result)
    column = data["column"]["column"].iloc[0]
    buffer = column == "fused_mbu_bytes"
    scale = kib if buffer else (lambda v: v / 1e6)
    fig = Figure(figsize=(8, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.scatter(scale(data["evaluated"]["x"]), mib(data["evaluated"]["dram_bytes"]), s=6,
               color="0.75", label="plans evaluated")
    ax.step(scale(data["front"]["x"]), mib(data["front"]["dram_bytes"]), where="post",
            color=OKABE_ITO[0], marker="o", label=f"Pareto front ({len(data['front'])} plans)")
    if buffer:
        ax.axvline(kib(s.buffer_bytes), color="black", ls=":",
                   label=f"buffer ({size_text(s.buffer_bytes)})")
        ax.set_xlabel("buffer the fused groups need (KiB; the largest group of 2+ ops)")
    else:
        ax.set_xlabel("cycles (millions)")
    ax.set_ylabel(f"{DRAM_LABEL}, whole network")
    fig.suptitle(_run_title(s, f"DRAM against {'buffer need' if buffer else 'cycles'}"))
    legend_outside(ax)
    return fig
