"""Which of the paper's orderings hold in a Tables III/IV store, next to the paper's own.

    python experiments/orderings.py STORE [STORE...] [--out experiments/results/orderings.md]

A STORE is a sweep store or its export (``.sql.gz``, `experiments/stores.py`); the ``--out``
file is recorded in ``experiments/results/provenance.json`` (`experiments/provenance.py`).

Reads the single-objective points at 128 KiB of the five networks of Mills et al.'s Tables
III and IV (`render_tables.load`: one row per configuration, the last computed) and checks
three claims, each per network and scheme, on means over seeds:

1. **LBDF below BRR**: the paper prints LBDF below BRR for all five networks under every
   search and repair. Compared on the whole network's DRAM (the fuseable scope of a plan
   depends on the scheme since BRR streams weights, so fuseable-op DRAM of the two schemes
   covers different ops) and on the proven optimum of each scheme (`search.exact`).
2. **NSGA-II <= LS <= RS** with the random repair (and each explanation-guided repair the
   store holds for all three searches); the paper's NSGA-II figures are Table II's (256 KiB,
   other networks), so only LS <= RS has paper values at 128 KiB.
3. **GET below random under RS**: each explanation-guided repair against the random repair,
   random search, fuseable-op DRAM (the tables' metric; the same scheme on both sides).

Each line gives our figures, the paper's where printed, and whether the ordering holds
(``holds``, ``ties`` when equal, ``fails``). Nothing is recomputed: store columns and summary
blobs only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import render_tables as rt  # noqa: E402

BUFFER = 128 * 1024
REL_TIE = 1e-4
"""Two means within this fraction of each other count as a tie."""


def _verdict(low: float, high: float) -> str:
    """``holds`` when `low` < `high`, ``ties`` when within `REL_TIE`, else ``fails``."""
    if abs(high - low) <= REL_TIE * max(abs(low), abs(high), 1.0):
        return "ties"
    return "holds" if low < high else "fails"


def _paper(paper: pd.DataFrame, model: str, scheme: str, search: str, repair: str) -> float:
    sel = paper[(paper["network"] == model) & (paper["scheme"] == scheme)
                & (paper["search"] == search) & (paper["repair"] == repair)
                & (paper["metric"] == "dram") & (paper["buffer"] == "128KiB")]
    return float(sel["value"].iloc[0]) if len(sel) else float("nan")


def _mb(v: float) -> str:
    return "—" if pd.isna(v) else f"{v / 1e6:.3f}"


def _pmb(v: float) -> str:
    return "—" if pd.isna(v) else f"{v:.3f}"


def lbdf_vs_brr(rows: pd.DataFrame, paper: pd.DataFrame) -> list[list[str]]:
    """Per network, search and repair: whole-network and fuseable DRAM of LBDF and BRR."""
    out = []
    means = rows.groupby(["model", "scheme", "search", "repair"])[
        ["dram_bytes", "dram_bytes_fuseable"]].mean()
    for (model, search, repair), _ in rows.groupby(["model", "search", "repair"]):
        try:
            lb, br = means.loc[(model, "lbdf", search, repair)], means.loc[(model, "brr", search,
                                                                             repair)]
        except KeyError:
            continue
        pl, pb = (_paper(paper, model, s, search, repair) for s in ("lbdf", "brr"))
        out.append([model, search.upper(), repair, _mb(lb["dram_bytes"]), _mb(br["dram_bytes"]),
                    _verdict(lb["dram_bytes"], br["dram_bytes"]),
                    _mb(lb["dram_bytes_fuseable"]), _mb(br["dram_bytes_fuseable"]),
                    _verdict(lb["dram_bytes_fuseable"], br["dram_bytes_fuseable"]),
                    _pmb(pl), _pmb(pb),
                    "—" if pd.isna(pl) or pd.isna(pb) else _verdict(pl, pb)])
    return out


def optimum_lbdf_vs_brr(rows: pd.DataFrame) -> list[list[str]]:
    """Per network: the proven optimum of each scheme (whole network and fuseable ops), as
    the points' summaries report it (every point of a network and scheme solves the same)."""
    out = []
    for model, sub in rows.groupby("model"):
        got = {}
        for scheme in ("lbdf", "brr"):
            s = sub[sub["scheme"] == scheme]
            opts = [o for o in (json.loads(t).get("optimum") or {} for t in s["summary"] if t)
                    if o.get("status") == "optimal"]
            if opts:
                got[scheme] = (float(opts[0]["dram_bytes"]),
                               float(opts[0]["dram_bytes_fuseable"]))
        if len(got) == 2:
            out.append([model, _mb(got["lbdf"][0]), _mb(got["brr"][0]),
                        _verdict(got["lbdf"][0], got["brr"][0]),
                        _mb(got["lbdf"][1]), _mb(got["brr"][1]),
                        _verdict(got["lbdf"][1], got["brr"][1])])
    return out


def search_order(rows: pd.DataFrame, paper: pd.DataFrame) -> list[list[str]]:
    """Per network, scheme and repair held by two or more searches: NSGA-II <= LS <= RS."""
    out = []
    means = rows.groupby(["model", "scheme", "repair", "search"])["dram_bytes_fuseable"].mean()
    for (model, scheme, repair), m in means.groupby(level=[0, 1, 2]):
        m = m.droplevel([0, 1, 2])
        if len(m) < 2:
            continue
        ns, ls, rs = (m.get(k, float("nan")) for k in ("nsga2", "ls", "rs"))
        pls, prs = (_paper(paper, model, scheme, s, repair) for s in ("ls", "rs"))
        out.append([model, scheme.upper(), repair, _mb(ns), _mb(ls), _mb(rs),
                    "—" if pd.isna(ns) or pd.isna(ls) else _verdict(ns, ls),
                    "—" if pd.isna(ls) or pd.isna(rs) else _verdict(ls, rs),
                    _pmb(pls), _pmb(prs),
                    "—" if pd.isna(pls) or pd.isna(prs) else _verdict(pls, prs)])
    return out


def get_vs_random(rows: pd.DataFrame, paper: pd.DataFrame, search: str = "rs") -> list[list[str]]:
    """Per network, scheme and explanation-guided repair under `search`: against random."""
    out = []
    sub = rows[rows["search"] == search]
    means = sub.groupby(["model", "scheme", "repair"])["dram_bytes_fuseable"].mean()
    for (model, scheme, repair), v in means.items():
        if repair == "random" or (model, scheme, "random") not in means:
            continue
        r = means[(model, scheme, "random")]
        pg, pr = (_paper(paper, model, scheme, search, x) for x in (repair, "random"))
        out.append([model, scheme.upper(), repair, _mb(v), _mb(r), _verdict(v, r),
                    _pmb(pg), _pmb(pr), "—" if pd.isna(pg) or pd.isna(pr) else _verdict(pg, pr)])
    return out


def _table(head: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def _count(body: Sequence[Sequence[str]], col: int) -> str:
    vals = [r[col] for r in body if r[col] != "—"]
    return (f"{vals.count('holds')} hold, {vals.count('ties')} tie, "
            f"{vals.count('fails')} fail of {len(vals)}")


def report(rows: pd.DataFrame, paper: pd.DataFrame) -> str:
    """The three checks as markdown."""
    seeds = ", ".join(str(int(s)) for s in sorted(rows["seed"].dropna().unique()))
    budgets = ", ".join(str(int(b)) for b in sorted(rows["budget"].dropna().unique()))
    parts = [f"# The paper's orderings at 128 KiB\n\nHardware {', '.join(rows['hw'].unique())}; "
             f"buffer 128 KiB; budget {budgets} plans; seeds {seeds}; means over seeds; MB = "
             f"10^6 bytes. `python experiments/orderings.py STORE`.\n"]
    a = lbdf_vs_brr(rows, paper)
    parts.append("## 1. LBDF below BRR\n\nOn the whole network's DRAM (the same ops on both "
                 "sides) and on fuseable-op DRAM (the tables' metric; BRR's fuseable scope is "
                 f"larger since it streams weights). Ours, whole network: {_count(a, 5)}; "
                 f"fuseable ops: {_count(a, 8)}; paper: {_count(a, 11)}.\n\n" + _table(
                     ["network", "search", "repair", "LBDF MB", "BRR MB", "LBDF < BRR",
                      "LBDF fuseable", "BRR fuseable", "LBDF < BRR (fuseable)", "paper LBDF",
                      "paper BRR", "paper"], a))
    o = optimum_lbdf_vs_brr(rows)
    if o:
        parts.append("Proven optima (`search.exact`), whole network: "
                     f"{_count(o, 3)}; fuseable ops: {_count(o, 6)}.\n\n" + _table(
                         ["network", "LBDF optimum MB", "BRR optimum MB", "LBDF < BRR",
                          "LBDF fuseable", "BRR fuseable", "LBDF < BRR (fuseable)"], o))
    b = search_order(rows, paper)
    parts.append("## 2. NSGA-II <= LS <= RS\n\nFuseable-op DRAM, same scheme and repair. "
                 f"NSGA-II < LS: {_count(b, 6)}; LS < RS: {_count(b, 7)}; paper LS < RS: "
                 f"{_count(b, 10)}.\n\n" + _table(
                     ["network", "scheme", "repair", "NSGA-II MB", "LS MB", "RS MB",
                      "NSGA-II < LS", "LS < RS", "paper LS", "paper RS", "paper"], b))
    c = get_vs_random(rows, paper)
    parts.append("## 3. GET below random under random search\n\nFuseable-op DRAM. Ours: "
                 f"{_count(c, 5)}; paper: {_count(c, 8)}.\n\n" + _table(
                     ["network", "scheme", "GET", "GET MB", "random MB", "GET < random",
                      "paper GET", "paper random", "paper"], c))
    return "\n\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stores", nargs="+", metavar="STORE",
                   help="sweep stores (SQLite) or their exports (.sql.gz)")
    p.add_argument("--out", help="also write the report here (markdown)")
    args = p.parse_args(argv)
    try:
        frame = rt.load(args.stores)
    except rt.InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = frame[frame["search"].notna() & (frame["objectives"] == "dram")
                 & (frame["buffer_bytes"] == BUFFER) & frame["model"].isin(rt.MEDIUM)]
    if rows.empty:
        print(f"error: no single-objective points at 128 KiB of {', '.join(rt.MEDIUM)} in "
              f"{', '.join(args.stores)}", file=sys.stderr)
        return 2
    text = report(rows, rt.paper_values())
    print(text)
    if args.out:
        import provenance

        Path(args.out).write_text(text)
        provenance.record_outputs([args.out], inputs=args.stores, rows=rows, dram_only=True, argv=[
            "python", "experiments/orderings.py", *(sys.argv[1:] if argv is None else argv)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
