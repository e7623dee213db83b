"""Plans you can see: a plan drawn on its network (``fusion-dse show``) and two plans of one
network compared group by group (``fusion-dse diff``).

`open_plan` costs a plan file on the network it names ops of (`fusion_dse.api.evaluate`);
`group_table` and `diff_table` are what the commands print (pure functions of the costed
plans, tested); `plan_figure` and `diff_figure` draw them (`plan_layout`: a layered layout of
the graph, left to right by longest-path depth, wrapped into rows that snake so that a chain
stays a chain). Matplotlib is imported by the drawing functions only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.errors import InputError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from fusion_dse.api import Evaluation
    from simulator.workload.graph import ComputeGraph

__all__ = ["PlanLayout", "diff_figure", "diff_table", "group_table", "open_plan",
           "plan_figure", "plan_layout", "plan_title"]

_ROW_DEPTHS = 18
"""Depth levels per row of a drawing: a long network wraps into rows."""


def open_plan(path: str | Path, model: str | None = None) -> Evaluation:
    """The plan file at `path` costed on its network under the scheme and hardware it records.

    The network: `model` when given; else the graph.json written next to a plan made after
    graph stages; else the model the plan records (``model_spec`` and ``input_shapes``, or
    ``model`` in plans of earlier versions).

    Raises:
        InputError: the file cannot be read, names no model and none is given, or does not
            fit the network (`fusion_dse.api.evaluate`).
    """
    from fusion_dse.api import evaluate
    from fusion_dse.planfile import plan_model, read_plan_document

    shape = None
    if model is None:
        model, shape = plan_model(path, read_plan_document(path))
    if not isinstance(model, str) or not model:
        raise InputError(f"plan file {str(path)!r} names no model; give it with --model")
    return evaluate(model, plan=path, input_shape=shape)


def plan_title(ev: Evaluation, what: str = "") -> str:
    """``mobilenet_v2 (1x3x224x224) on edge-npu, buffer 128 KiB`` / ``LBDF plan: ...``."""
    from fusion_dse.figure_style import mib, size_text, title_of

    shape = ", ".join("x".join(map(str, s)) for s in ev.graph.input_shapes)
    total = ev.cost
    summary = (f"{str(total.scheme).upper()} plan: {len(total.groups)} groups, DRAM "
               f"{mib(total.dram_bytes):.3f} MiB, peak F_beta {size_text(total.mbu)}")
    return title_of(f"{ev.graph.name} ({shape})", ev.hw.name, size_text(ev.hw.buffer_bytes),
                    summary + (f"; {what}" if what else ""))


# --- tables -----------------------------------------------------------------------------------


def group_table(ev: Evaluation) -> pd.DataFrame:
    """One row per group of the costed plan, in plan order: ``group`` (0-based), ``ops``
    (count), ``first`` and ``last`` op names, ``op_names`` (all, in order), ``buffer_bytes``
    (F_beta), ``dram_bytes`` (F_D), ``fits`` and ``runs_alone`` (an op that fits no group)."""
    import pandas as pd

    g = ev.graph
    rows = [{"group": k, "ops": len(c.ops), "first": g[c.ops[0]].name,
             "last": g[c.ops[-1]].name, "op_names": [g[o].name for o in c.ops],
             "buffer_bytes": int(c.buffer_bytes), "dram_bytes": int(c.dram_bytes),
             "fits": bool(c.fits), "runs_alone": bool(c.runs_alone)}
            for k, c in enumerate(ev.cost.groups)]
    return pd.DataFrame(rows, columns=["group", "ops", "first", "last", "op_names",
                                       "buffer_bytes", "dram_bytes", "fits", "runs_alone"])


def _same_network(a: ComputeGraph, b: ComputeGraph) -> None:
    if [op.name for op in a] != [op.name for op in b]:
        raise InputError(f"the two plans are of different networks ({a.name}, {len(a)} ops; "
                         f"{b.name}, {len(b)} ops): diff compares plans of one network")


def diff_table(a: Evaluation, b: Evaluation) -> pd.DataFrame:
    """The groups of two plans of one network: one row per group of either plan, ``status``
    ``same`` (both plans have it; its A figures shown, B's beside them), ``only A`` or ``only B``,
    the group's ops (``first``, ``last``, ``ops``), and ``buffer_a``/``dram_a``,
    ``buffer_b``/``dram_b`` (its F_beta and F_D in the plan that has it; a shared group can
    cost differently under two dataflows or buffers). Ordered by first op.

    Raises:
        InputError: the plans are of different networks.
    """
    import pandas as pd

    _same_network(a.graph, b.graph)
    g = a.graph
    in_a = {tuple(c.ops): c for c in a.cost.groups}
    in_b = {tuple(c.ops): c for c in b.cost.groups}
    rows = []
    for ops in sorted(set(in_a) | set(in_b)):
        ca, cb = in_a.get(ops), in_b.get(ops)
        rows.append({
            "status": "same" if ca and cb else "only A" if ca else "only B",
            "first": g[ops[0]].name, "last": g[ops[-1]].name, "ops": len(ops),
            "buffer_a": None if ca is None else int(ca.buffer_bytes),
            "dram_a": None if ca is None else int(ca.dram_bytes),
            "buffer_b": None if cb is None else int(cb.buffer_bytes),
            "dram_b": None if cb is None else int(cb.dram_bytes)})
    frame = pd.DataFrame(rows, columns=["status", "first", "last", "ops", "buffer_a", "dram_a",
                                        "buffer_b", "dram_b"])
    for column in ("buffer_a", "dram_a", "buffer_b", "dram_b"):
        frame[column] = frame[column].astype("Int64")
    return frame


# --- layout -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanLayout:
    """Where each op is drawn: ``pos[op] = (x, y)``, ``row[op]`` its row of the drawing
    (y grows downwards), `width` depth levels per row, `rows` rows and `height` in lanes."""

    pos: dict[int, tuple[float, float]]
    row: dict[int, int]
    width: int
    rows: int
    height: float


def plan_layout(graph: ComputeGraph, row_depths: int = _ROW_DEPTHS) -> PlanLayout:
    """A layered layout of `graph`: x is an op's longest-path depth, ops of one depth side by
    side in lanes; the depths wrap into rows of `row_depths`, every other row right to left
    (a chain snakes down the page). Op ids are topological, so one pass gives the depths."""
    depth: dict[int, int] = {}
    for op in graph:
        depth[op.id] = 1 + max((depth[p] for p in graph.predecessors(op.id)), default=-1)
    levels: dict[int, list[int]] = {}
    for op_id, d in depth.items():
        levels.setdefault(d, []).append(op_id)
    n_rows = -(-len(levels) // row_depths)
    lanes = [max((len(levels.get(d, ())) for d in range(r * row_depths, (r + 1) * row_depths)),
                 default=1) for r in range(n_rows)]
    top = [sum(lanes[:r]) + 1.6 * r for r in range(n_rows)]  # row r starts at this y
    pos, row = {}, {}
    for d, ops in levels.items():
        r, col = divmod(d, row_depths)
        x = col if r % 2 == 0 else row_depths - 1 - col
        for lane, op_id in enumerate(ops):
            pos[op_id] = (float(x), top[r] + (lanes[r] - 1) / 2 + lane - (len(ops) - 1) / 2)
            row[op_id] = r
    return PlanLayout(pos, row, min(row_depths, len(levels)), n_rows,
                      top[-1] + lanes[-1] if n_rows else 1.0)


# --- drawing ----------------------------------------------------------------------------------


def _short(op_type: str) -> str:
    return op_type if len(op_type) <= 6 else op_type[:5] + "."


def draw_plan(ax: Axes, ev: Evaluation, layout: PlanLayout,
              highlight: set[tuple[int, ...]] | None = None) -> list[dict[str, Any]]:
    """Draw the network and the plan's groups on `ax`: each group a rounded region per row it
    spans, coloured (grey when `highlight` is given and does not hold it; hatched: an op that
    fits no group, run alone layer by layer; a thick vermilion edge: over the buffer),
    labelled with its number, F_beta and DRAM; returns one record per drawn region (group,
    row, box, label)."""
    from matplotlib.patches import FancyBboxPatch

    from fusion_dse.figure_style import OKABE_ITO, mib, size_text

    g, pos = ev.graph, layout.pos
    rows_ops: dict[int, list[int]] = {}
    for op_id, r in layout.row.items():
        rows_ops.setdefault(r, []).append(op_id)
    for u, v in g.edges():
        (x0, y0), (x1, y1) = pos[u], pos[v]
        bend = 0.25 if layout.row[u] == layout.row[v] and abs(x1 - x0) > 1 else 0.0
        ax.annotate("", (x1, y1), (x0, y0), arrowprops=dict(
            arrowstyle="-|>", color="0.45", lw=0.6, shrinkA=5, shrinkB=5, mutation_scale=6,
            connectionstyle=f"arc3,rad={bend}"), zorder=1)
    regions = []
    for k, c in enumerate(ev.cost.groups):
        chosen = highlight is None or tuple(c.ops) in highlight
        color = OKABE_ITO[k % 7] if chosen else "0.8"  # black is kept for text
        label = f"G{k}: {size_text(c.buffer_bytes)}, {mib(c.dram_bytes):.2f} MiB"
        by_row: dict[int, list[int]] = {}
        for o in c.ops:
            by_row.setdefault(layout.row[o], []).append(o)
        for r, ops in sorted(by_row.items()):
            xs, ys = [pos[o][0] for o in ops], [pos[o][1] for o in ops]
            box = (min(xs) - 0.42, min(ys) - 0.42, max(xs) - min(xs) + 0.84,
                   max(ys) - min(ys) + 0.84)
            style = dict(facecolor=color, alpha=0.28 if chosen else 0.35,
                         edgecolor=color if c.fits else "#D55E00", lw=1.0 if c.fits else 2.0,
                         hatch="////" if c.runs_alone else None, zorder=0)
            if _covers_others(box, set(c.ops), rows_ops[r], pos):
                _draw_shaped(ax, g, ops, pos, color, style)
            else:
                ax.add_patch(FancyBboxPatch(box[:2], box[2], box[3],
                                            boxstyle="round,pad=0,rounding_size=0.2", **style))
            first = r == min(by_row)
            if not first:  # the group goes on from the row above
                ax.text(box[0] + 0.05, box[1] - 0.06, f"G{k} (cont.)", fontsize=5.5,
                        va="bottom", ha="left", color="0.35", zorder=3)
            if first:
                ax.text(box[0] + 0.05, box[1] - 0.06, label, fontsize=5.5, va="bottom",
                        ha="left", color="black" if chosen else "0.4", zorder=3,
                        rotation=0 if len(c.ops) > 1 else 30)
            regions.append({"group": k, "row": r, "box": box,
                            "label": label if first else "", "highlighted": chosen})
    xs, ys = zip(*(pos[op.id] for op in g), strict=True)
    ax.scatter(xs, ys, s=150, c="white", edgecolors="0.3", linewidths=0.6, zorder=2)
    for op in g:
        ax.text(*pos[op.id], _short(op.op_type), fontsize=4, ha="center", va="center",
                zorder=3)
    ax.set_xlim(-0.8, layout.width - 0.2)
    ax.set_ylim(layout.height + 0.2, -1.3)
    ax.set_aspect("equal")
    ax.axis("off")
    return regions


def _covers_others(box: tuple[float, float, float, float], members: set[int],
                   ops: list[int], pos: dict[int, tuple[float, float]]) -> bool:
    """Whether a group's box on a row would cover an op of another group."""
    x, y, w, h = box
    return any(x <= pos[o][0] <= x + w and y <= pos[o][1] <= y + h
               for o in ops if o not in members)


def _draw_shaped(ax: Axes, graph: ComputeGraph, ops: list[int],
                 pos: dict[int, tuple[float, float]], color: str,
                 style: dict[str, Any]) -> None:
    """A group interleaved with others on a row: a rounded square per op and a band along
    each edge inside the group, so that the region covers its own ops only."""
    from matplotlib.patches import FancyBboxPatch

    members = set(ops)
    for o in ops:
        x, y = pos[o]
        ax.add_patch(FancyBboxPatch((x - 0.42, y - 0.42), 0.84, 0.84,
                                    boxstyle="round,pad=0,rounding_size=0.2", **style))
    for u, v in graph.internal_edges(members):
        (x0, y0), (x1, y1) = pos[u], pos[v]
        ax.plot([x0, x1], [y0, y1], color=color, alpha=style["alpha"], lw=14,
                solid_capstyle="round", zorder=0)


def _figure(layout: PlanLayout, panels: int) -> Figure:
    from matplotlib.figure import Figure

    width = max(6.0, 0.62 * layout.width + 0.6)
    height = panels * (0.55 * (layout.height + 1.5) + 0.5)
    return Figure(figsize=(width, min(height, 60.0)), layout="constrained")


def plan_figure(ev: Evaluation) -> tuple[Figure, pd.DataFrame]:
    """The plan drawn on its network (`draw_plan`), titled with the model, hardware, buffer
    and the plan's totals; returns the figure and the drawn regions (one row per group and
    row of the drawing: ``group``, ``row``, ``box`` (x, y, width, height), ``label``)."""
    import matplotlib
    import pandas as pd

    from fusion_dse.figure_style import RC

    with matplotlib.rc_context(RC):
        layout = plan_layout(ev.graph)
        fig = _figure(layout, 1)
        ax = fig.add_subplot()
        regions = draw_plan(ax, ev, layout)
        fig.suptitle(plan_title(ev, "groups labelled Gk: F_beta, DRAM; hatched: runs alone"))
    return fig, pd.DataFrame(regions)


def diff_figure(a: Evaluation, b: Evaluation, names: Sequence[str] = ("A", "B"),
                ) -> tuple[Figure, pd.DataFrame]:
    """Both plans drawn on the network, A above B, the groups one plan has and the other does
    not in colour, the shared ones grey; returns the figure and `diff_table`."""
    import matplotlib

    from fusion_dse.figure_style import RC

    table = diff_table(a, b)
    with matplotlib.rc_context(RC):
        layout = plan_layout(a.graph)
        fig = _figure(layout, 2)
        for k, (ev, name) in enumerate(zip((a, b), names, strict=True)):
            ax = fig.add_subplot(2, 1, k + 1)
            own = {tuple(c.ops) for c in ev.cost.groups}
            other = {tuple(c.ops) for c in (b if k == 0 else a).cost.groups}
            draw_plan(ax, ev, layout, highlight=own - other)
            ax.set_title(f"{name}: {plan_title(ev).splitlines()[1]}", fontsize=8)
        same = int((table["status"] == "same").sum())
        fig.suptitle(f"{plan_title(a).splitlines()[0]}\n{same} groups shared (grey), "
                     f"{math.fsum(table['status'] != 'same'):.0f} differ (coloured)")
    return fig, table
