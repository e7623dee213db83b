"""The ``fusion-dse`` command line: thin adapters over the library's pure functions.

Every subcommand parses its arguments, calls one library function and renders the result as a
table (for people) or JSON/CSV (for scripts). Bad input of any kind ends with one line on stderr
and exit status 2; nothing is printed half-way. The options are declared in ``cli.toml``
(`fusion_dse.cli_args` builds the parser); this module attaches each subcommand's code, runs the
small ones (models, inspect, evaluate, simulate, explain) and owns `main`.

Answering at once: building the parser, ``--help``, ``--version``, ``models`` and the checks of
every input run before torch, pandas, pymoo, dask, torch_geometric or matplotlib are imported
(each subcommand imports what it computes with only once its inputs are checked; ``models``
reads the zoo catalog, `simulator.workload.zoo_catalog`). A test holds this
(tests/fusion_dse/test_cli_startup.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

from explain import defaults as explain_defaults
from explain.checkpoint import GRAPH_STAGE_SUFFIX
from fusion_dse import cli_args
from fusion_dse.cli_args import DEFAULT_OUT_ROOT, EXIT_USAGE, hw_overrides, model_and_shape
from fusion_dse.outputs import atomic_file, check_out_file, plot_formats
from fusion_dse.reports import ZOO_DTYPE_BYTES
from fusion_dse.runspec import (
    DEFAULT_MODEL,
    compare_defaults,
    recommend_defaults,
    run_defaults,
    shown,
)
from search.registry import (
    DEFAULT_EXACT_MAX_COSTED,
    DEFAULT_EXACT_TIME_LIMIT,
    EXPLAINERS,
    REPAIRS,
    SEARCHES,
)
from search.substitution.stages import DEFAULT_STAGES, SUBSTITUTIONS
from simulator.errors import InputError
from simulator.limits import allow_extreme_hw, escape_controls, one_line
from simulator.scheme import FUSED_SCHEMES, Scheme, searchable_schemes
from simulator.workload.loader import DEFAULT_INPUT_SHAPE

__all__ = ["main"]

EXIT_INTERRUPTED = 130


def _run_evaluate(args: argparse.Namespace) -> str:
    from fusion_dse import reports
    from fusion_dse.api import evaluate

    model, shape = model_and_shape(args)
    result = evaluate(model, args.hw, args.scheme, args.plan, hw_overrides(args), shape,
                      args.allow_opaque, args.graph_stages, args.substitution, args.seed)
    _notes(result.notes)
    if args.format == "json":
        return json.dumps(result.to_dict(), indent=2)
    return reports.evaluation_text(result)


def _run_simulate(args: argparse.Namespace) -> str:
    from fusion_dse import reports
    from fusion_dse.api import simulate

    if args.plot:
        check_out_file(args.plot, "--plot", plot_formats())
    if args.trace:
        check_out_file(args.trace, "--trace")
    model, shape = model_and_shape(args)
    result = simulate(model, args.hw, args.scheme, args.plan, hw_overrides(args), shape,
                      args.allow_opaque, args.graph_stages, args.substitution, args.seed)
    _notes(result.evaluation.notes)
    out = json.dumps(result.to_dict(), indent=2) if args.format == "json" \
        else reports.simulation_text(result)
    try:
        _write_artifacts(result, args.plot, args.trace)
    except InputError:
        print(out)  # the results computed so far are not lost
        raise
    return out


def _notes(notes: Sequence[str]) -> None:
    for note in notes:
        print(f"fusion-dse: note: {one_line(note)}", file=sys.stderr)


def _write_artifacts(result, plot: str | None, trace: str | None) -> None:
    graph, hw = result.evaluation.graph, result.evaluation.hw
    try:
        if plot:
            from fusion_dse.figure_style import size_text, title_of
            from fusion_dse.plots import plot_simulation

            shape = ", ".join("x".join(map(str, s)) for s in graph.input_shapes)
            title = title_of(f"{graph.name} ({shape})", hw.name, size_text(hw.buffer_bytes),
                             f"{str(result.report.scheme).upper()} plan simulated: buffer "
                             "occupancy, DRAM bandwidth, groups")
            with atomic_file(plot) as tmp:
                plot_simulation(result.report, tmp, title, hw.buffer_bytes)
        if trace:
            from simulator.engine.trace import chrome_trace

            with atomic_file(trace) as tmp:
                tmp.write_text(json.dumps(chrome_trace(result.report,
                                                       [op.name for op in graph])))
    except OSError as err:
        raise InputError(f"cannot write {err.filename!r}: {err.strerror}") from err


def _run_explain(args: argparse.Namespace) -> str:
    from fusion_dse.explanation import explain_group, explanation_text, write_plot

    if args.top <= 0:
        raise InputError(f"--top must be positive, got {args.top}")
    if args.plot:
        check_out_file(args.plot, "--plot", plot_formats())
    result = explain_group(args.model, args.group, args.hw, args.scheme, args.explainer,
                           hw_overrides(args), args.seed, args.top)
    out = json.dumps(result.to_dict(), indent=2) if args.format == "json" \
        else explanation_text(result)
    if args.plot:
        try:
            with atomic_file(args.plot) as tmp:
                write_plot(result, tmp)
        except OSError as err:
            print(out)
            raise InputError(f"cannot write {err.filename!r}: {err.strerror}") from err
    return out


def _run_rewrite(args: argparse.Namespace) -> str:
    from fusion_dse import reports
    from fusion_dse.api import resolve_hw
    from search.substitution.stages import parse_stages, run_stages
    from simulator.workload.loader import load

    stages = parse_stages(args.stages)
    check_out_file(args.out, "--out", ("json",))
    hw = resolve_hw(args.hw, hw_overrides(args))
    graph = load(args.model, args.input_shape, allow_opaque=args.allow_opaque)
    staged = run_stages(graph, stages, hw, args.scheme, algorithm=args.substitution,
                        seed=args.seed, progress=_stderr_line if sys.stderr.isatty() else None)
    record = staged.to_dict()
    out = json.dumps(record, indent=2) if args.format == "json" \
        else reports.rewrite_text(record, hw, args.scheme, args.out)
    try:
        with atomic_file(args.out) as tmp:
            tmp.write_text(staged.graph.to_json(indent=1) + "\n")
    except OSError as err:
        print(out)  # the report is not lost
        raise InputError(f"cannot write {err.filename!r}: {err.strerror}") from err
    return out


def _stderr_line(line: str) -> None:
    print(f"fusion-dse: {one_line(line)}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``fusion-dse`` (declared in ``fusion_dse/cli.toml``)."""
    from fusion_dse import cli_gnn, cli_optimize, cli_plans
    from fusion_dse.sweep import cli as sweep_cli

    runs = {"models": _run_models, "inspect": _run_inspect, "evaluate": _run_evaluate,
            "simulate": _run_simulate, "explain": _run_explain, "rewrite": _run_rewrite,
            **cli_optimize.RUNS, **cli_gnn.RUNS, **sweep_cli.RUNS, **cli_plans.RUNS}
    trainable = EXPLAINERS.by(lambda s: s.trainer is not None)
    schemes = [str(s) for s in Scheme]
    values = {
        "schemes": schemes, "scheme_names": ", ".join(schemes),
        "fused_schemes": [str(s) for s in FUSED_SCHEMES],
        "searchable_schemes": [str(s) for s in searchable_schemes()],
        "searches": SEARCHES.names(), "search_help": SEARCHES.help_text(),
        "repairs": REPAIRS.names(), "exact_time_limit": DEFAULT_EXACT_TIME_LIMIT,
        "exact_max_costed": DEFAULT_EXACT_MAX_COSTED,
        "explainers": EXPLAINERS.names(), "explainer_help": EXPLAINERS.help_text(),
        "trainable_explainers": trainable,
        "trainable_help": ", ".join(f"{n}: {EXPLAINERS.get(n).help}" for n in trainable),
        "plot_kinds": sweep_cli.PLOT_KINDS, "out_root": DEFAULT_OUT_ROOT,
        "store_dir": str(sweep_cli.DEFAULT_STORE_DIR),
        "default_stages": DEFAULT_STAGES, "substitutions": SUBSTITUTIONS,
        "default_model": DEFAULT_MODEL, "zoo_dtype_bytes": ZOO_DTYPE_BYTES,
        "default_input_shape": ",".join(map(str, DEFAULT_INPUT_SHAPE)),
        "trained_graph_stages": list(GRAPH_STAGE_SUFFIX), **_defaults(),
    }
    return cli_args.build_parser(runs, values)


