"""Render the paper's tables and figures from sweep stores, next to the paper's printed values.

    python experiments/render_tables.py STORE [STORE...] [--out experiments/results]
                                        [--only table_v,fig5_budget,...]

A STORE is a sweep store (SQLite) or its committed export (``experiments/results/stores/
NAME.sql.gz``, `experiments/stores.py`), so the tables render from a clean clone. Every file
written inside the repository is recorded in ``experiments/results/provenance.json`` with the
cost-model fingerprint of the points it was rendered from (`experiments/provenance.py`).

Reads the stores (`fusion_dse.load_sweep`, summary blobs included), recognises the paper
setups their points hold by their axes (`SETUPS`: model, scheme, buffer, search; any repair,
seed and budget) and writes, into ``--out``:

* ``table_ii``, ``table_iii``, ``table_iv`` (``.md`` and ``.csv``): per network, scheme,
  search and repair our DRAM (mean over seeds, min-max, seeds) next to the paper's printed
  value (`experiments/paper_values.csv`), the optimum (`search.exact`, from the summary; a
  capped one marked), our gap to it, the MBU (Table II), the reference plans of the summary
  (greedy, segment DP, layer by layer, compulsory lower bound), and against the random repair
  with the same search and seed: the seeds a repair is better / equal / worse on and the
  share of the gap between the random repair and the optimum it closes;
* ``table_v``: the splitter's rectify rate and the search time per explainer and search;
* ``fig5_budget`` (``.png``, ``.md``, ``.csv``): the budget figure
  (`fusion_dse.sweep.plots.budget_figure`) and the best DRAM at five budgets;
* ``buffer_sweep_tradeoff`` and ``buffer_sweep_compare`` (``.png``, ``.csv``) and
  ``buffer_sweep.md``: the trade-off and best-dataflow figures of the run settings (model,
  scheme, search, repair, budget) stored at several buffer sizes, with layer by layer; those
  points are never table cells.

DRAM is in MB = 10^6 bytes over the fuseable ops (the paper's scope, as the project reports
it everywhere); MBU in KiB = 2^10 bytes. Nothing is recomputed: every figure is a store
column or a summary-blob value of a sweep point. A setup whose points ran at several budgets
is rendered at the paper's budget when the store has it, else at the largest. Every output
states its hardware, buffer, budget and seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stores as _stores  # noqa: E402

from fusion_dse import load_sweep  # noqa: E402
from fusion_dse.sweep import plots  # noqa: E402
from simulator.errors import InputError  # noqa: E402
from simulator.hw import format_size  # noqa: E402

__all__ = ["NAMES", "PAPER_VALUES", "SETUPS", "Setup", "against_random", "budget_markdown",
           "budget_table", "cells", "context", "detect", "dram_markdown", "dram_table", "load",
           "main", "paper_values", "rectify_markdown", "rectify_table", "render"]

PAPER_VALUES = Path(__file__).with_name("paper_values.csv")
"""The paper's printed values (its header says what could not be read unambiguously)."""

MB, KIB = 1e6, 1024
KB128, KB256 = 128 * 1024, 256 * 1024
MEDIUM = ("mobilenet_v2", "vgg16", "resnet50", "resnet18", "squeezenet1_0")
LARGE = ("efficientnet_b3", "resnet152", "deeplabv3_mobilenet_v3_large")
_CELL = ["model", "scheme", "search", "repair"]


@dataclass(frozen=True)
class Setup:
    """A paper setup: the axes its points have, and what is rendered from them.

    Attributes:
        name: Output stem, e.g. ``table_iii``.
        title: The paper's table or figure it reproduces.
        kind: ``dram`` (Tables II-IV), ``rectify`` (Table V) or ``budget`` (Fig. 5).
        paper: The table's id in `PAPER_VALUES` (``""``: none printed).
        panels: (model, scheme, search) triples the setup holds.
        buffer: Buffer size in bytes.
        budget: The paper's budget (plans), preferred when a store holds several.
        guided_only: Only explanation-guided repairs (those with a rectify rate).
    """

    name: str
    title: str
    kind: str
    paper: str
    panels: tuple[tuple[str, str, str], ...]
    buffer: int
    budget: int | None
    guided_only: bool = False


