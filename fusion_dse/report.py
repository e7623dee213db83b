"""A report page per sweep store: one self-contained HTML file (``fusion-dse report``).

The page holds the store's trade-off, compare, budget and Pareto figures (the figures of
`fusion_dse.sweep.plots`, inline SVG in the house style), a table of every point sortable by
any column, and each point's plan drawn on its network (`fusion_dse.plan_view`), shown when
its row is clicked. Nothing is fetched when it opens: no script, font or style comes from the
network. The data each figure draws is embedded beside it as JSON (``<script
type="application/json" id="data-KIND">``), so that it can be read back and checked.

The page's address may carry ``#sort=COLUMN`` (``-COLUMN`` for descending), ``plan=ID`` (a
point's key, its first 12 characters) and ``diff=ID`` (a second point whose plan is compared
with the first, group by group: shift-click on the page), ``focus=SECTION`` (``plans``,
``table``, ``view-budget``, ...: that section alone), joined by ``&`` and applied when it
opens: links to a view, used by the browser test.
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.errors import InputError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["MAX_PLAN_DRAWINGS", "plan_groups", "point_rows", "report_html", "write_report"]

MAX_PLAN_DRAWINGS = 200
"""Distinct plans drawn at most (the first by the table's order); the page says when more
were left out."""

_COLUMNS = [  # (key, header, numeric)
    ("model", "model", False), ("input", "input", False), ("hw", "hardware", False),
    ("buffer", "buffer", True), ("scheme", "dataflow", False), ("search", "search", False),
    ("seed", "seed", True), ("budget", "budget", True), ("dram_mib", "DRAM (MiB)", True),
    ("fuseable_mib", "fuseable DRAM (MiB)", True), ("mbu_kib", "MBU (KiB)", True),
    ("cycles_m", "cycles (M)", True), ("energy_uj", "energy (uJ)", True),
    ("groups", "groups", True), ("gap", "gap to optimum", True), ("status", "status", False),
]


def _svg(fig: Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _records(data: Any) -> Any:
    """A figure's data as JSON-ready records (frames) or a mapping of them."""
    if isinstance(data, dict):
        return {k: _records(v) for k, v in data.items()}
    return json.loads(data.to_json(orient="records"))


def _gap(summary: Any) -> float | None:
    try:
        doc = json.loads(summary) if isinstance(summary, str) else None
    except ValueError:
        return None
    gap = (doc or {}).get("best", {}).get("gap_to_optimum")
    return float(gap) if isinstance(gap, int | float) else None


def _input_of(summary: Any) -> str:
    """``1x3x224x224`` from a summary's ``input_shapes`` ('' for summaries without it)."""
    try:
        doc = json.loads(summary) if isinstance(summary, str) else {}
    except ValueError:
        return ""
    shapes = doc.get("input_shapes") if isinstance(doc, dict) else None
    if not isinstance(shapes, list):
        return ""
    return ", ".join("x".join(map(str, s)) for s in shapes if isinstance(s, list))


def _missing(value: Any) -> bool:
    import pandas as pd

    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def point_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The table's rows: one per point, in the units of the figures (values for sorting,
    `_COLUMNS`), plus ``id`` (the point's key) and ``plan`` (a digest of its plan, None
    without one)."""
    from fusion_dse.figure_style import search_label, size_text

    rows = []
    for _, p in frame.iterrows():
        done = p["status"] == "done"

        def num(column: str, scale: float, p: Any = p, done: bool = done) -> float | None:
            value = p.get(column)
            return None if not done or _missing(value) else float(value) / scale

        def whole(column: str, p: Any = p) -> int | None:
            return None if _missing(p.get(column)) else int(p[column])

        def text(column: str, p: Any = p) -> str:
            return "" if _missing(p.get(column)) else str(p[column])

        plan = p.get("plan")
        buffer = whole("buffer_bytes")
        rows.append({
            "id": str(p["key"])[:12], "model": text("model"),
            "input": text("input_shape") or _input_of(p.get("summary")),
            "hw": text("hw_name") or text("hw"), "buffer": buffer,
            "buffer_text": "" if buffer is None else size_text(buffer),
            "scheme": text("scheme").upper(),
            "search": search_label(None if _missing(p["search"]) else p["search"],
                                   None if _missing(p["repair"]) else p["repair"]),
            "seed": whole("seed"), "budget": whole("budget"),
            "dram_mib": num("dram_bytes", 2**20),
            "fuseable_mib": num("dram_bytes_fuseable", 2**20),
            "mbu_kib": num("mbu_bytes", 1024), "cycles_m": num("cycles", 1e6),
            "energy_uj": num("energy_pj", 1e6), "groups": num("groups", 1),
            "gap": _gap(p.get("summary")) if done else None,
            "status": text("status"),
            "plan": hashlib.sha256(plan.encode()).hexdigest()[:12]
            if isinstance(plan, str) and done else None})
    return rows


def _cell(row: dict[str, Any], key: str, numeric: bool) -> str:
    value = row[key]
    if key == "buffer":
        text = row["buffer_text"]
    elif value is None:
        text = ""
    elif key == "gap":
        text = f"{100 * value:+.2f} %"
    elif numeric and isinstance(value, float):
        text = f"{value:,.3f}" if key != "groups" else f"{value:.0f}"
    else:
        text = str(value)
    sort = "" if value is None else html.escape(str(value), quote=True)
    return f'<td data-v="{sort}">{html.escape(text)}</td>'


def _table(rows: list[dict[str, Any]]) -> str:
    head = "".join(f'<th data-key="{k}" data-num="{int(n)}" title="sort by {h}">'
                   f"{html.escape(h)}</th>" for k, h, n in _COLUMNS)
    body = "".join(
        f'<tr id="row-{r["id"]}" data-plan="{r["plan"] or ""}">'
        + "".join(_cell(r, k, n) for k, _, n in _COLUMNS) + "</tr>" for r in rows)
    return (f'<table id="points"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
            "</table>")


def _views(frame: pd.DataFrame) -> list[tuple[str, str, str, Any]]:
    """(kind, heading, inline SVG or a note, data) for each view of the store."""
    from fusion_dse.sweep import plots

    views = []
    kinds: list[tuple[str, str, Callable[[pd.DataFrame], tuple[Figure, Any]]]] = [
        ("tradeoff", "Trade-off: DRAM against buffer size", plots.tradeoff_figure),
        ("compare", "Compare: the best dataflow per buffer", plots.compare_figure),
        ("budget", "Budget: best DRAM against plans evaluated", plots.budget_figure),
        ("pareto", "Pareto fronts", plots.pareto_figure),
    ]
    for kind, heading, draw in kinds:
        try:
            fig, data = draw(frame)
        except InputError as err:  # a store without histories or fronts: said, not drawn
            views.append((kind, heading, f'<p class="note">{html.escape(str(err))}</p>',
                          None))
            continue
        views.append((kind, heading, _svg(fig), _records(data)))
    return views


def _plan_drawings(frame: pd.DataFrame, rows: list[dict[str, Any]],
                   limit: int) -> tuple[dict[str, str], int]:
    """Inline SVG of each distinct plan of the finished points (at most `limit`), by plan
    digest; and how many distinct plans were left out."""
    from fusion_dse.api import evaluate
    from fusion_dse.plan_view import plan_figure
    from simulator.workload.loader import load

    blobs = {r["plan"]: p for r, (_, p) in zip(rows, frame.iterrows(), strict=True)
             if r["plan"]}
    graphs: dict[tuple[str, str | None], Any] = {}
    drawings: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for digest, p in list(blobs.items())[:limit]:
            shape = None if _missing(p.get("input_shape")) else str(p["input_shape"])
            model = (str(p["model"]), shape)
            if model not in graphs:
                graphs[model] = load(model[0], model[1])
            path = Path(tmp) / f"{digest}.json"
            path.write_text(p["plan"])
            stages = "none" if _missing(p.get("graph_stages")) else str(p["graph_stages"])
            try:
                ev = evaluate(graphs[model], plan=path)
            except InputError:  # a plan of the staged graph that records no stages (lbl)
                key = (*model, stages)
                if key not in graphs:
                    graphs[key] = evaluate(graphs[model],
                                           graph_stages=stages.replace("+", ",")).graph
                try:
                    ev = evaluate(graphs[key], plan=path)
                except InputError as err:
                    drawings[digest] = f'<p class="note">not drawn: {html.escape(str(err))}</p>'
                    continue
            drawings[digest] = _svg(plan_figure(ev)[0])
    return drawings, max(0, len(blobs) - limit)


def plan_groups(frame: pd.DataFrame, rows: list[dict[str, Any]]) -> dict[str, list[dict]]:
    """Each distinct plan's groups by digest (`point_rows`' ``plan``): ``ops`` (op names),
    ``f_beta`` and ``dram`` (bytes), from the plan documents the store holds; what the page's
    plan comparison reads."""
    out: dict[str, list[dict]] = {}
    for r, (_, p) in zip(rows, frame.iterrows(), strict=True):
        if not r["plan"] or r["plan"] in out:
            continue
        try:
            doc = json.loads(p["plan"])
        except ValueError:
            continue
        out[r["plan"]] = [{"ops": [str(o) for o in g.get("ops", [])],
                           "f_beta": g.get("buffer_bytes"), "dram": g.get("dram_bytes")}
                          for g in doc.get("groups", []) if isinstance(g, dict)]
    return out


def report_html(store: str | Path, max_plans: int = MAX_PLAN_DRAWINGS) -> str:
    """The report page of the sweep store at `store` (see the module).

    Raises:
        InputError: no store there, or it holds no finished point.
    """
    from fusion_dse import __version__
    from fusion_dse.sweep import load_sweep

    frame = load_sweep(store, blobs=True)
    if not (frame["status"] == "done").any():
        raise InputError(f"the store {str(store)!r} has no finished point to report")
    rows = point_rows(frame)
    views = _views(frame)
    drawings, left_out = _plan_drawings(frame, rows, max_plans)
    name = Path(store).stem
    counts = frame["status"].value_counts().to_dict()
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    parts = [f"<h1>fusion-dse report: {html.escape(name)}</h1>",
             f'<p class="meta">{len(frame)} points ({html.escape(summary)}); store '
             f"{html.escape(str(store))}; fusion-dse {html.escape(__version__)}</p>",
             '<nav><a href="#view-tradeoff">trade-off</a> <a href="#view-compare">compare</a> '
             '<a href="#view-budget">budget</a> <a href="#view-pareto">Pareto</a> '
             '<a href="#table">points</a> <a href="#plans">plans</a></nav>']
    for kind, heading, body, data in views:
        payload = "" if data is None else (
            f'<script type="application/json" id="data-{kind}">'
            f"{_json_script(data)}</script>")
        parts.append(f'<section id="view-{kind}" class="view"><h2>{html.escape(heading)}'
                     f'</h2><div class="figure">{body}</div>{payload}</section>')
    parts.append('<section id="table"><h2>Points</h2><p class="note">Click a column to sort '
                 "it, a row to see its plan drawn on the network.</p>"
                 f"{_table(rows)}</section>")
    figures = "".join(f'<figure id="plan-{d}" class="plan" hidden>{svg}</figure>'
                      for d, svg in drawings.items())
    more = (f'<p class="note">{left_out} more distinct plans are not drawn (at most '
            f"{max_plans}).</p>") if left_out else ""
    parts.append(f'<section id="plans"><h2>Plan</h2><p id="plan-caption" class="meta"></p>'
                 '<p id="plan-none" class="note">No point chosen yet: click a row of the '
                 "table; shift-click a second row to compare the two plans group by group."
                 f'</p><div id="plan-diff"></div>{more}{figures}</section>')
    parts.append(f'<script type="application/json" id="data-plans">'
                 f"{_json_script(plan_groups(frame, rows))}</script>")
    parts.append(f'<script type="application/json" id="data-points">{_json_script(rows)}'
                 "</script>")
    return _PAGE.format(title=html.escape(f"fusion-dse report: {name}"),
                        body="\n".join(parts), style=_STYLE, script=_SCRIPT)


def _json_script(data: Any) -> str:
    """JSON safe inside a <script> element (no ``</`` can close it)."""
    return json.dumps(data, allow_nan=False, default=str).replace("</", "<\\/")


def write_report(store: str | Path, out: str | Path,
                 max_plans: int = MAX_PLAN_DRAWINGS) -> Path:
    """Write the report page of `store` to `out`, whole or not at all.

    Raises:
        InputError: as `report_html`, or `out` cannot be written.
    """
    from fusion_dse.outputs import atomic_file

    text = report_html(store, max_plans)
    try:
        with atomic_file(out) as tmp:
            tmp.write_text(text, encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot write {str(out)!r}: {err.strerror or err}") from err
    return Path(out)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{style}</style>
<script>window.reportErrors = [];
window.addEventListener("error", function (e) {{ window.reportErrors.push(String(e.message)); }});
</script></head>
<body>
{body}
<pre id="errors" hidden></pre>
<script>{script}</script>
</body></html>
"""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1400px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.meta, .note { color: #555; font-size: 0.9em; }
nav a { margin-right: 1em; }
.figure svg, .plan svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
td { white-space: nowrap; }
th { cursor: pointer; background: #f4f4f4; position: sticky; top: 0; }
th.asc::after { content: " \\25B2"; } th.desc::after { content: " \\25BC"; }
td:nth-child(-n+7) { text-align: left; }
tbody tr { cursor: pointer; } tbody tr:hover { background: #eef5fb; }
tbody tr.chosen { background: #d6e9f8; }
"""

_SCRIPT = """
(function () {
  var table = document.getElementById("points");
  var body = table.tBodies[0];
  function sortBy(key, descending) {
    var heads = table.tHead.rows[0].cells, index = -1, numeric = false;
    for (var i = 0; i < heads.length; i++) {
      heads[i].classList.remove("asc", "desc");
      if (heads[i].dataset.key === key) { index = i; numeric = heads[i].dataset.num === "1"; }
    }
    if (index < 0) { return; }
    heads[index].classList.add(descending ? "desc" : "asc");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].dataset.v, y = b.cells[index].dataset.v;
      if (x === "" || y === "") { return (x === "") - (y === ""); }
      var c = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
      return descending ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function showPlan(row) {
    Array.prototype.forEach.call(body.rows, function (r) { r.classList.remove("chosen"); });
    Array.prototype.forEach.call(document.querySelectorAll("figure.plan"), function (f) {
      f.hidden = true;
    });
    row.classList.add("chosen");
    var figure = document.getElementById("plan-" + row.dataset.plan);
    var none = document.getElementById("plan-none");
    var cells = Array.prototype.map.call(row.cells, function (c) { return c.textContent; });
    document.getElementById("plan-caption").textContent = "The plan of point " +
      row.id.replace(/^row-/, "") + ": " + cells.slice(0, 8).filter(Boolean).join(", ") +
      " (points with the same plan share its drawing)";
    if (figure) { figure.hidden = false; none.hidden = true; }
    else { none.hidden = false; none.textContent = "This point has no plan drawn."; }
    return figure;
  }
  var plans = JSON.parse(document.getElementById("data-plans").textContent);
  function kib(n) { return n === null || n === undefined ? "" : (n / 1024).toFixed(1); }
  function mib(n) { return n === null || n === undefined ? "" : (n / 1048576).toFixed(3); }
  function diffPlans(rowA, rowB) {
    var box = document.getElementById("plan-diff");
    box.textContent = "";
    var a = plans[rowA.dataset.plan], b = plans[rowB.dataset.plan];
    var head = document.createElement("p");
    head.className = "meta";
    box.appendChild(head);
    if (!a || !b) { head.textContent = "One of the two points has no plan."; return; }
    var names = function (p) { return p.map(function (g) { return g.ops.join(","); })
      .join(",").split(",").sort().join(","); };
    if (names(a) !== names(b)) {
      head.textContent = "The two plans are of different networks: nothing to compare.";
      return;
    }
    var key = function (g) { return g.ops.join("\u0001"); };
    var inA = {}, inB = {};
    a.forEach(function (g) { inA[key(g)] = g; });
    b.forEach(function (g) { inB[key(g)] = g; });
    var onlyA = a.filter(function (g) { return !(key(g) in inB); });
    var onlyB = b.filter(function (g) { return !(key(g) in inA); });
    head.textContent = "A: point " + rowA.id.replace(/^row-/, "") + ", B: point " +
      rowB.id.replace(/^row-/, "") + ": " + (a.length - onlyA.length) + " groups the same, " +
      onlyA.length + " only in A, " + onlyB.length + " only in B.";
    var t = document.createElement("table");
    t.id = "plan-diff-table";
    t.innerHTML = "<thead><tr><th>plan</th><th>ops</th><th>from</th><th>to</th>" +
      "<th>F_beta (KiB)</th><th>DRAM (MiB)</th></tr></thead>";
    var tb = document.createElement("tbody");
    [["A", onlyA], ["B", onlyB]].forEach(function (side) {
      side[1].forEach(function (g) {
        var tr = document.createElement("tr");
        tr.dataset.side = side[0];
        [side[0], g.ops.length, g.ops[0], g.ops[g.ops.length - 1], kib(g.f_beta),
         mib(g.dram)].forEach(function (v) {
          var td = document.createElement("td");
          td.textContent = String(v);
          tr.appendChild(td);
        });
        tb.appendChild(tr);
      });
    });
    t.appendChild(tb);
    box.appendChild(t);
  }
  var chosen = null;
  table.tHead.addEventListener("click", function (e) {
    var th = e.target.closest("th");
    if (th) { sortBy(th.dataset.key, th.classList.contains("asc")); }
  });
  body.addEventListener("click", function (e) {
    var row = e.target.closest("tr");
    if (!row) { return; }
    if (e.shiftKey && chosen && chosen !== row) { diffPlans(chosen, row); }
    else { document.getElementById("plan-diff").textContent = ""; chosen = row; }
    var figure = showPlan(chosen);
    (figure || document.getElementById("plans")).scrollIntoView();
  });
  var hash = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (part) {
    var kv = part.split("=");
    if (kv.length === 2) { hash[kv[0]] = decodeURIComponent(kv[1]); }
  });
  if (hash.sort) { sortBy(hash.sort.replace(/^-/, ""), hash.sort.charAt(0) === "-"); }
  if (hash.plan) {
    var row = document.getElementById("row-" + hash.plan);
    if (row) { chosen = row; showPlan(row); }
    var other = hash.diff && document.getElementById("row-" + hash.diff);
    if (row && other) { diffPlans(row, other); }
  }
  var focus = hash.focus && document.getElementById(hash.focus);
  if (focus) {  /* that section alone: a link to one view, and a screenshot of it */
    Array.prototype.forEach.call(document.querySelectorAll("body > section, body > nav"),
      function (s) { s.hidden = s !== focus; });
  }
  var errors = document.getElementById("errors");
  errors.textContent = window.reportErrors.join("\\n");
  errors.hidden = window.reportErrors.length === 0;
  document.body.dataset.ready = "1";
})();
"""
