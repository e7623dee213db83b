"""Tables and documents the CLI prints: built as pandas DataFrames, rendered as text/JSON/CSV.

The zoo listing (`zoo_rows`, ``fusion-dse models``) is the exception: it is rendered from the
zoo catalog without pandas or torch, in the layout pandas gives the other tables.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import TYPE_CHECKING, Any

from simulator.workload.graph import ComputeGraph, OpKind

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["op_table", "render", "render_rows", "zoo_json", "zoo_rows"]

MODELS_FORMAT = "fusion-dse.models"
_PLAIN_INTS = ("id", "ops", "convs", "group")
"""Integer columns printed without thousands separators."""


ZOO_DTYPE_BYTES = 1
"""Bytes per element of the activation figures ``fusion-dse models`` shows (int8)."""


def zoo_rows(dtype_bytes: int = ZOO_DTYPE_BYTES) -> list[dict[str, Any]]:
    """Size and cost figures of every zoo network (the `fusion-dse models` rows), from the zoo
    catalog (`simulator.workload.zoo_catalog`: measured once, read without torch)."""
    from simulator.workload.zoo_catalog import catalog

    return [{
        "name": f.name,
        "kind": f.kind,
        "family": f.family,
        "input_shape": "x".join(str(d) for d in f.input_shape),
        "ops": f.ops,
        "convs": f.convs,
        "params": f.params,
        "weights": f.weights,
        "macs": f.macs,
        "activation_bytes": f.activation_elems * dtype_bytes,
    } for f in catalog().values()]


def zoo_json(rows: list[dict[str, Any]], dtype_bytes: int) -> dict[str, Any]:
    """The `fusion-dse models --format json` document."""
    models = [{**row, "input_shape": [int(d) for d in str(row["input_shape"]).split("x")]}
              for row in rows]
    return {"format": MODELS_FORMAT, "version": 1, "dtype_bytes": dtype_bytes,
            "models": models}


def render_rows(rows: list[dict[str, Any]], fmt: str, json_doc: Any = None) -> str:
    """`render` for rows of plain values (every row with the same keys), without pandas: the
    same text, CSV and JSON as `render` gives their DataFrame."""
    if fmt == "json":
        return json.dumps(json_doc if json_doc is not None else rows, indent=2)
    columns = list(rows[0]) if rows else []
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([row[c] for c in columns] for row in rows)
        return buffer.getvalue()
    numeric = [bool(rows) and all(_is_int(row[c]) for row in rows) and c in _PLAIN_INTS
               for c in columns]
    head = [f" {c}" if num else c for c, num in zip(columns, numeric, strict=True)]
    cells = [[_cell(c, row[c], num) for c, num in zip(columns, numeric, strict=True)]
             for row in rows]
    widths = [max([len(h), *(len(line[k]) for line in cells)]) for k, h in enumerate(head)]
    return "\n".join(" ".join(v.rjust(w) for v, w in zip(line, widths, strict=True))
                     for line in [head, *cells])


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _cell(column: str, value: Any, numeric: bool) -> str:
    """A value as pandas' ``to_string`` shows it after `_text`: thousands separators for an
    integer column (a string column then); a column left numeric (`_PLAIN_INTS`) gets its
    sign's space, as pandas gives numbers and their header."""
    if numeric:
        return f"{value: d}"
    if _is_int(value):
        return _thousands(value)
    return str(value)


def op_table(graph: ComputeGraph) -> pd.DataFrame:
    """The per-op table of `fusion-dse inspect`."""
    import pandas as pd

    rows = []
    for op in graph:
        rows.append({
            "id": op.id,
            "name": op.name,
            "kind": op.kind.value,
            "op_type": op.op_type + "".join(f"+{e.split('(')[0]}"
                                            for e in op.attr("epilogue", ())),
            "inputs": " ".join(str(r) if r >= 0 else f"in{-r - 1}" for r in op.inputs),
            "input_shapes": " ".join("x".join(map(str, s)) for s in op.input_shapes),
            "output_shape": "x".join(map(str, op.output_shape)),
            "kernel": _window(op.kernel, op.stride) if op.kind in _WINDOWED else "",
            "weights": op.weight_elems,
            "macs": op.macs,
            "mapping": op.mapping.value,
        })
    return pd.DataFrame(rows)


_WINDOWED = {OpKind.CONV, OpKind.DWCONV, OpKind.POOL, OpKind.GLOBAL_POOL}


def _window(kernel: tuple[int, int], stride: tuple[int, int]) -> str:
    return f"{kernel[0]}x{kernel[1]}/{stride[0]}"


