"""``fusion-dse optimize``: the partition search as a subcommand (wired in by `fusion_dse.cli`).

A thin adapter over `fusion_dse.optimization.optimize` and `write_outputs`: parse, run, write the
outputs, print a short summary. Bad input raises `InputError` (one line, exit status 2, from
`fusion_dse.cli.main`); a network with nothing to fuse is reported with a note on stderr and the
layer-by-layer plan as the result (exit status 0).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fusion_dse.cli_args import DEFAULT_OUT_ROOT, hw_overrides, model_and_shape
from simulator.limits import one_line

if TYPE_CHECKING:
    import pandas as pd

    from fusion_dse.runspec import RunSpec
    from search.result import CacheRate, SearchSummary

__all__ = ["DEFAULT_OUT_ROOT", "RUNS", "default_out_dir", "run_optimize", "run_spec",
           "summary_text"]


def default_out_dir(summary: SearchSummary, settings: Mapping[str, Any]) -> Path:
    """``fusion-dse-out/MODEL@SHAPE-HW-BUFFER-SCHEME-SEARCH-HASH`` (relative to the working
    directory), e.g. ``resnet50@320-edge-npu-128KiB-lbdf-auto-3f9a2c``: HASH is a digest of
    every setting of the run and of the hardware's fields, so two different runs never share
    a folder and the same run finds its own."""
    from simulator.hw import format_size

    slug = _slug(f"{summary.model}{_shape_tag(summary.input_shapes)}")
    hw = _slug(summary.hw)
    buffer = format_size(summary.buffer_bytes).replace(" ", "")
    digest = hashlib.sha256(json.dumps(
        {"settings": dict(settings), "hardware": dict(summary.hardware or {}),
         "model": summary.model_spec, "inputs": summary.input_shapes},
        sort_keys=True, default=str).encode()).hexdigest()[:6]
    return Path(DEFAULT_OUT_ROOT) / f"{slug}-{hw}-{buffer}-{summary.scheme}-{summary.search}-" \
        f"{digest}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", text).strip("_.") or "model"


def _shape_tag(shapes: Sequence[Sequence[int]] | None) -> str:
    """``@320`` for a square image input 1x3x320x320, ``@320x240`` for a non-square one,
    ``@1x128`` for other shapes; '' without shapes."""
    if not shapes:
        return ""
    first = list(shapes[0])
    if len(first) == 4:
        return f"@{first[2]}" if first[2] == first[3] else f"@{first[2]}x{first[3]}"
    return "@" + "x".join(map(str, first))


_NOT_SETTINGS = frozenset({"run", "out", "force", "quiet", "format"})
"""Options that do not change what a run computes (left out of its folder's digest)."""


def run_spec(args: argparse.Namespace) -> RunSpec:
    """The run the command line asks for, as one `RunSpec` (the model bound first when
    ``--bind`` or a symbolic ``--input-shape`` asks for it, `model_and_shape`).

    Raises:
        InputError: bad bindings, ``--exact-max-costed``.
    """
    from fusion_dse.pipeline import exact_caps
    from fusion_dse.runspec import RunSpec

    model, shape = model_and_shape(args)
    return RunSpec(model, hw=args.hw, scheme=args.scheme, search=args.search,
                   repair=args.repair, budget=args.budget, seed=args.seed,
                   objectives=args.objectives, overrides=hw_overrides(args),
                   input_shape=shape, explained_edges=args.explained_edges,
                   keep_baseline=args.keep_baseline, exact_time_limit=args.exact_time_limit,
                   compute_optimum=args.compute_optimum, graph_stages=args.graph_stages,
                   substitution=args.substitution,
                   exact_caps=exact_caps(args.exact_max_costed))


def run_optimize(args: argparse.Namespace) -> str:
    """Check what only the command line checks (its flags named as the user gave them),
    build the run's `RunSpec`, run it, write the outputs, return the summary text."""
    from fusion_dse.optimization import optimize, write_outputs
    from fusion_dse.outputs import check_out_dir
    from fusion_dse.runspec import check_budget
    from simulator.errors import InputError

    if args.explained_edges is not None and args.explained_edges < 1:
        raise InputError(f"--explained-edges must be at least 1, got {args.explained_edges}")
    check_budget(args.budget, "--budget")
    check_out_dir(args.out or DEFAULT_OUT_ROOT, "--out")
    result = optimize(run_spec(args), progress=not args.quiet and sys.stderr.isatty())
    settings = {k: v for k, v in vars(args).items() if k not in _NOT_SETTINGS}
    out = Path(args.out) if args.out else default_out_dir(result.summary, settings)
    replaced = earlier_run(out, result.summary)
    files = write_outputs(result, out, force=args.force)
    if replaced:
        print(f"fusion-dse: note: {one_line(f'replaced the earlier run in {out} ({replaced})')}",
              file=sys.stderr)
    for line in (result.summary.message, *result.summary.notes):
        if line:
            print(f"fusion-dse: note: {one_line(line)}", file=sys.stderr)
    return summary_text(result.summary, out, list(files))


def earlier_run(out: Path, summary: SearchSummary) -> str | None:
    """What the run whose summary.json is in `out` computed, when it differs from `summary`
    (model, input, hardware, buffer, dataflow, search, seed or budget): the run about to
    replace it says so. None when `out` holds no summary or the same settings."""
    from simulator.errors import InputError
    from simulator.limits import load_json_file

    if not (out / "summary.json").is_file():
        return None
    try:
        doc = load_json_file(out / "summary.json", "plan", "summary.json", InputError)
    except (OSError, InputError):
        return None
    if not isinstance(doc, dict):
        return None
    new = summary.to_dict()
    keys = ("model_spec", "input_shapes", "hw", "buffer_bytes", "scheme", "search", "repair",
            "seed", "budget", "objectives", "hardware")
    if all(doc.get(k) == new.get(k) for k in keys):
        return None
    buffer = doc.get("buffer_bytes")
    return (f"{doc.get('model_spec') or doc.get('model')}, {doc.get('hw')}, "
            f"{_size(buffer) if isinstance(buffer, int) else buffer}, {doc.get('scheme')}, "
            f"{doc.get('search')}, seed {doc.get('seed')}")


RUNS = {"optimize": run_optimize}
"""The code of the subcommands this module runs (options: ``cli.toml``)."""


def _size(n: int) -> str:
    from simulator.hw import format_size

    return f"{format_size(n)}, {n:,} B"


def _buffers(s: SearchSummary) -> str:
    """``buffer 128 KiB, 131,072 B``, or with split buffers ``buffers 64 KiB weights +
    64 KiB activations``."""
    from simulator.hw import format_size

    hw = s.hardware or {}
    if hw.get("weight_buffer_bytes") is None:
        return f"buffer {_size(s.buffer_bytes)}"
    return (f"buffers {format_size(hw['weight_buffer_bytes'])} weights + "
            f"{format_size(hw['activation_buffer_bytes'])} activations")


def _b(n: Any) -> str:
    return "" if n is None else f"{int(n):,}"


def _pct(rate: CacheRate) -> str:
    return f"{100 * rate.hit_rate:.1f}%"


def _energy_parts(best: dict) -> str:
    """`` (DRAM x, buffer x, MAC x, leakage x; SRAM area A mm2)`` in uJ, when the summary
    has them (docs/hardware.md)."""
    if "energy_leak_pj" not in best:
        return ""
    parts = ", ".join(f"{name} {best[f'energy_{key}_pj'] / 1e6:,.3f}" for name, key in (
        ("DRAM", "dram"), ("buffer", "buffer"), ("MAC", "mac"), ("leakage", "leak")))
    return f"  ({parts}; SRAM area {best.get('area_mm2', 0):,.3f} mm2)"


def summary_text(summary: SearchSummary, out: Path, files: list[str]) -> str:
    """The short report printed after a run."""
    s, best = summary, summary.best
    caches = s.caches
    head = [
        f"{s.model_label} on {s.hw} ({_buffers(s)}), {s.scheme}, "
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
        _best_line(s),
        f"  DRAM, whole network {_b(best['dram_bytes'])} B",
        f"  DRAM, fuseable ops  {_b(best['dram_bytes_fuseable'])} B",
        f"  peak buffer, network {_b(best.get('peak_buffer_bytes'))} B (max buffer usage, "
        f"fuseable ops {_b(best['mbu_bytes'])} B)",
        f"  cycles              {_b(best['cycles'])}",
        f"  energy              {best['energy_pj'] / 1e6:,.3f} uJ{_energy_parts(best)}",
        *_dataflow_lines(best),
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


def _dataflow_lines(best: Mapping[str, Any]) -> list[str]:
    """A hybrid plan's groups per dataflow."""
    from fusion_dse.reports import dataflow_shares

    counts = best.get("groups_by_dataflow")
    return [f"  groups per dataflow {dataflow_shares(counts)}"] if counts else []


def _splitter_lines(stats: Mapping[str, Any] | None, diversified: int = 0) -> list[str]:
    if not stats:
        return []
    return [f"  repair              rectify rate {stats['rectify_rate']:.1%} of "
            f"{stats['requests']:,} invalid groups ({stats['fallbacks']:,} random fallbacks, "
            f"baseline split kept {stats.get('baseline_kept', 0):,}, random repair of "
            f"{diversified:,} known plans), explainer "
            f"{stats['explain_seconds']:.1f} s, {stats['fbeta_queries']:,} F_beta and "
            f"{stats['fd_queries']:,} F_D queries"]


def _best_line(s: SearchSummary) -> str:
    """Where the best plan came from: the search (and when), or a plan the run computed
    besides it that was better (the search's own best then given with its excess)."""
    best = s.best
    if s.best_source == "search" or not s.search_best:
        return f"  best plan           {best['groups']} groups, found at plan {s.found_at:,}"
    own = s.search_best["dram_bytes"]
    return (f"  best plan           {best['groups']} groups, the {s.best_source} plan (the "
            f"search's own best, {_b(own)} B at plan {s.found_at:,}, is "
            f"+{100 * (own / best['dram_bytes'] - 1):.2f}% above it)")


def _optimum_line(s: SearchSummary) -> str:
    """The optimum and the search's gap to it (or why it is only a bound, or missing)."""
    known = s.optimum
    if known is None or known.baseline is None:
        return f"  optimum             not computed ({known.reason if known else 'no optimum'})"
    b, info = known.baseline, known.baseline.info
    gaps = known.gaps(s.best["dram_bytes"])
    if known.optimal:
        return (f"  optimum             {_b(b.dram_bytes)} B, {b.groups} groups (proven: "
                f"{info['costed']:,} of {info['candidates']:,} candidate sets costed, "
                f"{info['seconds']:.2f} s); best plan "
                f"+{100 * gaps['gap_to_optimum']:.2f}% above it")
    bound = gaps.get("gap_to_optimum_at_most")
    source = "" if info.get("source", "exact") == "exact" else f", the {info['source']} plan"
    return (f"  optimum             not proven ({info['cap_reason']}); best plan known "
            f"{_b(b.dram_bytes)} B{source}"
            + ("" if bound is None else f"; best plan at most +{100 * bound:.2f}% above the "
               "optimum")
            + ("" if info.get("reproducible", True) else
               "; cut by the wall-clock limit: not reproducible"))


def _reference_table(s: SearchSummary) -> pd.DataFrame:
    import pandas as pd

    best = s.best
    rows = [("search: " + s.search, best["dram_bytes"], best["dram_bytes_fuseable"],
             best["mbu_bytes"])]
    if s.best_source != "search" and s.search_best:
        own = s.search_best
        rows = [(f"best plan ({s.best_source})", best["dram_bytes"],
                 best["dram_bytes_fuseable"], best["mbu_bytes"]),
                ("search: " + s.search, own["dram_bytes"], own["dram_bytes_fuseable"],
                 own["mbu_bytes"])]
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
        "vs best": [f"{r[1] / best['dram_bytes']:.3f}x" for r in rows],
    })
