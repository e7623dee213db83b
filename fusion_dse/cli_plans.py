"""``fusion-dse show``, ``diff`` and ``report``: thin adapters over `fusion_dse.plan_view` and
`fusion_dse.report` (wired in by `fusion_dse.cli`; options in ``cli.toml``). Output paths are
checked before any plan or store is read; bad input raises `InputError` (one line, exit
status 2)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from fusion_dse.outputs import check_figure_file, check_out_file

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RUNS"]


def _size(n: object) -> str:
    from fusion_dse.figure_style import size_text

    return "" if n is None or n != n else size_text(int(n))  # NaN/NA: no group there


def _mib(n: object) -> str:
    return "" if n is None or n != n else f"{int(n) / 2**20:.3f}"


def _run_show(args: argparse.Namespace) -> str:
    out = Path(args.out) if args.out else Path(args.plan).with_suffix(".svg")
    check_figure_file(out)
    check_out_file(out, "--out")
    from fusion_dse.plan_view import group_table, open_plan, plan_figure, plan_title
    from fusion_dse.sweep.plots import save_figure

    ev = open_plan(args.plan, args.model)
    table = group_table(ev)
    written = save_figure(plan_figure(ev)[0], out)
    if args.format == "json":
        return json.dumps({"title": plan_title(ev), "figure": str(written),
                           "groups": table.to_dict(orient="records")}, indent=2)
    return (f"{plan_title(ev)}\n{_group_text(table)}\n\nplan drawing written to {written}")


def _group_text(table: pd.DataFrame) -> str:
    import pandas as pd

    shown = pd.DataFrame({
        "group": table["group"], "ops": table["ops"],
        "from": table["first"], "to": table["last"],
        "F_beta": [_size(v) for v in table["buffer_bytes"]],
        "DRAM (MiB)": [_mib(v) for v in table["dram_bytes"]],
        "note": ["over the buffer" if not f else "runs alone" if a else ""
                 for f, a in zip(table["fits"], table["runs_alone"], strict=True)]})
    return shown.to_string(index=False)


def _run_diff(args: argparse.Namespace) -> str:
    if args.out:
        check_figure_file(args.out)
        check_out_file(args.out, "--out")
    from fusion_dse.plan_view import diff_figure, diff_table, open_plan, plan_title
    from fusion_dse.sweep.plots import save_figure

    a, b = open_plan(args.plan_a, args.model), open_plan(args.plan_b, args.model)
    table = diff_table(a, b)
    written = save_figure(diff_figure(a, b)[0], args.out) if args.out else None
    if args.format == "json":
        return json.dumps({"a": args.plan_a, "b": args.plan_b,
                           "dram_a": a.cost.dram_bytes, "dram_b": b.cost.dram_bytes,
                           "figure": None if written is None else str(written),
                           "groups": json.loads(table.to_json(orient="records"))}, indent=2)
    differ = table[table["status"] != "same"]
    lines = [f"A: {args.plan_a}: {plan_title(a).splitlines()[1]}",
             f"B: {args.plan_b}: {plan_title(b).splitlines()[1]}",
             f"{(table['status'] == 'same').sum()} groups the same, "
             f"{(table['status'] == 'only A').sum()} only in A, "
             f"{(table['status'] == 'only B').sum()} only in B; DRAM B - A "
             f"{(b.cost.dram_bytes - a.cost.dram_bytes) / 2**20:+.3f} MiB"]
    if len(differ):
        lines += ["", _diff_text(differ)]
    if written is not None:
        lines += ["", f"drawing of both plans written to {written}"]
    return "\n".join(lines)


def _diff_text(rows: pd.DataFrame) -> str:
    import pandas as pd

    return pd.DataFrame({
        "plan": [s.removeprefix("only ") for s in rows["status"]], "ops": rows["ops"],
        "from": rows["first"], "to": rows["last"],
        "F_beta": [_size(a if s == "only A" else b) for s, a, b in
                   zip(rows["status"], rows["buffer_a"], rows["buffer_b"], strict=True)],
        "DRAM (MiB)": [_mib(a if s == "only A" else b) for s, a, b in
                       zip(rows["status"], rows["dram_a"], rows["dram_b"], strict=True)],
    }).to_string(index=False)


def _run_report(args: argparse.Namespace) -> str:
    from fusion_dse.sweep.cli import _same_file

    store = Path(args.store)
    out = Path(args.out) if args.out else store.with_suffix(".html")
    check_out_file(out, "--out", ("html", "htm"))
    if _same_file(out, store):
        from simulator.errors import InputError

        raise InputError(f"--out {str(out)!r} is the store itself; choose another file")
    from fusion_dse.report import write_report

    return f"report written to {write_report(store, out)}"


RUNS = {"show": _run_show, "diff": _run_diff, "report": _run_report}
"""The code of the subcommands this module runs (options: ``cli.toml``)."""
