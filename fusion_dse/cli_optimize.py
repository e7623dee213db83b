"""``fusion-dse optimize``: the partition search as a subcommand (wired in by `fusion_dse.cli`).

A thin adapter over `fusion_dse.optimization.optimize` and `write_outputs`: parse, run, write the
outputs, print a short summary. Bad input raises `InputError` (one line, exit status 2, from
`fusion_dse.cli.main`); a network with nothing to fuse is reported with a note on stderr and the
layer-by-layer plan as the result (exit status 0).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from fusion_dse.cli_args import add_hw_arguments, add_subcommand, hw_overrides
from search.registry import DEFAULT_EXACT_TIME_LIMIT, REPAIRS, SEARCHES
from simulator.scheme import FUSED_SCHEMES, Scheme

if TYPE_CHECKING:
    from search.result import CacheRate, SearchSummary

__all__ = ["DEFAULT_OUT_ROOT", "add_optimize", "default_out_dir", "run_optimize",
           "summary_text"]

DEFAULT_OUT_ROOT = "fusion-dse-out"
DEFAULT_MODEL = "mobilenet_v2"


def add_optimize(sub: argparse._SubParsersAction) -> None:
    """Add the ``optimize`` subcommand to a `fusion-dse` subparsers action (the search and
    repair choices are the names of `search.registry`)."""
    p = add_subcommand(
        sub, "optimize", help="search the partition plan with the least DRAM traffic",
        description="Search the partition plans of MODEL for the one with the least DRAM "
                    "traffic whose groups all fit the on-chip buffer. By default (--search "
                    "auto) the exact solver proves the optimal plan when it finishes within "
                    "--exact-time-limit, else local search, seeded with the capped optimum, "
                    "runs within a budget of proposed plans; groups over the buffer are "
                    "repaired by the splitter. Prints the best plan's figures next to the "
                    "optimum and the reference baselines (layer by layer, compulsory lower "
                    "bound, optimal segment plan, DNNFusion greedy) "
                    "and writes plan.json, history.csv, summary.json and budget.png (with two "
                    "objectives also pareto.csv and pareto.png) to --out.",
        epilog="The same --seed gives the same plan and history. A network with nothing to "
               "fuse (every op over the buffer alone, or no two adjacent ops fitting one "
               "group) gives the layer-by-layer plan with a note on stderr. plan.json can be "
               "costed again with: fusion-dse evaluate MODEL --plan DIR/plan.json",
    )
    p.add_argument("model", metavar="MODEL", nargs="?", default=DEFAULT_MODEL,
                   help="zoo name, .onnx path or module:callable (default: "
                        f"{DEFAULT_MODEL}, the paper's Table V network)")
    p.add_argument("--scheme", choices=[str(s) for s in FUSED_SCHEMES],
                   default=str(Scheme.LBDF),
                   help="fusion dataflow (default: lbdf)")
    p.add_argument("--search", choices=SEARCHES.names(), default="auto",
                   help=f"{SEARCHES.help_text()} (default: auto)")
    p.add_argument("--exact-time-limit", type=_time_limit, default=DEFAULT_EXACT_TIME_LIMIT,
                   metavar="S",
                   help="seconds the exact solver may take (exact, auto and the optimum every "
                        "summary reports; 'none' for no cap). Capped, its answer is optimal "
                        "only among the sets it costed, and the summary says so (default: "
                        f"{DEFAULT_EXACT_TIME_LIMIT:g})")
    p.add_argument("--no-optimum", dest="compute_optimum", action="store_false",
                   help="do not compute the optimum reference of rs, ls and nsga2 runs (saves "
                        "up to --exact-time-limit seconds; summary.json says 'not computed')")
    p.add_argument("--repair", choices=REPAIRS.names(), default="random",
                   help="splitter for groups over the buffer (default: random)")
    p.add_argument("--explained-edges", type=int, metavar="K",
                   help="explained edges an explanation-guided repair considers per group "
                        "(gnne, pg, rg; default: 4; alledges: all)")
    p.add_argument("--no-baseline-guard", dest="keep_baseline", action="store_false",
                   help="explanation-guided repairs return Algorithm 1's split alone, as in the "
                        "paper (default: the random repair's split of the same group is "
                        "computed too and kept when it costs less DRAM)")
    p.add_argument("--budget", type=int, default=2000, metavar="N",
                   help="partition plans to propose and evaluate, exactly (default: 2000)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the run (default: 0)")
    p.add_argument("--objectives", default="dram", metavar="OBJ",
                   help="dram, dram,mbu or dram,cycles (default: dram); two objectives "
                        "also write the Pareto front")
    p.add_argument("--out", metavar="DIR",
                   help=f"output folder, created (default: {DEFAULT_OUT_ROOT}/"
                        "MODEL-SCHEME-SEARCH)")
    p.add_argument("--input-shape", metavar="N,C,H,W", help="input shape override")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bar (it is shown only when stderr is a terminal)")
    p.add_argument("--force", action="store_true",
                   help="replace --out even if it holds files a run does not write (an earlier "
                        "result folder is always replaced whole)")
    add_hw_arguments(p)
    p.set_defaults(run=run_optimize)


def _time_limit(text: str) -> float | None:
    """``--exact-time-limit``: positive seconds, or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds or 'none', "
                                         f"got {text!r}")
    return value


def default_out_dir(model_name: str, scheme: str, search: str) -> Path:
    """``fusion-dse-out/<model>-<scheme>-<search>`` (relative to the working directory)."""
    slug = re.sub(r"[^A-Za-z0-9_.@-]+", "_", model_name).strip("_.") or "model"
    return Path(DEFAULT_OUT_ROOT) / f"{slug}-{scheme}-{search}"


def run_optimize(args: argparse.Namespace) -> str:
    """Run the search, write the outputs, return the summary text."""
    from fusion_dse.optimization import optimize, write_outputs
    from fusion_dse.outputs import check_out_dir
    from simulator.errors import InputError
    from simulator.limits import MAX_BUDGET

    if args.explained_edges is not None and args.explained_edges < 1:
        raise InputError(f"--explained-edges must be at least 1, got {args.explained_edges}")
    if args.budget > MAX_BUDGET:
        raise InputError(f"--budget {args.budget:,} is over the limit of {MAX_BUDGET:,} plans")
    check_out_dir(args.out or DEFAULT_OUT_ROOT, "--out")
    result = optimize(args.model, hw=args.hw, scheme=args.scheme, search=args.search,
                      repair=args.repair, budget=args.budget, seed=args.seed,
                      objectives=args.objectives, overrides=hw_overrides(args),
                      progress=not args.quiet and sys.stderr.isatty(),
                      input_shape=args.input_shape, explained_edges=args.explained_edges,
                      keep_baseline=args.keep_baseline, exact_time_limit=args.exact_time_limit,
                      compute_optimum=args.compute_optimum)
    out = Path(args.out) if args.out else default_out_dir(result.graph.name, args.scheme,
                                                          args.search)
    files = write_outputs(result, out, force=args.force)
    for line in (result.summary.message, *result.summary.notes):
        if line:
            print(f"fusion-dse: note: {line}", file=sys.stderr)
    return summary_text(result.summary, out, list(files))


def _b(n: Any) -> str:
    return "" if n is None else f"{int(n):,}"


def _pct(rate: CacheRate) -> str:
    return f"{100 * rate.hit_rate:.1f}%"


def summary_text(summary: SearchSummary, out: Path, files: list[str]) -> str:
    """The short report printed after a run."""
    s, best = summary, summary.best
    caches = s.caches
    head = [
        f"{s.model} on {s.hw} (buffer {s.buffer_bytes:,} B), {s.scheme}, "
        f"{s.search} + {s.repair} repair, objectives {','.join(s.objectives)}, "
        f"seed {s.seed}",
        f"  plans evaluated     {s.budget_used:,} of {s.budget:,} "
        f"({s.distinct_plans:,} distinct) in {s.seconds:.1f} s",
    ]
    if s.search_report and s.search_report.get("auto_path"):
        head.append(f"  auto                took {s.search_report['auto_path']}: "
                    f"{s.search_report['reason']}")
    if s.status != "ok":
        head.append(f"  no search           {s.message}")
    head += [
        f"  best plan           {best['groups']} groups, found at plan {s.found_at:,}",
        f"  DRAM, whole network {_b(best['dram_bytes'])} B",
        f"  DRAM, fuseable ops  {_b(best['dram_bytes_fuseable'])} B",
        f"  max buffer usage    {_b(best['mbu_bytes'])} B",
        f"  cycles              {_b(best['cycles'])}",
        f"  energy              {best['energy_pj'] / 1e6:,.3f} uJ",
        _optimum_line(s),
        f"  cache hit rates     groups {_pct(caches['group'])}, splits "
        f"{_pct(caches['splitter'])}, plans {_pct(caches['plan'])}",
        *_splitter_lines(s.splitter, s.diversified_repairs),
        "",
        _reference_table(s).to_string(index=False),
        "",
        f"outputs in {out}: {', '.join(files)}",
    ]
    return "\n".join(head)


def _splitter_lines(stats: Mapping[str, Any] | None, diversified: int = 0) -> list[str]:
    if not stats:
        return []
    return [f"  repair              rectify rate {stats['rectify_rate']:.1%} of "
            f"{stats['requests']:,} invalid groups ({stats['fallbacks']:,} random fallbacks, "
            f"baseline split kept {stats.get('baseline_kept', 0):,}, random repair of "
            f"{diversified:,} known plans), explainer "
            f"{stats['explain_seconds']:.1f} s, {stats['fbeta_queries']:,} F_beta and "
            f"{stats['fd_queries']:,} F_D queries"]


def _optimum_line(s: SearchSummary) -> str:
    """The optimum and the search's gap to it (or why it is only a bound, or missing)."""
    known = s.optimum
    if known is None or known.baseline is None:
        return f"  optimum             not computed ({known.reason if known else 'no optimum'})"
    b, info = known.baseline, known.baseline.info
    gaps = known.gaps(s.best["dram_bytes"])
    if known.optimal:
        return (f"  optimum             {_b(b.dram_bytes)} B, {b.groups} groups (proven over "
                f"{info['candidates']:,} candidate sets in {info['seconds']:.2f} s); search "
                f"+{100 * gaps['gap_to_optimum']:.2f}% above it")
    bound = gaps.get("gap_to_optimum_at_most")
    return (f"  optimum             not proven ({info['cap_reason']}); best plan of the "
            f"{info['candidates']:,} candidate sets {_b(b.dram_bytes)} B"
            + ("" if bound is None else f"; search at most +{100 * bound:.2f}% above the "
               "optimum"))


def _reference_table(s: SearchSummary) -> pd.DataFrame:
    best = s.best
    rows = [("search: " + s.search, best["dram_bytes"], best["dram_bytes_fuseable"],
             best["mbu_bytes"])]
    if s.optimum is not None and s.optimum.baseline is not None:
        b = s.optimum.baseline
        rows.append(("optimum" if s.optimum.optimal else "optimum (capped)", b.dram_bytes,
                     b.dram_bytes_fuseable, b.mbu_bytes))
    rows += [(name, b.dram_bytes, b.dram_bytes_fuseable, b.mbu_bytes)
             for name, b in (s.baselines or {}).items()]
    return pd.DataFrame({
        "plan": [r[0] for r in rows],
        "DRAM (B)": [_b(r[1]) for r in rows],
        "fuseable DRAM (B)": [_b(r[2]) for r in rows],
        "MBU (B)": [_b(r[3]) for r in rows],
        "vs search": [f"{r[1] / best['dram_bytes']:.3f}x" for r in rows],
    })
