"""Figures an architect looks at (matplotlib, Agg backend: files only, no display needed).

A search run's budget curve and Pareto front (`budget_figure`, `pareto_figure`, written by
`fusion_dse.optimization.write_outputs`), the simulator's occupancy, bandwidth and Gantt plot
(`plot_simulation`) and a group's explanation (`plot_explanation`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from search.result import SearchResult  # noqa: E402
from simulator.engine.report import SimReport  # noqa: E402
from simulator.scheme import Scheme  # noqa: E402

__all__ = ["budget_figure", "pareto_figure", "plot_explanation", "plot_simulation"]

_MB = 1e6


def plot_simulation(report: SimReport, path: str | Path, title: str, buffer_bytes: int,
                    bins: int = 400) -> None:
    """Buffer occupancy and DRAM bandwidth over time with group boundaries, and a Gantt row
    per group (coloured by what bounds it)."""
    ms = 1e3 / report.clock_hz
    end = max(report.cycles, 1)
    fig, (occ, bw, gantt) = plt.subplots(
        3, 1, sharex=True, figsize=(12, 8), gridspec_kw={"height_ratios": [3, 2, 3]})
    _occupancy(occ, report, ms, buffer_bytes)
    _bandwidth(bw, report, ms, end, bins)
    _gantt(gantt, report, ms)
    for ax in (occ, bw):
        for g in report.groups:
            ax.axvline(g.start * ms, color="0.85", linewidth=0.5, zorder=0)
    gantt.set_xlabel("time (ms)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _occupancy(ax, report: SimReport, ms: float, buffer_bytes: int) -> None:
    t = np.array([c for c, _ in report.occupancy], dtype=float) * ms
    level = np.array([v for _, v in report.occupancy], dtype=float) / 1024
    ax.step(t, level, where="post", linewidth=0.8, label="occupancy")
    alone = [g for g in report.groups if g.mode == Scheme.LBL]
    for k, g in enumerate(alone):  # ops on their own: streamed or tiled to the buffer
        ax.axvspan(g.start * ms, g.end * ms, color="0.9", zorder=0,
                   label="layer by layer" if k == 0 else None)
    ax.axhline(buffer_bytes / 1024, color="tab:red", linestyle="--", linewidth=1,
               label=f"buffer {buffer_bytes / 1024:,.0f} KiB")
    ax.set_ylabel("buffer (KiB)")
    ax.legend(loc="upper right", fontsize=8)


def _bandwidth(ax, report: SimReport, ms: float, end: int, bins: int) -> None:
    edges = np.linspace(0, end, bins + 1)
    for write, label in ((False, "read"), (True, "write")):
        moved = _bytes_moved_by(report, write, edges)
        ax.stairs(np.diff(moved) / np.diff(edges), edges * ms, label=label, fill=True,
                  alpha=0.6)
    ax.set_ylabel("DRAM (B/cycle)")
    ax.legend(loc="upper right", fontsize=8)


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
    colors = {"compute": "tab:green", "dram": "tab:orange"}
    for row, g in enumerate(report.groups):
        ax.barh(row, max(g.cycles, 1) * ms, left=g.start * ms, height=0.8,
                color=colors[g.bound], linewidth=0)
    ax.set_ylabel("group")
    ax.invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    ax.legend(handles, [f"{k}-bound" for k in colors], loc="upper right", fontsize=8)


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
    width = max(6.0, 0.75 * (max(x for x, _ in pos.values()) + 2))
    fig, ax = plt.subplots(figsize=(min(width, 40.0), 4.5))
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
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _dag_layout(g) -> dict[int, tuple[float, float]]:
    """x = longest-path depth, y = lane within the depth (op ids are topological)."""
    depth: dict[int, int] = {}
    for n in sorted(g.nodes):
        depth[n] = 1 + max((depth[p] for p in g.predecessors(n)), default=-1)
    rows: dict[int, list[int]] = {}
    for n, d in depth.items():
        rows.setdefault(d, []).append(n)
    return {n: (float(d), k - (len(nodes) - 1) / 2) for d, nodes in rows.items()
            for k, n in enumerate(nodes)}


_BASELINE_STYLE = {
    "lbl": ("layer by layer", "tab:gray", ":"),
    "greedy": ("DNNFusion greedy", "tab:orange", "--"),
    "greedy_fit": ("greedy, no mapping rules", "tab:purple", "--"),
    "segment_dp": ("segment DP (optimal segments)", "tab:green", "-."),
    "lower_bound": ("compulsory lower bound", "black", ":"),
}


def budget_figure(result: SearchResult) -> Figure:
    """Budget vs best DRAM over the fuseable ops (Mills et al. Fig. 5); the optimum
    (`search.exact`, when computed) and the baselines as lines."""
    s = result.summary
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    h = result.history
    values = []
    if len(h):
        best = h["best_dram_bytes_fuseable"].astype(float) / _MB
        values += list(best)
        ax.step(h["evaluation"], best, where="post", color="tab:blue", lw=2,
                marker="o" if len(h) == 1 else None, label=f"{s.search} best so far")
        if len(h) == 1:  # the exact solver: one plan, the optimum
            ax.set_xlim(0, 2)
    else:
        ax.text(0.5, 0.5, f"no search ({s.status})", transform=ax.transAxes, ha="center")
    for name, b in (s.baselines or {}).items():
        text, color, style = _BASELINE_STYLE.get(name, (name, "tab:red", "--"))
        mb = b.dram_bytes_fuseable / _MB
        values.append(mb)
        ax.axhline(mb, color=color, ls=style, lw=1.2, label=f"{text} ({mb:.3f} MB)")
    if s.optimum is not None and s.optimum.baseline is not None:
        mb = s.optimum.baseline.dram_bytes_fuseable / _MB
        values.append(mb)
        text = "optimum" if s.optimum.optimal else "best of the capped exact solve"
        ax.axhline(mb, color="tab:red", ls="-", lw=1.2, label=f"{text} ({mb:.3f} MB)")
    if values and min(values) > 0:
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel("partition plans evaluated (budget)")
    ax.set_ylabel("best DRAM access, fuseable ops (MB)")
    ax.set_title(f"{s.model}, {str(s.scheme).upper()}, {s.buffer_bytes / 1024:g} KiB "
                 f"buffer, {s.search} + {s.repair} repair")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def pareto_figure(result: SearchResult) -> Figure:
    """DRAM against the second objective: every evaluated plan, and the Pareto front."""
    s, front, h = result.summary, result.pareto, result.history
    assert front is not None, "pareto_figure needs a multi-objective result"
    column = front.columns[2]
    scale, unit = (1024, "KiB") if column == "fused_mbu_bytes" else (1e6, "M cycles")
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.scatter(h[column] / scale, h["dram_bytes"] / _MB, s=6, color="lightgray",
               label="evaluated plans")
    line = front.sort_values(column)
    ax.step(line[column] / scale, line["dram_bytes"] / _MB, where="post", color="tab:blue",
            marker="o", label=f"Pareto front ({len(front)} plans)")
    if column == "fused_mbu_bytes":
        ax.axvline(s.buffer_bytes / scale, color="black", ls=":", label="buffer size")
        ax.set_xlabel("buffer the fused groups need (largest F_beta of a multi-op group, KiB)")
    else:
        ax.set_xlabel(f"cycles ({unit})")
    ax.set_ylabel("DRAM access, whole network (MB)")
    ax.set_title(f"{s.model}, {str(s.scheme).upper()}, {s.search}: DRAM vs "
                 f"{'buffer' if column == 'fused_mbu_bytes' else 'cycles'}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig
