"""Figures an architect looks at (matplotlib, Agg backend: files only, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from simulator.engine.report import SimReport  # noqa: E402

__all__ = ["plot_simulation"]


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
    unlimited = [g for g in report.groups if g.mode == "lbl"]
    for k, g in enumerate(unlimited):  # valid by definition: their use is not limited
        ax.axvspan(g.start * ms, g.end * ms, color="0.9", zorder=0,
                   label="layer by layer (not limited)" if k == 0 else None)
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
