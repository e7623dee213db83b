"""``fusion-dse sweep``, ``plot`` and ``compare``: thin adapters over `fusion_dse.sweep`.

`RUNS` holds their code (`fusion_dse.cli` attaches it; the options are in ``cli.toml``).
``sweep`` has two forms: ``sweep [SPEC.yaml] [axis flags]`` runs a sweep
and ``sweep export STORE`` writes a store as CSV or Parquet (the word ``export`` in place of
the spec; a spec file called ``export`` is written ``./export``). Bad input raises
`InputError` before anything starts (one line per problem, exit status 2).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fusion_dse.cli_args import DEFAULT_OUT_ROOT, option_dests
from simulator import limits
from simulator.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

    from fusion_dse.runspec import CompareSpec

__all__ = ["DEFAULT_STORE_DIR", "PLOT_KINDS", "RUNS", "compare_name", "compare_spec",
           "compare_table",
           "default_name", "default_store"]

DEFAULT_STORE_DIR = Path(DEFAULT_OUT_ROOT) / "sweeps"
PLOT_KINDS = ("tradeoff", "budget", "pareto", "compare")
"""The figure kinds of ``fusion-dse plot``: the keys of `fusion_dse.sweep.plots.KINDS`, named
here so that the parser is built without matplotlib (a test holds the two equal)."""


def default_store(name: str) -> Path:
    """fusion-dse-out/sweeps/NAME.sqlite."""
    return DEFAULT_STORE_DIR / f"{name}.sqlite"


# --- sweep ----------------------------------------------------------------------------------


def _spec(args: argparse.Namespace):  # noqa: ANN202 - a SweepSpec
    from fusion_dse.sweep.spec import SweepSpec, canonical_axis, load_spec

    spec = load_spec(args.spec) if args.spec else None
    axes = {canonical_axis(k): v for k, v in spec.axes.items()} if spec else {}
    for dest in option_dests("sweep-axes"):
        value = getattr(args, dest)
        if value is not None:
            axes[dest.removeprefix("axis_")] = value
    for item in args.axis_more:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--axis {limits.shown(item)}: expected KEY=VALUES")
        axes[key.strip()] = value.strip()
    name = args.name if args.name is not None else spec.name if spec else default_name(axes)
    return SweepSpec(name=name, axes=axes, include=spec.include if spec else [],
                     exclude=spec.exclude if spec else [])


def default_name(axes: dict) -> str:
    """``sweep-HASH`` for a sweep given by flags alone, HASH a digest of its axes: the same
    command resumes its own store, a different one gets another (never mixes its points,
    figures and page with an earlier sweep's)."""
    import hashlib
    import json

    text = json.dumps({k: axes[k] for k in sorted(axes)}, sort_keys=True, default=str)
    return f"sweep-{hashlib.sha256(text.encode()).hexdigest()[:6]}"


def _run_sweep(args: argparse.Namespace) -> str:
    if args.spec == "export":
        return _run_export(args)
    if args.store_arg is not None:
        raise InputError(f"unexpected argument {limits.shown(args.store_arg)} (one SPEC.yaml "
                         "at most)")
    from fusion_dse.outputs import check_out_file
    from fusion_dse.sweep.engine import (
        check_scheduler,
        check_workers,
        estimate_seconds,
        plan_sweep,
        run_sweep,
    )
    from fusion_dse.sweep.spec import check_name, expand, validate_points
    from fusion_dse.sweep.store import SweepStore, inspect_store

    if args.scheduler is not None:
        check_scheduler(args.scheduler)
    check_workers(args.workers, args.scheduler, args.dry_run)
    spec = _spec(args)
    check_name(spec.name, path_free=args.store is None)
    points = expand(spec)
    store = Path(args.store) if args.store else default_store(spec.name)
    check_out_file(store, "--store" if args.store else "the sweep's store", create_parent=True)
    if args.dry_run:
        validate_points(points)
        if inspect_store(store) is None:
            plan = plan_sweep(points, None, args.retry_failed)
        else:
            with SweepStore(store, read_only=True) as opened:
                plan = plan_sweep(points, opened, args.retry_failed)
        workers = args.workers or (1 if args.scheduler else _cores())
        seconds, timed = estimate_seconds(plan, workers)
        _, groups = plan.seed_groups()
        copies = sum(len(m) - 1 for m in groups.values())
        may = (f" ({copies} of them copied from their lowest seed if its result proves "
               "seed-free)") if copies else ""
        return (f"sweep {spec.name}: {len(points)} points, {plan.skipped} already in {store}, "
                f"{len(plan.todo)} to run{may}; about {_duration(seconds)} on {workers} "
                f"worker(s) for all of them (from {timed} timed point(s))")
    outcome = run_sweep(points, store, spec.name, args.workers, args.scheduler,
                        args.retry_failed, args.quiet)
    _report_failures(store, outcome.failed)
    if outcome.interrupted:
        print(f"fusion-dse: {outcome.interrupted} point(s) interrupted by a dead worker or "
              "scheduler (stored as interrupted): rerun the sweep to run them", file=sys.stderr)
    copied = (f" ({outcome.copied} copied from the lowest seed of a result no seed can "
              "change)") if outcome.copied else ""
    lost = (f", {outcome.interrupted} interrupted (lost to a dead worker or scheduler; a "
            "rerun runs them)") if outcome.interrupted else ""
    head = (f"sweep {spec.name}: {outcome.total} points: {outcome.done} done{copied}, "
            f"{outcome.failed} failed{lost}, {outcome.skipped} skipped (already stored); "
            f"{_duration(outcome.seconds)} on {outcome.workers} worker(s); store {store}")
    return "\n\n".join([head, *results_text(store, points)])


def results_text(store: Path, points: list) -> list[str]:  # noqa: ANN001 - sweep Points
    """What a sweep found, not only how many points ran: per model, buffer and dataflow, the
    least DRAM of the finished points of `points` (the plan each wrote: the best its run
    computed) and its gap to the optimum, then where the figures and the page are (empty when
    nothing finished)."""
    import pandas as pd

    from fusion_dse.figure_style import size_text
    from fusion_dse.sweep import load_sweep
    from fusion_dse.sweep.store import point_key

    keys = {point_key(p) for p in points}
    frame = load_sweep(store)
    done = frame[frame["key"].isin(keys) & (frame["status"] == "done")]
    if done.empty:
        return []
    done = done.assign(buffers=_buffer_labels(done, size_text))
    cell = ["model", "buffer_bytes", "buffers", "scheme"]
    best = done.loc[done.groupby(cell)["dram_bytes"].idxmin()].sort_values(cell)
    table = pd.DataFrame({
        "model": best["model"], "buffer": best["buffers"],
        "dataflow": best["scheme"].str.upper(),
        "best DRAM (MiB)": [f"{v / 2**20:.3f}" for v in best["dram_bytes"]],
        "gap to optimum": ["" if pd.isna(g) else f"{100 * g:+.2f} %"
                           for g in best["gap_to_optimum"]]})
    shown = table.head(_RESULT_ROWS).to_string(index=False)
    more = f"\n... {len(table) - _RESULT_ROWS} more rows" if len(table) > _RESULT_ROWS else ""
    return [shown + more, f"figures: fusion-dse plot tradeoff|budget|pareto|compare {store}; "
                          f"every point and plan: fusion-dse report {store}"]


def _buffer_labels(done: pd.DataFrame, size_text: Callable[[int], str]) -> list[str]:
    """Each point's buffer as the table names it: its size, or with split buffers
    ``W + A`` (weights + activations), so points of equal total but different splits stay
    apart."""
    from simulator.hw import load_hw

    labels: dict[tuple[str, str], str] = {}
    for hw, overrides in dict.fromkeys(zip(done["hw"], done["overrides"], strict=True)):
        try:
            config = load_hw(hw, json.loads(overrides) if overrides else {})
        except (InputError, ValueError):
            config = None
        labels[hw, overrides] = ("" if config is None or not config.is_split else
                                 f"{size_text(config.weight_capacity)} + "
                                 f"{size_text(config.activation_capacity)}")
    return [labels[k] or size_text(b) for k, b in
            zip(zip(done["hw"], done["overrides"], strict=True), done["buffer_bytes"],
                strict=True)]


_RESULT_ROWS = 40
"""Rows of a sweep's results printed at most (the report page has every point)."""


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def _duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{seconds:.1f} s"


def _report_failures(store: Path, failed: int) -> None:
    if not failed:
        return
    import pandas as pd

    from fusion_dse.sweep import load_sweep

    frame = load_sweep(store)
    for _, row in frame[frame["status"] == "failed"].head(5).iterrows():
        run = f" {row['search']} seed {row['seed']}" if pd.notna(row["search"]) else ""
        line = f"failed point {row['model']} {row['scheme']}{run}: {row['error']}"
        print(f"fusion-dse: {limits.escape_controls(line)[:limits.MAX_ERROR_CHARS]}",
              file=sys.stderr)


def _run_export(args: argparse.Namespace) -> str:
    from fusion_dse.outputs import atomic_file, check_out_file
    from fusion_dse.sweep import load_sweep

    if args.store_arg is None:
        raise InputError("sweep export needs a STORE (fusion-dse sweep export STORE)")
    store = Path(args.store_arg)
    out = Path(args.out) if args.out else store.with_suffix(f".{args.format}")
    check_out_file(out, "--out")
    if _same_file(out, store):
        raise InputError(f"--out {str(out)!r} is the store itself; choose another file")
    if args.format == "parquet" and not _parquet_engine():
        raise InputError("--format parquet needs pyarrow (pip install pyarrow); use --format "
                         "csv")
    frame = load_sweep(store)
    try:
        with atomic_file(out) as tmp:
            if args.format == "csv":
                frame.to_csv(tmp, index=False)
            else:
                frame.to_parquet(tmp, index=False)
    except OSError as err:
        raise InputError(f"cannot write {str(out)!r}: {err.strerror or err} (any earlier file "
                         "there is left as it was)") from err
    return f"{len(frame)} points written to {out}"


def _same_file(out: Path, store: Path) -> bool:
    """Whether writing `out` would replace the store (or its journal files)."""
    try:
        target = out.resolve()
        base = store.resolve()
    except OSError:
        return False
    return target in {base, *(Path(f"{base}{s}") for s in ("-wal", "-shm", "-journal"))}


def _parquet_engine() -> bool:
    import importlib.util

    return any(importlib.util.find_spec(m) is not None for m in ("pyarrow", "fastparquet"))


# --- plot -----------------------------------------------------------------------------------


def _run_plot(args: argparse.Namespace) -> str:
    from fusion_dse.outputs import check_figure_file, check_out_file
    from fusion_dse.sweep import load_sweep
    from fusion_dse.sweep.tradeoff import PLOT_METRIC, parse_metrics

    metrics = parse_metrics(args.metric)
    if args.kind != "tradeoff" and metrics != (PLOT_METRIC,):
        raise InputError(f"--metric {args.metric!r}: only the tradeoff figure takes metrics")
    store = Path(args.store)
    out = Path(args.out) if args.out else store.with_name(f"{store.stem}-{args.kind}.png")
    check_figure_file(out)
    check_out_file(out, "--out")
    if _same_file(out, store):
        raise InputError(f"--out {str(out)!r} is the store itself; choose another file")
    frame = load_sweep(args.store, blobs=args.kind in ("budget", "pareto")
                       or metrics != (PLOT_METRIC,))  # area, latency: the summaries
    from fusion_dse.sweep.plots import KINDS, save_figure  # matplotlib: once the store is read

    fig, _ = (KINDS[args.kind](frame, metrics) if args.kind == "tradeoff"
              else KINDS[args.kind](frame))
    return f"{args.kind} figure written to {save_figure(fig, out)}"


# --- compare --------------------------------------------------------------------------------


COMPARE_METRICS = ("dram", "cycles", "energy", "area")
"""The panels of ``compare``'s trade-off plot (`fusion_dse.sweep.tradeoff.METRICS`)."""


def _comparison_store(args: argparse.Namespace, compare: CompareSpec) -> tuple[Path, str]:
    """The store and name of a comparison, checked before anything runs."""
    from fusion_dse.outputs import check_out_file
    from fusion_dse.sweep.engine import check_workers

    check_workers(args.workers, None)
    name = compare_name(compare)
    store = Path(args.store) if args.store else default_store(name)
    check_out_file(store, "--store" if args.store else "the comparison's store",
                   create_parent=True)
    return store, name


def _check_figure(out: Path, store: Path, flag: str, create_parent: bool) -> None:
    from fusion_dse.outputs import check_figure_file, check_out_file

    check_figure_file(out)
    check_out_file(out, flag, create_parent=create_parent)
    if _same_file(out, store):
        raise InputError(f"{flag} {str(out)!r} is the store itself; choose another file")


def _comparison_points(args: argparse.Namespace, compare: CompareSpec, store: Path,
                       name: str) -> pd.DataFrame:
    """Run (or resume) the comparison's points; its finished and failed rows, with blobs."""
    from fusion_dse.sweep import load_sweep
    from fusion_dse.sweep.engine import run_sweep
    from fusion_dse.sweep.spec import SweepSpec, expand
    from fusion_dse.sweep.store import point_key

    points = expand(SweepSpec(name=name, axes=compare.axes()))
    outcome = run_sweep(points, store, name, args.workers, None, quiet=args.quiet)
    _report_failures(store, outcome.failed)
    keys = {point_key(p) for p in points}
    frame = load_sweep(store, blobs=True)  # plans: a hybrid's groups per dataflow
    return frame[frame["key"].isin(keys)]


def _run_compare(args: argparse.Namespace) -> str:
    compare = compare_spec(args)
    store, name = _comparison_store(args, compare)
    out = Path(args.out) if args.out else store.with_name(f"{name}-tradeoff.png")
    _check_figure(out, store, "--out", create_parent=not args.out)
    frame = _comparison_points(args, compare, store, name)
    from fusion_dse.sweep.plots import save_figure, tradeoff_figure  # matplotlib: at the end

    table = compare_table(frame)
    try:
        written = save_figure(tradeoff_figure(frame, COMPARE_METRICS)[0], out)
    except InputError:
        print(table)  # the comparison computed is not lost
        raise
    return f"{table}\n\ntrade-off plot written to {written}"


def _run_recommend(args: argparse.Namespace) -> str:
    from fusion_dse.runspec import RecommendSpec
    from fusion_dse.sweep.tradeoff import parse_metrics, parse_within, recommend, with_figures

    metric = parse_metrics(args.metric)
    if len(metric) != 1:
        raise InputError(f"--metric {args.metric!r}: recommend reads one metric")
    within = parse_within(args.within)
    spec = RecommendSpec(*(getattr(compare_spec(args), f) for f in _COMPARE_FIELDS),
                         metric=metric[0], within=args.within)
    store, name = _comparison_store(args, spec.comparison())
    if args.plot:
        _check_figure(Path(args.plot), store, "--plot", create_parent=False)
    frame = _comparison_points(args, spec.comparison(), store, name)
    done = frame[frame["status"] == "done"]
    if done.empty:
        raise InputError("no point of the comparison finished")
    result = recommend(with_figures(done), metric[0], within)
    text = (json.dumps(result.to_dict(), indent=2) if args.format == "json"
            else result.text())
    if args.plot:
        from fusion_dse.sweep.plots import save_figure, tradeoff_figure

        written = save_figure(tradeoff_figure(done, metric)[0], args.plot)
        text += "" if args.format == "json" else f"\n\n{metric[0]} plot written to {written}"
    return text


_COMPARE_FIELDS = ("model", "hw", "buffers", "schemes", "search", "repair", "budget", "seeds",
                   "graph_stages")


def compare_spec(args: argparse.Namespace) -> CompareSpec:
    """The comparison the command line asks for (its defaults are `CompareSpec`'s)."""
    from fusion_dse.runspec import CompareSpec

    return CompareSpec(args.model, args.hw, args.buffers, args.schemes, args.search,
                       args.repair, args.budget, args.seeds, args.graph_stages)


def compare_name(spec: CompareSpec) -> str:
    """``compare-MODEL-HW-HASH``: the model (with its ``@`` resolution), the hardware and a
    digest of the buffers, dataflows, search, repair, budget, seeds and graph stages, so that
    two different comparisons never share a store or a figure."""
    import hashlib
    import json

    stem = re.sub(r"[^A-Za-z0-9_@]+", "-", Path(spec.model).stem).strip("-")
    hw = re.sub(r"[^A-Za-z0-9_]+", "-", Path(str(spec.hw)).stem).strip("-")
    settings = {k: str(getattr(spec, k)) for k in ("hw", "buffers", "schemes", "search",
                                                   "repair", "budget", "seeds",
                                                   "graph_stages")}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:6]
    return f"compare-{stem}-{hw}"[:limits.MAX_SWEEP_NAME_CHARS - 7] + f"-{digest}"


def compare_table(frame: pd.DataFrame) -> str:
    """Per buffer and scheme, the best point's DRAM, MBU, cycles, latency, energy and SRAM
    area; best DRAM '*'."""
    import pandas as pd

    from fusion_dse.sweep.tradeoff import with_figures

    done = frame[frame["status"] == "done"]
    if done.empty:
        raise InputError("no point of the comparison finished")
    if "summary" in done:
        done = with_figures(done)
    best = done.loc[done.groupby(["buffer_bytes", "scheme"])["dram_bytes"].idxmin()]
    best = best.sort_values(["buffer_bytes", "scheme"])
    least = best.groupby("buffer_bytes")["dram_bytes"].transform("min")
    table = pd.DataFrame({
        "buffer": [f"{b / 1024:g} KiB" for b in best["buffer_bytes"]],
        "scheme": best["scheme"].str.upper(),
        "DRAM (MiB)": [f"{v / 2**20:.3f}" for v in best["dram_bytes"]],
        "MBU (KiB)": [f"{v / 1024:.1f}" for v in best["mbu_bytes"]],
        "cycles (M)": [f"{v / 1e6:.3f}" for v in best["cycles"]],
        **({"latency (ms)": [f"{v:.3f}" for v in best["latency_ms"]]}
           if "latency_ms" in best else {}),
        "energy (uJ)": [f"{v / 1e6:.1f}" for v in best["energy_pj"]],
        **({"area (mm2)": [f"{v:.3f}" for v in best["area_mm2"]]}
           if "area_mm2" in best else {}),
        "best": ["*" if d == m else "" for d, m in zip(best["dram_bytes"], least,
                                                       strict=True)],
    })
    shares = [_dataflow_shares(p) for p in best.get("plan", [None] * len(best))]
    if any(shares):
        table["groups per dataflow"] = shares
    model = done["model"].iloc[0]
    hw = ", ".join(sorted(set(done["hw_name"].astype(str))))
    return f"{model} on {hw}\n{table.to_string(index=False)}"


def _dataflow_shares(plan: str | None) -> str:
    """A hybrid plan's groups per dataflow (its plan.json's totals), else ""."""
    import json

    from fusion_dse.reports import dataflow_shares

    counts = json.loads(plan).get("totals", {}).get("groups_by_dataflow") if plan else None
    return dataflow_shares(counts) if counts else ""


RUNS = {"sweep": _run_sweep, "plot": _run_plot, "compare": _run_compare,
        "recommend": _run_recommend}
"""The code of the subcommands this module runs (options: ``cli.toml``)."""