def _grid(models: Sequence[str], schemes: Sequence[str],
          searches: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
    return tuple((m, s, q) for m in models for s in schemes for q in searches)


SETUPS = (
    Setup("table_ii", "Table II: large networks, LBDF, 256 KiB", "dram", "II",
          _grid(LARGE, ["lbdf"], ["ls", "nsga2", "rs"]), KB256, 5000),
    Setup("table_iii", "Table III: local search, BRR and LBDF, 128 KiB", "dram", "III",
          _grid(MEDIUM, ["brr", "lbdf"], ["ls"]), KB128, 2000),
    Setup("table_iv", "Table IV: random search, BRR and LBDF, 128 KiB", "dram", "IV",
          _grid(MEDIUM, ["brr", "lbdf"], ["rs"]), KB128, 2000),
    Setup("table_v", "Table V: rectify rate and search time, MobileNetV2, LBDF, 128 KiB",
          "rectify", "V", _grid(["mobilenet_v2"], ["lbdf"], ["ls", "rs"]), KB128, 2000,
          guided_only=True),
    Setup("fig5_budget", "Fig. 5: best DRAM against plans evaluated, 128 KiB", "budget", "",
          (("squeezenet1_0", "brr", "ls"), ("mobilenet_v2", "lbdf", "ls"),
           ("vgg16", "lbdf", "rs")), KB128, None),
)
"""The paper's setups, in the order they are rendered."""


# --- reading --------------------------------------------------------------------------------


_REFERENCES = ("greedy", "segment_dp", "lbl", "lower_bound")
_SUMMARY_COLUMNS = ("optimum_status", "optimum_fuseable", "rectify_rate", "invalid_groups",
                    "baseline_kept", "fallbacks", *(f"{n}_fuseable" for n in _REFERENCES))


def _from_summary(text: str | None) -> dict[str, object]:
    """The figures of a point's summary blob the tables show (None where it has none)."""
    s = json.loads(text) if text else {}
    opt, refs, sp = s.get("optimum") or {}, s.get("baselines") or {}, s.get("splitter") or {}
    row: dict[str, object] = {
        "optimum_status": opt.get("status"),
        "optimum_fuseable": opt.get("dram_bytes_fuseable"),
        "rectify_rate": sp.get("rectify_rate"), "invalid_groups": sp.get("requests"),
        "baseline_kept": sp.get("baseline_kept"), "fallbacks": sp.get("fallbacks")}
    for name in _REFERENCES:
        row[f"{name}_fuseable"] = (refs.get(name) or {}).get("dram_bytes_fuseable")
    row["search_best"] = s.get("search_best") or {}  # not a column (`load` reads it)
    return row


_CONFIG = ["model", "hw", "scheme", "search", "repair", "objectives", "budget", "seed",
           "input_shape", "overrides", "graph_stages"]


def load(stores: Sequence[str | Path], graph_stages: str | None = None) -> pd.DataFrame:
    """The done points of `stores`, with the summary figures as columns: one row per
    configuration, the last finished where several keys share one (a point computed again
    after a change to the tool, the cost model or the checkpoints, which are in its key).

    A store may be given by its export (``.sql.gz``, `experiments/stores.py`).

    Raises:
        InputError: a store is missing or not a sweep store.
    """
    try:
        paths = [_stores.resolve(path) for path in stores]
    except OSError as err:
        raise InputError(str(err)) from err
    frames = [load_sweep(path, blobs=True) for path in paths]
    frame = pd.concat(frames, ignore_index=True)
    frame = frame[frame["status"] == "done"].sort_values("finished", kind="stable")
    frame = frame.assign(graph_stages=frame["graph_stages"].fillna("none")
                         if "graph_stages" in frame else "none")
    searched = frame["search"].notna()  # layer-by-layer points have no graph stages
    settings = sorted(frame.loc[searched, "graph_stages"].unique())
    chosen = graph_stages or ("none" if "none" in settings or not settings else
                              settings[0] if len(settings) == 1 else None)
    if chosen is None:
        raise InputError(f"the stores hold points of several graph-stage settings "
                         f"({', '.join(settings)}); choose one with --graph-stages")
    frame = frame[~searched | (frame["graph_stages"] == chosen)]
    frame = frame.drop_duplicates([c for c in _CONFIG if c in frame], keep="last")
    frame = frame.reset_index(drop=True)
    rows = [_from_summary(t) for t in frame["summary"]]
    extra = pd.DataFrame(rows, index=frame.index, columns=list(_SUMMARY_COLUMNS))
    frame = frame.copy()
    # the tables compare what each search found: a point's plan figures are the search's own
    # best (`search_best`) where the run wrote a better plan (`fusion_dse.pipeline.
    # incumbent_stage`); points stored before `search_best` existed keep theirs
    for i, row in zip(frame.index, rows, strict=True):
        for col, value in row["search_best"].items():
            if col in _FIGURES and col in frame:
                frame.at[i, col] = value
    return pd.concat([frame, extra], axis=1)


_FIGURES = ("dram_bytes", "dram_bytes_fuseable", "mbu_bytes", "cycles", "energy_pj", "groups")


def paper_values(path: str | Path = PAPER_VALUES) -> pd.DataFrame:
    """`PAPER_VALUES` as a frame (``value`` a float, ``printed`` the digits as printed)."""
    frame = pd.read_csv(path, comment="#", dtype=str)
    return frame.assign(printed=frame["value"], value=frame["value"].astype(float))


# --- selecting ------------------------------------------------------------------------------


def _one_budget(rows: pd.DataFrame, preferred: int | None) -> pd.DataFrame:
    budgets = set(rows["budget"].dropna().astype(int))
    if len(budgets) <= 1:
        return rows
    keep = preferred if preferred in budgets else max(budgets)
    return rows[rows["budget"] == keep]


def cells(frame: pd.DataFrame, setup: Setup) -> pd.DataFrame:
    """The single-objective points of `frame` that belong to `setup` (one budget)."""
    searched = frame[frame["search"].notna() & (frame["objectives"] == "dram")
                     & (frame["buffer_bytes"] == setup.buffer)]
    panels = set(setup.panels)
    triple = zip(searched["model"], searched["scheme"], searched["search"], strict=True)
    rows = searched[pd.Series([t in panels for t in triple], index=searched.index,
                              dtype=bool)]
    if setup.guided_only:
        rows = rows[rows["rectify_rate"].notna()]
    return _one_budget(rows, setup.budget)


def _swept(frame: pd.DataFrame) -> pd.DataFrame:
    """The points of run settings (model, scheme, search, repair, budget) stored at two or
    more buffer sizes (at one budget), with the layer-by-layer points of those models."""
    searched = frame[frame["search"].notna() & (frame["objectives"] == "dram")]
    run = ["model", "scheme", "search", "repair", "budget"]
    sizes = searched.groupby(run)["buffer_bytes"].transform("nunique")
    rows = _one_budget(searched[sizes >= 2], None)
    lbl = frame[frame["search"].isna() & frame["model"].isin(set(rows["model"]))]
    return pd.concat([rows, lbl]) if len(rows) else rows


def detect(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The points of every setup `frame` holds, by output stem.

    A run setting stored at several buffer sizes is a buffer sweep (``buffer_sweep``); its
    points are not cells of the tables, so a buffer-sweep store renders no table even where
    one of its sizes is a table's."""
    swept = _swept(frame)
    rest = frame[~frame["key"].isin(set(swept["key"]))]
    found = {s.name: cells(rest, s) for s in SETUPS}
    found["buffer_sweep"] = swept
    return {name: rows for name, rows in found.items() if len(rows)}


# --- figures of the tables ------------------------------------------------------------------


NEGLIGIBLE_GAP = 1e-3
"""A random repair's plan within this fraction of the optimum counts as the optimum."""


def against_random(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cell (model, scheme, search, repair other than random): against the random repair
    with the same search and seed, the seeds it is ``better`` / ``equal`` / ``worse`` on
    (fuseable-op DRAM), and ``gap_closed``, the mean over the seeds with a proven optimum
    below the random repair's plan of (random - repair) / (random - optimum) (1: the repair
    finds the optimum, 0: no better than random, negative: worse), with
    ``seeds_without_gap`` the seeds where the random repair already found the optimum, to
    within `NEGLIGIBLE_GAP` of it (a gap of a few bytes would turn the ratio into noise:
    -2,887 for a repair 0.6 % worse than a random repair 60 B above the optimum)."""
    keys = ["model", "scheme", "search", "seed"]
    random = (rows[rows["repair"] == "random"].set_index(keys)["dram_bytes_fuseable"]
              .astype(float).rename("random"))
    paired = rows[rows["repair"] != "random"].join(random, on=keys)
    paired = paired[paired["random"].notna()]
    if paired.empty:
        return pd.DataFrame(columns=[*_CELL, "better", "equal", "worse", "gap_closed",
                                     "seeds_without_gap"])
    own = paired["dram_bytes_fuseable"].astype(float)
    proven = paired["optimum_status"] == "optimal"
    optimum = paired["optimum_fuseable"].astype(float)
    gap = (paired["random"] - optimum).where(proven)
    gap = gap.where(gap > NEGLIGIBLE_GAP * optimum, 0.0).where(proven)
    return pd.DataFrame({
        **{k: paired[k] for k in _CELL},
        "better": own < paired["random"], "equal": own == paired["random"],
        "worse": own > paired["random"],
        "gap_closed": ((paired["random"] - own) / gap).where(gap > 0),
        "seeds_without_gap": gap == 0,
    }).groupby(_CELL, sort=False).agg(
        better=("better", "sum"), equal=("equal", "sum"), worse=("worse", "sum"),
        gap_closed=("gap_closed", "mean"), seeds_without_gap=("seeds_without_gap", "sum"),
    ).reset_index()


def _spread(rows: pd.DataFrame, column: str, scale: float, name: str) -> pd.DataFrame:
    """Per cell: mean, min and max of `column` / `scale` over seeds, and the seeds."""
    values = rows[[*_CELL, "seed"]].assign(v=rows[column].astype(float) / scale)
    return values.groupby(_CELL, sort=False).agg(
        **{name: ("v", "mean"), f"{name}_min": ("v", "min"), f"{name}_max": ("v", "max"),
           "seeds": ("seed", "nunique")}).reset_index()


def _means(rows: pd.DataFrame, columns: dict[str, tuple[str, float]]) -> pd.DataFrame:
    """Per cell: the mean over seeds of each column / scale, by output name."""
    values = rows[_CELL].assign(**{name: rows[col].astype(float) / scale
                                   for name, (col, scale) in columns.items()})
    return values.groupby(_CELL, sort=False)[list(columns)].mean().reset_index()


def _first(rows: pd.DataFrame, keys: list[str], columns: dict[str, str]) -> pd.DataFrame:
    """Per `keys`: the first value of each column (figures that do not vary over seeds)."""
    return (rows.groupby(keys, sort=False)[list(columns)].first().reset_index()
            .rename(columns=columns))


def _paper(setup: Setup, paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's values of `setup`, one column per metric (``paper_<metric>``)."""
    mine = paper[paper["table"] == setup.paper]
    if mine.empty:
        return pd.DataFrame(columns=_CELL)
    wide = mine.pivot_table(index=["network", "scheme", "search", "repair"], columns="metric",
                            values="value", aggfunc="first", sort=False)
    wide.columns = [f"paper_{c}" for c in wide.columns]
    return wide.reset_index().rename(columns={"network": "model"})


def dram_table(rows: pd.DataFrame, setup: Setup, paper: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of a DRAM table (Tables II-IV): ours (mean, min, max, seeds), the
    paper's, the optimum, our gap to it, MBU, the reference plans and `against_random`.

    The paper's rows of the store's networks and schemes that the store does not hold are
    kept, with empty figures of ours."""
    ours = _spread(rows, "dram_bytes_fuseable", MB, "dram_mb").merge(
        _means(rows, {"dram_total_mb": ("dram_bytes", MB), "mbu_kib": ("mbu_bytes", KIB)}),
        on=_CELL)
    refs = _first(rows, ["model", "scheme"], {
        "optimum_fuseable": "optimum_mb", "optimum_status": "optimum_status",
        "greedy_fuseable": "greedy_mb", "segment_dp_fuseable": "segment_dp_mb",
        "lbl_fuseable": "lbl_mb", "lower_bound_fuseable": "lower_bound_mb"})
    for c in ("optimum_mb", "greedy_mb", "segment_dp_mb", "lbl_mb", "lower_bound_mb"):
        refs[c] = refs[c].astype(float) / MB
    wanted = set(zip(rows["model"], rows["scheme"], strict=True))
    printed = _paper(setup, paper)
    printed = printed[pd.Series([k in wanted for k in zip(printed["model"], printed["scheme"],
                                                           strict=True)],
                                index=printed.index, dtype=bool)]
    table = printed.merge(ours, on=_CELL, how="outer", sort=False) if len(printed) else ours
    table = table.merge(refs, on=["model", "scheme"], how="left")
    table["gap_to_optimum"] = (table["dram_mb"] / table["optimum_mb"] - 1).where(
        table["optimum_status"] == "optimal")
    table = table.merge(against_random(rows), on=_CELL, how="left")
    return _in_paper_order(table, setup)


_REPAIR_ORDER = {"random": 0, "alledges": 1, "gnne": 2, "pg": 3, "rg": 4}


def _in_paper_order(table: pd.DataFrame, setup: Setup) -> pd.DataFrame:
    """Rows by network (the paper's order), scheme, search, repair (the paper's order)."""
    models = list(dict.fromkeys(m for m, _, _ in setup.panels))
    order = table.assign(_m=table["model"].map(models.index),
                         _r=table["repair"].map(lambda r: _REPAIR_ORDER.get(r, 9)))
    return (order.sort_values(["_m", "scheme", "search", "_r", "repair"], kind="stable")
            .drop(columns=["_m", "_r"]).reset_index(drop=True))


def rectify_table(rows: pd.DataFrame, setup: Setup, paper: pd.DataFrame) -> pd.DataFrame:
    """One row per search and explainer (Table V): rectify rate (mean, min, max over seeds),
    search seconds (mean), invalid groups sent to the splitter, baseline splits kept,
    fallbacks, fuseable-op DRAM, next to the paper's rate (%) and time (s)."""
    table = _spread(rows, "rectify_rate", 0.01, "rectify_pct").merge(_means(rows, {
        "search_s": ("search_seconds", 1.0), "invalid_groups": ("invalid_groups", 1.0),
        "baseline_kept": ("baseline_kept", 1.0), "fallbacks": ("fallbacks", 1.0),
        "dram_mb": ("dram_bytes_fuseable", MB)}), on=_CELL)
    printed = _paper(setup, paper)
    return table.merge(printed, on=_CELL, how="left") if len(printed) else table


def budget_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Best fuseable-op DRAM (mean, min, max over seeds) after 1/5 ... 5/5 of the budget per
    run setting: the points of `fusion_dse.sweep.plots.budget_data` at those budgets."""
    data = plots.budget_data(rows)
    budget = int(rows["budget"].max())
    marks = sorted({max(1, budget * k // 5) for k in range(1, 6)})
    out = []
    for run, part in data.groupby(["model", "scheme", "search", "repair", "buffer_bytes"],
                                  sort=False):
        part = part.sort_values("evaluation")
        for mark in marks:
            seen = part[part["evaluation"] <= mark]
            if len(seen):
                last = seen.iloc[-1]
                out.append({**dict(zip(["model", "scheme", "search", "repair", "buffer_bytes"],
                                       run, strict=True)), "plans": mark,
                            "best_mb": last["mean"] / MB, "best_min_mb": last["min"] / MB,
                            "best_max_mb": last["max"] / MB})
    return pd.DataFrame(out)


# --- writing --------------------------------------------------------------------------------


def _seeds(values: pd.Series) -> str:
    seeds = sorted({int(s) for s in values.dropna()})
    if not seeds:
        return "none"
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 1:
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def context(rows: pd.DataFrame) -> dict[str, str]:
    """Hardware, buffer(s), budget(s) and seeds of `rows`, as printed in every output."""
    budgets = sorted({int(b) for b in rows["budget"].dropna()})
    return {"hardware": ", ".join(sorted(set(rows["hw_name"].astype(str)))),
            "buffer": ", ".join(format_size(b) for b in sorted(set(rows["buffer_bytes"]))),
            "budget": ", ".join(f"{b:,}" for b in budgets) or "none",
            "seeds": _seeds(rows["seed"])}


def _header(title: str, rows: pd.DataFrame, note: str) -> str:
    c = context(rows)
    return (f"# {title}\n\nHardware {c['hardware']}; buffer {c['buffer']}; budget "
            f"{c['budget']} plans; seeds {c['seeds']}. {note}\n")


def _num(v: object, fmt: str = ".3f") -> str:
    return "—" if v is None or pd.isna(v) else format(float(v), fmt)


def _range_cell(row: pd.Series, name: str, fmt: str = ".3f") -> str:
    if pd.isna(row.get(name)):
        return "not run"
    text = _num(row[name], fmt)
    if row[f"{name}_min"] != row[f"{name}_max"]:
        text += f" ({_num(row[f'{name}_min'], fmt)}-{_num(row[f'{name}_max'], fmt)})"
    return text


def _md(head: Sequence[str], body: Sequence[Sequence[str]], right_from: int) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(head))]
    lines = [head, align, *body]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines) + "\n"


_SEARCH = {"ls": "LS", "rs": "RS", "nsga2": "NSGA-II"}
_REPAIR = {"random": "—", "gnne": "GNNE", "pg": "PG", "rg": "RG", "alledges": "all edges"}


def _label(row: pd.Series) -> list[str]:
    return [row["model"], row["scheme"].upper(), _SEARCH.get(row["search"], row["search"]),
            _REPAIR.get(row["repair"], row["repair"])]


def dram_markdown(table: pd.DataFrame, setup: Setup, rows: pd.DataFrame) -> str:
    """The markdown of a DRAM table (see `dram_table`)."""
    mbu = setup.paper == "II"
    head = ["network", "scheme", "search", "GET", "ours MB (min-max)", "seeds", "paper MB",
            "optimum MB", "ours vs optimum"]
    head += ["ours MBU KiB", "paper MBU KB"] if mbu else []
    head += ["vs random: better/equal/worse", "gap to optimum closed"]
    body = []
    for _, r in table.iterrows():
        capped = r.get("optimum_status") == "capped"
        gap = r.get("gap_to_optimum")
        cells = [*_label(r), _range_cell(r, "dram_mb"),
                 "" if pd.isna(r.get("seeds")) else str(int(r["seeds"])),
                 _num(r.get("paper_dram")), _num(r.get("optimum_mb")) + ("†" if capped else ""),
                 "—" if pd.isna(gap) else f"{round(gap, 6) + 0.0:+.1%}"]  # + 0.0: no "-0.0%"
        if mbu:
            cells += [_num(r.get("mbu_kib")), _num(r.get("paper_mbu"))]
        vs = ("—" if pd.isna(r.get("better")) else
              f"{int(r['better'])}/{int(r['equal'])}/{int(r['worse'])}")
        closed = _num(r.get("gap_closed"), ".2f")
        if not pd.isna(r.get("seeds_without_gap")) and r["seeds_without_gap"]:
            closed += f" ({int(r['seeds_without_gap'])} without gap)"
        body.append([*cells, vs, closed if vs != "—" else "—"])
    refs = table.dropna(subset=["lbl_mb"]).drop_duplicates(["model", "scheme"])
    ref_body = [[r["model"], r["scheme"].upper(),
                 _num(r["optimum_mb"]) + ("†" if r["optimum_status"] == "capped" else ""),
                 _num(r["greedy_mb"]), _num(r["segment_dp_mb"]), _num(r["lbl_mb"]),
                 _num(r["lower_bound_mb"])] for _, r in refs.iterrows()]
    note = ("DRAM access in MB (10^6 bytes) of the fuseable ops, mean over seeds with the "
            "min-max; MBU in KiB (2^10 bytes). Paper values as printed "
            "(experiments/paper_values.csv). † an optimum a work cap cut (best found, not "
            "proven). Against the random repair with the same search and seed; gap closed = "
            "(random - GET) / (random - optimum), mean over seeds with a proven optimum below "
            "the random repair's plan.")
    return (_header(setup.title, rows, note) + "\n" + _md(head, body, 4)
            + "\nReference plans (fuseable-op DRAM, MB; from every point's summary)\n\n"
            + _md(["network", "scheme", "optimum", "greedy (DNNFusion)", "segment DP",
                   "layer by layer", "lower bound"], ref_body, 2))


def rectify_markdown(table: pd.DataFrame, setup: Setup, rows: pd.DataFrame) -> str:
    """The markdown of Table V (see `rectify_table`)."""
    head = ["search", "GET", "ours rectify % (min-max)", "paper %", "ours search s",
            "paper s", "seeds", "invalid groups", "baseline kept", "fallbacks", "DRAM MB"]
    body = [[_SEARCH.get(r["search"], r["search"]), _REPAIR.get(r["repair"], r["repair"]),
             _range_cell(r, "rectify_pct", ".1f"), _num(r.get("paper_rectify_rate"), ".1f"),
             _num(r["search_s"], ".1f"), _num(r.get("paper_search_time"), ".0f"),
             str(int(r["seeds"])), _num(r["invalid_groups"], ".1f"),
             _num(r["baseline_kept"], ".1f"), _num(r["fallbacks"], ".1f"),
             _num(r["dram_mb"])] for _, r in table.iterrows()]
    note = ("Rectify rate: share of the invalid groups sent to the explanation-guided splitter "
            "that it split into fitting pieces (the splitter's report in the summary); search "
            "time: wall-clock seconds of the search (`search_seconds`, machine and load "
            "dependent); counts and DRAM (MB, fuseable ops) are means over seeds.")
    return _header(setup.title, rows, note) + "\n" + _md(head, body, 2)


def budget_markdown(table: pd.DataFrame, setup: Setup, rows: pd.DataFrame) -> str:
    """The markdown of the Fig. 5 table (see `budget_table`)."""
    marks = sorted(set(table["plans"]))
    head = ["network", "scheme", "search", "GET", *[f"{m:,} plans" for m in marks]]
    body = []
    for _, part in table.groupby(["model", "scheme", "search", "repair"], sort=False):
        first = part.iloc[0]
        best = dict(zip(part["plans"], part["best_mb"], strict=True))
        body.append([*_label(first), *[_num(best.get(m)) for m in marks]])
    note = ("Best fuseable-op DRAM (MB) found within the first N plans, mean over seeds; the "
            "paper prints no numbers for Fig. 5 (curves only). Figure: fig5_budget.png.")
    return _header(setup.title, rows, note) + "\n" + _md(head, body, 4)


def _atomic(path: Path, write) -> Path:  # noqa: ANN001 - write(tmp_path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    write(tmp)
    os.replace(tmp, path)
    return path


def _text(path: Path, text: str) -> Path:
    return _atomic(path, lambda p: p.write_text(text))


def _csv(path: Path, table: pd.DataFrame, rows: pd.DataFrame) -> Path:
    c = context(rows)
    full = table.assign(hw=c["hardware"], buffer=c["buffer"], budget=c["budget"],
                        seed_list=c["seeds"])
    return _atomic(path, lambda p: full.to_csv(p, index=False))


def _figure(path: Path, kind: str, rows: pd.DataFrame) -> Path:
    fig, _ = plots.KINDS[kind](rows)
    return _atomic(path, lambda p: plots.save_figure(fig, p))


def _render_setup(setup: Setup, rows: pd.DataFrame, paper: pd.DataFrame,
                  out: Path) -> list[Path]:
    hardware = rows[["hw_name", "overrides"]].drop_duplicates()
    if len(hardware) > 1:
        raise InputError(f"{setup.name}: the stores hold its points on {len(hardware)} "
                         f"hardware configurations ({', '.join(sorted(hardware['overrides']))}); "
                         f"render each from its own store")
    if setup.kind == "dram":
        table = dram_table(rows, setup, paper)
        text = dram_markdown(table, setup, rows)
    elif setup.kind == "rectify":
        table = rectify_table(rows, setup, paper)
        text = rectify_markdown(table, setup, rows)
    else:
        table = budget_table(rows)
        text = budget_markdown(table, setup, rows)
    written = [_text(out / f"{setup.name}.md", text),
               _csv(out / f"{setup.name}.csv", table, rows)]
    if setup.kind == "budget":
        written.append(_figure(out / f"{setup.name}.png", "budget", rows))
    return written


def _render_buffer_sweep(rows: pd.DataFrame, out: Path) -> list[Path]:
    trade = plots.tradeoff_data(rows)
    lines = trade["lines"].merge(trade["references"], how="left",
                                 on=["model", "graph_stages", "buffer_bytes"])
    compare = plots.compare_data(rows)
    schemes = [c[len("dram_"):] for c in compare.columns if c.startswith("dram_")]
    body = [[r["model"], format_size(r["buffer_bytes"]), r["best"].upper(),
             *[_num(r[f"dram_{s}"] / MB) for s in schemes]] for _, r in compare.iterrows()]
    text = (_header("Buffer sweep: DRAM against buffer size per network and dataflow", rows,
                    "Least DRAM access (MB, 10^6 bytes, whole network) per scheme over its "
                    "points; figures buffer_sweep_tradeoff.png, buffer_sweep_compare.png.")
            + "\n" + _md(["network", "buffer", "best", *[f"{s.upper()} MB" for s in schemes]],
                         body, 3))
    return [_text(out / "buffer_sweep.md", text),
            _csv(out / "buffer_sweep_tradeoff.csv", lines, rows),
            _csv(out / "buffer_sweep_compare.csv", compare, rows),
            _figure(out / "buffer_sweep_tradeoff.png", "tradeoff", rows),
            _figure(out / "buffer_sweep_compare.png", "compare", rows)]


NAMES = (*(s.name for s in SETUPS), "buffer_sweep")
WITH_TIMING = frozenset({"buffer_sweep.csv"})
"""The outputs that hold cycles or energy (the buffer sweep's rows); every other output shows
DRAM, buffer use and fit only and is recorded in a ``/dram`` provenance scope."""
"""The setups by output stem (``--only``)."""


def render(frame: pd.DataFrame, out: str | Path, paper: pd.DataFrame | None = None,
           only: Sequence[str] = ()) -> dict[str, list[Path]]:
    """Write every setup `frame` holds (those named in `only`, if given) into `out`;
    returns the files by setup.

    Raises:
        InputError: an unknown name in `only`; `frame` holds none of the setups asked for.
    """
    unknown = sorted(set(only) - set(NAMES))
    if unknown:
        raise InputError(f"--only {','.join(unknown)}: not a setup (one of "
                         f"{', '.join(NAMES)})")
    found = {k: v for k, v in detect(frame).items() if not only or k in only}
    if not found:
        raise InputError("the stores hold no paper setup (Tables II-V, Fig. 5) and no model "
                         "at several buffer sizes" + (f" among {', '.join(only)}" if only
                                                      else ""))
    paper = paper_values() if paper is None else paper
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    by_name = {s.name: s for s in SETUPS}
    return {name: (_render_buffer_sweep(rows, target) if name == "buffer_sweep"
                   else _render_setup(by_name[name], rows, paper, target))
            for name, rows in found.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring); exit status 2 on bad input."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stores", nargs="+", metavar="STORE",
                   help="sweep stores (SQLite) or their exports (.sql.gz)")
    p.add_argument("--out", default="experiments/results", help="output folder")
    p.add_argument("--graph-stages", help="render the points of this graph-stage setting "
                   "(default: none, the paper's setups, or the stores' only setting)")
    p.add_argument("--only", default="", help=f"comma-separated setups to render (default: "
                   f"every one the stores hold): {', '.join(NAMES)}")
    args = p.parse_args(argv)
    only = [n.strip() for n in args.only.split(",") if n.strip()]
    try:
        frame = load(args.stores, args.graph_stages)
        written = render(frame, args.out, only=only)
    except InputError as err:
        print(f"render_tables: {err}", file=sys.stderr)
        return 2
    import provenance

    found = detect(frame)
    command = ["python", "experiments/render_tables.py",
               *(sys.argv[1:] if argv is None else argv)]
    for name, paths in written.items():
        for dram_only in (True, False):
            chosen = [x for x in paths if (Path(x).name not in WITH_TIMING) == dram_only]
            if chosen:
                provenance.record_outputs(chosen, argv=command, inputs=args.stores,
                                          rows=found[name], dram_only=dram_only)
        print(f"{name}: {', '.join(str(x) for x in paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
