"""``fusion-dse sweep``, ``plot`` and ``compare``: thin adapters over `fusion_dse.sweep`.

`add_sweep`, `add_plot` and `add_compare` add the subcommands to the ``fusion-dse``
subparsers action. ``sweep`` has two forms: ``sweep [SPEC.yaml] [axis flags]`` runs a sweep
and ``sweep export STORE`` writes a store as CSV or Parquet (the word ``export`` in place of
the spec; a spec file called ``export`` is written ``./export``). Bad input raises
`InputError` before anything starts (one line per problem, exit status 2).
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

import pandas as pd

from fusion_dse.cli_args import add_flag_table, add_format, add_model, add_subcommand
from simulator.errors import InputError

__all__ = ["DEFAULT_STORE_DIR", "add_compare", "add_plot", "add_sweep", "default_store"]

DEFAULT_STORE_DIR = Path("fusion-dse-out") / "sweeps"
_AXIS_FLAGS = (
    ("--models", "model", "M,M", "models: zoo names, .onnx/.json files, module:callable"),
    ("--hw", "hw", "P,P", "hardware presets or YAML files (default: edge-npu)"),
    ("--buffers", "buffer", "SIZES", "buffer sizes, e.g. 64KiB..2MiB:x2 or 128KiB,1MiB"),
    ("--schemes", "scheme", "S,S", "dataflows: lbdf, brr, lbl (default: lbdf)"),
    ("--searches", "search", "A,A", "search algorithms, any registered name (default: auto)"),
    ("--repairs", "repair", "R,R", "repairs, any registered name (default: random)"),
    ("--budget", "budget", "N", "plans per search, one value or a list/range (default: 2000)"),
    ("--seeds", "seed", "SEEDS", "seeds, e.g. 0..4 (default: 0)"),
    ("--input-shape", "input_shape", "N,C,H,W", "input shape override"),
)


def default_store(name: str) -> Path:
    """fusion-dse-out/sweeps/NAME.sqlite."""
    return DEFAULT_STORE_DIR / f"{name}.sqlite"


# --- sweep ----------------------------------------------------------------------------------


def add_sweep(sub: argparse._SubParsersAction) -> None:
    """Add ``sweep`` (run a sweep, or ``sweep export STORE``)."""
    p = add_subcommand(
        sub, "sweep", help="run a hardware sweep on Dask into a resumable store (or export one)",
        usage="fusion-dse sweep [SPEC.yaml] [axis options] [--workers N | --scheduler ADDR] "
              "[--store PATH] [--dry-run] [--retry-failed]\n"
              "       fusion-dse sweep export STORE [--format csv|parquet] [--out FILE]",
        description=textwrap.fill(
            "Run every point of a sweep (the product of its axes, with include/exclude "
            "lists) on Dask workers and store one row per point in an SQLite file. Points "
            "already stored are skipped, so a rerun resumes. The axes come from SPEC.yaml "
            "(see docs/sweeps.md) and/or the axis options below; an option replaces the "
            "spec's axis of the same name. 'sweep export STORE' writes a store as CSV or "
            "Parquet.", 88),
        epilog="Examples:\n"
               "  fusion-dse sweep experiments/specs/buffer_sweep.yaml --workers 2\n"
               "  fusion-dse sweep --models mobilenet_v2,resnet50 --buffers 64KiB..2MiB:x2 "
               "--schemes lbdf,brr --seeds 0..4 --budget 2000\n"
               "  fusion-dse sweep export fusion-dse-out/sweeps/sweep.sqlite --format csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", nargs="?", metavar="SPEC.yaml | export",
                   help="sweep spec file, or the word 'export' followed by STORE")
    p.add_argument("store_arg", nargs="?", metavar="STORE", help=argparse.SUPPRESS)
    axes = p.add_argument_group("axes", "comma lists and ranges: a,b  0..4  64KiB..2MiB:x2")
    add_flag_table(axes, _AXIS_FLAGS, "axis")
    axes.add_argument("--objectives", dest="axis_objectives", action="append", metavar="O,O",
                      help="objectives of one run, e.g. dram or dram,mbu (repeat for several)")
    axes.add_argument("--axis", dest="axis_more", action="append", default=[],
                      metavar="KEY=VALUES", help="any hardware field as an axis, e.g. "
                      "--axis dram_bandwidth=8,16,32 (repeatable)")
    run = p.add_argument_group("running")
    run.add_argument("--name", help="sweep name (default: the spec's, else 'sweep')")
    run.add_argument("--workers", type=int, metavar="N",
                     help="worker processes of the embedded Dask cluster (default: CPU cores)")
    run.add_argument("--scheduler", metavar="ADDR",
                     help="run on an existing Dask cluster, e.g. tcp://host:8786")
    run.add_argument("--store", metavar="PATH",
                     help=f"SQLite store (default: {DEFAULT_STORE_DIR}/NAME.sqlite)")
    run.add_argument("--dry-run", action="store_true",
                     help="print the points and an estimated time from two timed points")
    run.add_argument("--retry-failed", action="store_true", help="rerun points that failed")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    exp = p.add_argument_group("export (fusion-dse sweep export STORE)")
    add_format(exp, ("csv", "parquet"), "csv", help="export format (default: csv)")
    exp.add_argument("--out", metavar="FILE", help="export file (default: STORE with the "
                                                   "format's extension)")
    p.set_defaults(run=_run_sweep)


def _spec(args: argparse.Namespace):  # noqa: ANN202 - a SweepSpec
    from fusion_dse.sweep.spec import SweepSpec, canonical_axis, load_spec

    spec = load_spec(args.spec) if args.spec else None
    axes = {canonical_axis(k): v for k, v in spec.axes.items()} if spec else {}
    for key in [k for _, k, _, _ in _AXIS_FLAGS] + ["objectives"]:
        value = getattr(args, f"axis_{key}")
        if value is not None:
            axes[key] = value
    for item in args.axis_more:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--axis {item!r}: expected KEY=VALUES")
        axes[key.strip()] = value.strip()
    name = args.name or (spec.name if spec else "sweep")
    return SweepSpec(name=name, axes=axes, include=spec.include if spec else [],
                     exclude=spec.exclude if spec else [])


def _run_sweep(args: argparse.Namespace) -> str:
    if args.spec == "export":
        return _run_export(args)
    if args.store_arg is not None:
        raise InputError(f"unexpected argument {args.store_arg!r} (one SPEC.yaml at most)")
    if args.workers is not None and args.workers <= 0:
        raise InputError(f"--workers must be positive, got {args.workers}")
    from fusion_dse.sweep.engine import estimate_seconds, plan_sweep, run_sweep
    from fusion_dse.sweep.spec import expand, validate_points
    from fusion_dse.sweep.store import SweepStore

    spec = _spec(args)
    points = expand(spec)
    store = Path(args.store) if args.store else default_store(spec.name)
    if args.dry_run:
        validate_points(points)
        with SweepStore(store if store.exists() else ":memory:") as opened:
            plan = plan_sweep(points, opened, args.retry_failed)
        workers = args.workers or (1 if args.scheduler else _cores())
        seconds, timed = estimate_seconds(plan, workers)
        return (f"sweep {spec.name}: {len(points)} points, {plan.skipped} already in {store}, "
                f"{len(plan.todo)} to run; about {_duration(seconds)} on {workers} worker(s) "
                f"(from {timed} timed point(s))")
    outcome = run_sweep(points, store, spec.name, args.workers, args.scheduler,
                        args.retry_failed, args.quiet)
    _report_failures(store, outcome.failed)
    return (f"sweep {spec.name}: {outcome.total} points: {outcome.done} done, "
            f"{outcome.failed} failed, {outcome.skipped} skipped (already stored); "
            f"{_duration(outcome.seconds)} on {outcome.workers} worker(s); store {store}")


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def _duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{seconds:.1f} s"


def _report_failures(store: Path, failed: int) -> None:
    if not failed:
        return
    from fusion_dse.sweep import load_sweep

    frame = load_sweep(store)
    for _, row in frame[frame["status"] == "failed"].head(5).iterrows():
        run = f" {row['search']} seed {row['seed']}" if pd.notna(row["search"]) else ""
        print(f"fusion-dse: failed point {row['model']} {row['scheme']}{run}: {row['error']}",
              file=sys.stderr)


def _run_export(args: argparse.Namespace) -> str:
    from fusion_dse.sweep import load_sweep

    if args.store_arg is None:
        raise InputError("sweep export needs a STORE (fusion-dse sweep export STORE)")
    frame = load_sweep(args.store_arg)
    out = Path(args.out) if args.out else Path(args.store_arg).with_suffix(f".{args.format}")
    try:
        if args.format == "csv":
            frame.to_csv(out, index=False)
        else:
            frame.to_parquet(out, index=False)
    except OSError as err:
        raise InputError(f"cannot write {str(out)!r}: {err.strerror or err}") from err
    return f"{len(frame)} points written to {out}"


# --- plot -----------------------------------------------------------------------------------


def add_plot(sub: argparse._SubParsersAction) -> None:
    """Add ``plot tradeoff|budget|pareto|compare STORE``."""
    from fusion_dse.sweep.plots import KINDS

    p = add_subcommand(
        sub, "plot", help="draw a figure from a sweep store",
        description="tradeoff: DRAM against buffer size per model (mean and min-max band "
                    "over seeds, layer-by-layer and lower-bound lines). budget: best DRAM "
                    "against plans evaluated. pareto: the fronts of two-objective runs. "
                    "compare: a models x buffers grid naming the best dataflow and its "
                    "saving over the others.",
    )
    p.add_argument("kind", choices=tuple(KINDS), help="figure kind")
    p.add_argument("store", metavar="STORE", help="sweep store (.sqlite)")
    p.add_argument("--out", metavar="FILE", help="figure file, .png, .svg or .pdf "
                                                 "(default: STORE-KIND.png)")
    p.set_defaults(run=_run_plot)


def _run_plot(args: argparse.Namespace) -> str:
    from fusion_dse.sweep import load_sweep
    from fusion_dse.sweep.plots import KINDS, save_figure

    frame = load_sweep(args.store, blobs=args.kind in ("budget", "pareto"))
    fig, _ = KINDS[args.kind](frame)
    store = Path(args.store)
    out = Path(args.out) if args.out else store.with_name(f"{store.stem}-{args.kind}.png")
    return f"{args.kind} figure written to {save_figure(fig, out)}"


# --- compare --------------------------------------------------------------------------------


def add_compare(sub: argparse._SubParsersAction) -> None:
    """Add ``compare MODEL``: dataflows side by side over buffer sizes."""
    p = add_subcommand(
        sub, "compare", help="compare dataflows on one network over buffer sizes",
        description="Run the small sweep MODEL x buffers x schemes (searching each fused "
                    "dataflow) on the embedded Dask cluster, print DRAM, max buffer usage, "
                    "cycles and energy per scheme and buffer with the best marked, and "
                    "write the trade-off plot.",
    )
    add_model(p)
    p.add_argument("--hw", default="edge-npu", metavar="PRESET|FILE",
                   help="hardware preset or YAML file (default: edge-npu)")
    p.add_argument("--buffers", default="64KiB..2MiB:x2", metavar="SIZES",
                   help="buffer sizes (default: 64KiB..2MiB:x2)")
    p.add_argument("--schemes", default="lbdf,brr,lbl", metavar="S,S",
                   help="dataflows (default: lbdf,brr,lbl)")
    p.add_argument("--search", default="auto", help="search algorithm (default: auto)")
    p.add_argument("--repair", default="random", help="repair (default: random)")
    p.add_argument("--budget", default="1000", metavar="N", help="plans per search "
                                                                 "(default: 1000)")
    p.add_argument("--seeds", default="0", metavar="SEEDS", help="seeds (default: 0)")
    p.add_argument("--workers", type=int, metavar="N", help="worker processes (default: cores)")
    p.add_argument("--store", metavar="PATH", help=f"store (default: {DEFAULT_STORE_DIR}/"
                                                   "compare-MODEL.sqlite)")
    p.add_argument("--out", metavar="FILE", help="trade-off plot (default: next to the "
                                                 "store, compare-MODEL-tradeoff.png)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=_run_compare)


def _run_compare(args: argparse.Namespace) -> str:
    from fusion_dse.sweep import load_sweep
    from fusion_dse.sweep.engine import run_sweep
    from fusion_dse.sweep.plots import save_figure, tradeoff_figure
    from fusion_dse.sweep.spec import SweepSpec, expand
    from fusion_dse.sweep.store import point_key

    if args.workers is not None and args.workers <= 0:
        raise InputError(f"--workers must be positive, got {args.workers}")
    name = "compare-" + re.sub(r"[^A-Za-z0-9_@]+", "-", Path(args.model).stem).strip("-")
    spec = SweepSpec(name=name, axes={
        "model": [args.model], "hw": [args.hw], "buffer": args.buffers,
        "scheme": args.schemes, "search": [args.search], "repair": [args.repair],
        "budget": args.budget, "seed": args.seeds})
    points = expand(spec)
    store = Path(args.store) if args.store else default_store(name)
    outcome = run_sweep(points, store, name, args.workers, None, quiet=args.quiet)
    _report_failures(store, outcome.failed)
    keys = {point_key(p) for p in points}
    frame = load_sweep(store)
    frame = frame[frame["key"].isin(keys)]
    out = Path(args.out) if args.out else store.with_name(f"{name}-tradeoff.png")
    written = save_figure(tradeoff_figure(frame)[0], out)
    return f"{compare_table(frame)}\n\ntrade-off plot written to {written}"


def compare_table(frame: pd.DataFrame) -> str:
    """Per buffer and scheme, the best point's DRAM, MBU, cycles and energy; best DRAM '*'."""
    done = frame[frame["status"] == "done"]
    if done.empty:
        raise InputError("no point of the comparison finished")
    best = done.loc[done.groupby(["buffer_bytes", "scheme"])["dram_bytes"].idxmin()]
    best = best.sort_values(["buffer_bytes", "scheme"])
    least = best.groupby("buffer_bytes")["dram_bytes"].transform("min")
    table = pd.DataFrame({
        "buffer": [f"{b / 1024:g} KiB" for b in best["buffer_bytes"]],
        "scheme": best["scheme"].str.upper(),
        "DRAM (MB)": [f"{v / 1e6:.3f}" for v in best["dram_bytes"]],
        "MBU (KiB)": [f"{v / 1024:.1f}" for v in best["mbu_bytes"]],
        "cycles (M)": [f"{v / 1e6:.3f}" for v in best["cycles"]],
        "energy (uJ)": [f"{v / 1e6:.1f}" for v in best["energy_pj"]],
        "best": ["*" if d == m else "" for d, m in zip(best["dram_bytes"], least,
                                                       strict=True)],
    })
    model = done["model"].iloc[0]
    hw = ", ".join(sorted(set(done["hw_name"].astype(str))))
    return f"{model} on {hw}\n{table.to_string(index=False)}"