def rewrite_text(record: dict[str, Any], hw: Any, scheme: str, out: str) -> str:
    """The report of `fusion-dse rewrite`: each stage's figures, then the rewrites in order."""
    lines = [f"{record['source']}: {record['ops_before']} ops -> {record['ops_after']} ops "
             f"({', '.join(record['stages']) or 'no stages'}; {hw.name}, "
             f"{buffer_text(hw)}, {scheme}), written to {out}"]
    for stage in record["per_stage"]:
        extra = {k: v for k, v in stage.items()
                 if k not in ("stage", "rewrites", "ops_before", "ops_after", "seconds")}
        detail = "".join(f", {k} {v:,}" if isinstance(v, int) and not isinstance(v, bool)
                         else f", {k} {v}" for k, v in extra.items())
        lines.append(f"  {stage['stage']:<11} {stage['rewrites']:>4} rewrites, "
                     f"{stage['ops_before']} -> {stage['ops_after']} ops, "
                     f"{stage['seconds']:.2f} s{detail}")
    if record["rewrites"]:
        lines.append("rewrites:")
        for k, m in enumerate(record["rewrites"], 1):
            args = ", ".join(f"{a}={v}" for a, v in m["args"].items())
            lines.append(f"  {k:>4}. {m['rule']}: {', '.join(m['ops'])}"
                         + (f" [{args}]" if args else ""))
    return "\n".join(lines)


def evaluation_text(result: Any) -> str:
    """Totals and the per-group table of `fusion-dse evaluate`."""
    cost, hw = result.cost, result.hw
    t = cost.totals()
    lines = [
        f"{result.graph.name} on {hw.name} ({buffer_text(hw)}, "
        f"{hw.dtype_bytes} B/element), scheme {cost.scheme}, {len(cost.groups)} groups",
        f"  plan valid            {'yes' if cost.valid else 'NO: ' + cost.violations[0]}",
        f"  DRAM, whole network   {_bytes(t['dram_bytes'])}   (lower bound "
        f"{_bytes(t['lower_bound_bytes'])}, layer by layer {_bytes(t['lbl_dram_bytes'])})",
        f"  DRAM, fuseable ops    {_bytes(t['dram_bytes_fuseable'])}   (lower bound "
        f"{_bytes(t['lower_bound_fuseable_bytes'])}, layer by layer "
        f"{_bytes(t['lbl_dram_fuseable_bytes'])})",
        f"  peak buffer, network  {_bytes(t['peak_buffer_bytes'])}   (fuseable ops, the "
        f"paper's max buffer usage: {_bytes(t['mbu_bytes'])})",
        f"  unfusable ops         {t['unfusable_ops']} (run layer by layer, outside the "
        "fuseable scope)",
        f"  cycles                {t['cycles']:,}  ({t['cycles'] / hw.clock_hz * 1e3:.3f} ms)",
        f"  energy                {t['energy_pj'] / 1e6:,.3f} uJ  (DRAM "
        f"{t['energy_dram_pj'] / 1e6:,.3f}, buffer {t['energy_buffer_pj'] / 1e6:,.3f}, MAC "
        f"{t['energy_mac_pj'] / 1e6:,.3f}, leakage {t['energy_leak_pj'] / 1e6:,.3f})",
        *_sram_lines(hw),
        *_dataflow_lines(cost),
        *_graph_lines(result.stages),
        "",
    ]
    return "\n".join(lines) + _text(group_table(result))


def _sram_lines(hw: Any) -> list[str]:
    """The on-chip buffers' area, access energy and leakage (docs/hardware.md)."""
    if not hw.memories:
        return []
    parts = [f"{cost.area_mm2:,.3f} mm2 ({role})" for role, cost in hw.memories]
    where = "the SRAM model's" if hw.buffer_pj_from_sram else "the hardware file's"
    node = "a table" if hw.sram.table else f"{hw.sram.node_nm} nm, {hw.sram.banks} bank(s)"
    return [f"  SRAM                  {', '.join(parts)}, {node}; "
            f"{hw.energy_buffer_pj_per_byte:.3g} pJ/B ({where}); leakage "
            f"{hw.leakage_mw:.3g} mW"]


def _dataflow_lines(cost: Any) -> list[str]:
    """A hybrid plan's groups per dataflow."""
    if not cost.scheme.mixed:
        return []
    return [f"  groups per dataflow   {dataflow_shares(cost.groups_by_dataflow)}"]


def dataflow_shares(counts: dict[str, int]) -> str:
    """``lbdf 14 (52%), brr 4 (15%), lbl 9 (33%)`` from groups counted per dataflow."""
    total = sum(counts.values()) or 1
    return ", ".join(f"{s} {n} ({n / total:.0%})" for s, n in counts.items())