def _defaults() -> dict[str, Any]:
    """Every default the parser shows, from the code that applies it: ``run.FIELD`` and
    ``compare.FIELD`` (`fusion_dse.runspec`) and ``explain.NAME`` (`explain.defaults`) for
    ``default_from``, and the same as namespaces (``{run.FIELD}`` in a help text), as shown."""
    per_network = {d["per_network"] for d in explain_defaults.PRETRAIN.values()}
    explain = {"explainer": explain_defaults.EXPLAINER, "top": explain_defaults.EXPLAIN_TOP,
               "max_edges": explain_defaults.MAX_EDGES, "epochs": explain_defaults.EPOCHS,
               "threads": explain_defaults.THREADS,
               "held_out_groups": explain_defaults.HELD_OUT_GROUPS,
               "pretrain_epochs": ", ".join(f"{name} {d['epochs']}" for name, d
                                            in explain_defaults.PRETRAIN.items()),
               "per_network": per_network.pop() if len(per_network) == 1 else ", ".join(
                   f"{name} {d['per_network']}" for name, d in explain_defaults.PRETRAIN.items()),
               "pretrain_held_out": explain_defaults.PRETRAIN_HELD_OUT,
               "pretrain_top": explain_defaults.PRETRAIN_TOP}
    out: dict[str, Any] = {f"explain.{k}": v for k, v in explain.items()}
    out.update(run_defaults(), **compare_defaults(), **recommend_defaults())
    from fusion_dse.sweep.tradeoff import METRICS, PLOT_METRIC

    out.update(plot_metric=PLOT_METRIC, metric_names=", ".join(METRICS))
    for prefix in ("run", "compare", "explain", "recommend"):
        out[prefix] = SimpleNamespace(**{k.removeprefix(f"{prefix}."): shown(v)
                                         for k, v in out.items()
                                         if isinstance(k, str) and k.startswith(f"{prefix}.")})
    return out


def _run_models(args: argparse.Namespace) -> str:
    from fusion_dse import reports

    if args.dtype_bytes <= 0:
        raise InputError(f"--dtype-bytes must be positive, got {args.dtype_bytes}")
    rows = reports.zoo_rows(args.dtype_bytes)
    return reports.render_rows(rows, args.format,
                               json_doc=reports.zoo_json(rows, args.dtype_bytes))


def _run_inspect(args: argparse.Namespace) -> str:
    from fusion_dse import reports
    from simulator.workload.loader import load

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = load(args.model, args.input_shape, allow_opaque=args.allow_opaque)
    for w in caught:
        print(f"fusion-dse: warning: {one_line(str(w.message))}", file=sys.stderr)
    if args.format == "json":
        return graph.to_json(indent=2)
    return reports.render(reports.op_table(graph), args.format)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fusion-dse`` console script; returns the exit status.

    Every failure a user can cause ends in one line on stderr: exit status 2 for bad input
    (`InputError`, an unwritable path or stdout, input too deep or too large to handle), 130
    for Ctrl-C; anything else is a bug and keeps its traceback (exit status 1). The line shows
    at most `simulator.limits.MAX_ERROR_CHARS` characters, control characters escaped, and
    so does what is written to stdout (names never drive the terminal).
    """
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exit_:  # --help, --version: printed; and to a full stdout?
            if exit_.code == 0 and (broken := _stdout_broken()) is not None:
                return _fail(f"cannot write to stdout: {broken}")
            raise
        except OSError as err:  # --help or --version written to a full disk or closed pipe
            _drop_stdout()
            return _fail(f"cannot write to stdout: {err.strerror or err}")
        run: Callable[[argparse.Namespace], str] = args.run
        with allow_extreme_hw(getattr(args, "allow_extreme_hw", False)):
            out = run(args)
    except InputError as err:
        return _fail(str(err))
    except KeyboardInterrupt:
        print("fusion-dse: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except RecursionError:
        return _fail("the input is nested too deeply to handle")
    except MemoryError:
        return _fail("out of memory handling the input (see docs/limits.md)")
    except OSError as err:
        if _stdout_broken() is not None:
            return _fail(f"cannot write to stdout: {err.strerror or err}")
        where = f" {err.filename!r}" if err.filename else ""
        return _fail(f"cannot access{where}: {err.strerror or err}")
    text = out if out.endswith("\n") else out + "\n"
    try:
        sys.stdout.write(_terminal_safe(text))
        sys.stdout.flush()
    except OSError as err:  # a full disk (> /dev/full), a closed pipe
        _drop_stdout()
        return _fail(f"cannot write to stdout: {err.strerror or err}")
    return 0


def _terminal_safe(text: str) -> str:
    """`text` with every control character but newlines and tabs escaped."""
    return "\n".join("\t".join(escape_controls(part) for part in line.split("\t"))
                     for line in text.split("\n"))


def _stdout_broken() -> str | None:
    """Why stdout can no longer be written, or None; a broken stdout is pointed at /dev/null,
    so that the interpreter's last flush prints no traceback."""
    try:
        sys.stdout.flush()
    except OSError as err:
        _drop_stdout()
        return err.strerror or str(err)
    return None


def _drop_stdout() -> None:
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):  # not a file (tests capture stdout)
        pass


def _fail(message: str) -> int:
    print(f"fusion-dse: error: {one_line(message)}", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