def _graph_lines(record: Any) -> list[str]:
    """The graph stages an evaluation ran and, when they rewrote the graph, the imported
    graph's layer-by-layer traffic, named as such (the references above are the costed
    graph's)."""
    if record is None or not record.stages:
        return []
    lines = [f"  graph stages          {'+'.join(record.stages)}: {record.ops_before} -> "
             f"{record.ops_after} ops, {record.rewrites} rewrites (every figure above is "
             "of the rewritten graph)"]
    if record.imported_lbl_dram_bytes is not None:
        lines.append(f"  layer by layer (imported graph)  "
                     f"{_bytes(record.imported_lbl_dram_bytes)}, fuseable ops "
                     f"{_bytes(record.imported_lbl_dram_fuseable_bytes)}")
    return lines


def group_table(result: Any) -> pd.DataFrame:
    """One row per group: ops, F_beta, F_D and whether it runs."""
    import pandas as pd

    rows = []
    for k, g in enumerate(result.cost.groups):
        names = [result.graph[o].name for o in g.ops]
        rows.append({
            "group": k,
            "ops": names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)})",
            "F_beta": g.buffer_bytes,
            "F_D": g.dram_bytes,
            "cycles": g.timing.cycles,
            "bound": g.timing.bound,
            **({"dataflow": g.scheme} if result.cost.scheme.mixed else {}),
            "status": ("unfusable (LBL)" if g.fits else g.reason) if g.runs_alone
            else ("ok" if g.fits else g.reason),
        })
    return pd.DataFrame(rows)


def simulation_text(result: Any) -> str:
    """Totals and the per-group table of `fusion-dse simulate`."""
    import pandas as pd

    rep, ev = result.report, result.evaluation
    hw, cost = ev.hw, ev.cost
    lines = [
        f"{ev.graph.name} on {hw.name} ({buffer_text(hw)}), scheme "
        f"{rep.scheme}, {len(rep.groups)} groups, {rep.events:,} events",
        f"  cycles                {rep.cycles:,}  ({rep.cycles / hw.clock_hz * 1e3:.3f} ms; "
        f"analytic {cost.cycles:,})",
        f"  DRAM                  {_bytes(rep.dram_bytes)}  (analytic {_bytes(cost.dram_bytes)})",
        f"  peak buffer, network  {_bytes(rep.peak_buffer_bytes)}  (analytic "
        f"{_bytes(cost.peak_buffer)}; fuseable ops, the paper's max buffer usage: "
        f"{_bytes(cost.mbu)})",
        *(["  peak per buffer       " + ", ".join(
            f"{role} {_bytes(rep.peak_by_buffer.get(role, 0))} of {_bytes(size)}"
            for role, size in hw.buffers)] if hw.is_split else []),
        f"  PE utilisation        {rep.pe_utilisation:.1%}",
        f"  energy                {rep.energy_pj / 1e6:,.3f} uJ  (DRAM "
        f"{rep.energy_dram_pj / 1e6:,.3f}, buffer {rep.energy_buffer_pj / 1e6:,.3f}, MAC "
        f"{rep.energy_mac_pj / 1e6:,.3f}, leakage {rep.energy_leak_pj / 1e6:,.3f}; analytic "
        f"{cost.energy_pj / 1e6:,.3f})",
        *_sram_lines(hw),
        "",
    ]
    rows = []
    for g in rep.groups:
        names = [ev.graph[o].name for o in g.ops]
        rows.append({
            "group": g.index,
            "ops": names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)})",
            "mode": g.mode, "cycles": g.cycles, "compute": g.compute_cycles,
            "stall": g.stall_cycles, "bound": g.bound, "DRAM": g.dram_bytes,
            "peak_buffer": g.peak_buffer_bytes,
            "F_beta": cost.groups[g.index].buffer_bytes,
        })
    return "\n".join(lines) + _text(pd.DataFrame(rows))


def _bytes(n: int) -> str:
    return f"{n:,} B"


def buffer_text(hw: Any) -> str:
    """The on-chip buffer in a report's first line: ``buffer 131,072 B``, or with split
    buffers ``buffers 65,536 B weights + 65,536 B activations``."""
    if not hw.is_split:
        return f"buffer {_bytes(hw.buffer_bytes)}"
    return "buffers " + " + ".join(f"{_bytes(size)} {role}" for role, size in hw.buffers)


def render(table: pd.DataFrame, fmt: str, json_doc: Any = None) -> str:
    """Render a table as aligned text, CSV or JSON (`json_doc` when given, else the rows)."""
    if fmt == "csv":
        return table.to_csv(index=False)
    if fmt == "json":
        doc = json_doc if json_doc is not None else table.to_dict(orient="records")
        return json.dumps(doc, indent=2)
    return _text(table)


def _text(table: pd.DataFrame) -> str:
    import pandas as pd

    shown = table.copy()
    for col in shown.columns:
        if pd.api.types.is_integer_dtype(shown[col]) and col not in _PLAIN_INTS:
            shown[col] = shown[col].map(_thousands)
    return shown.to_string(index=False)


def _thousands(v: int) -> str:
    return f"{v:,}" if not (isinstance(v, float) and math.isnan(v)) else ""
