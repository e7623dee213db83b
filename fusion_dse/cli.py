"""The ``fusion-dse`` command line: thin adapters over the library's pure functions.

Every subcommand parses its arguments, calls one library function and renders the result as a
table (for people) or JSON/CSV (for scripts). Bad input of any kind ends with one line on stderr
and exit status 2; nothing is printed half-way.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable, Sequence

from fusion_dse import reports
from fusion_dse.cli_args import (
    add_allow_opaque,
    add_format,
    add_hw_arguments,
    add_model,
    add_subcommand,
    hw_overrides,
)
from fusion_dse.cli_gnn import add_train_explainer, add_train_gnn
from fusion_dse.cli_optimize import add_optimize
from fusion_dse.outputs import atomic_file, check_out_file, plot_formats
from search.registry import EXPLAINERS
from simulator.errors import InputError
from simulator.limits import allow_extreme_hw
from simulator.scheme import FUSED_SCHEMES, Scheme

__all__ = ["main"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2, like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _add_models(sub: argparse._SubParsersAction) -> None:
    p = add_subcommand(
        sub, "models", help="list the zoo networks with their size and cost figures",
        description="List every zoo network: input shape, op and conv counts, parameters "
                    "(as torchvision counts them), weights after BatchNorm folding, MACs and "
                    "the bytes of all activation tensors.",
    )
    add_format(p, ("table", "json", "csv"))
    p.add_argument("--dtype-bytes", type=int, default=1, metavar="B",
                   help="bytes per element for activation bytes (default: 1, int8)")
    p.set_defaults(run=_run_models)


def _add_inspect(sub: argparse._SubParsersAction) -> None:
    p = add_subcommand(
        sub, "inspect", help="print the per-op table of a network",
        description="Import a network and print one row per op: id, name, kind, input op ids, "
                    "input/output shapes, weight elements, MACs and DNNFusion mapping type.",
        epilog="MODEL is a zoo name (optionally with a resolution, e.g. resnet50@320), a path "
               "to an .onnx model or a graph .json, or module:callable returning an nn.Module.",
    )
    add_model(p)
    p.add_argument("--input-shape", metavar="N,C,H,W",
                   help="input shape (default: the zoo's, the ONNX file's, or 1,3,224,224)")
    add_format(p, ("table", "json", "csv"),
               help="output format (default: table); json is the graph document")
    add_allow_opaque(p)
    p.set_defaults(run=_run_inspect)


def _add_plan_arguments(p: argparse.ArgumentParser, verb: str) -> None:
    """MODEL, dataflow, plan, input shape, output format and the hardware options."""
    add_model(p)
    p.add_argument("--scheme", choices=[str(s) for s in Scheme], default=None,
                   help="dataflow (default: the plan file's, else lbdf)")
    p.add_argument("--plan", metavar="PLAN.json", help=f"plan to {verb} (default: layer by "
                                                       "layer); its scheme, hardware and "
                                                       "buffer apply unless given")
    p.add_argument("--input-shape", metavar="N,C,H,W", help="input shape override")
    add_format(p)
    add_allow_opaque(p)
    add_hw_arguments(p, default=None, default_text="the plan file's, else edge-npu")


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = add_subcommand(
        sub, "evaluate", help="cost a partition plan (default: layer by layer) under a dataflow",
        description="Cost a partition plan of MODEL on a hardware configuration: DRAM traffic "
                    "(whole network and fuseable ops, next to the compulsory lower bound and "
                    "the layer-by-layer reference), max buffer usage, cycles, energy, and each "
                    "group's buffer requirement F_beta and DRAM traffic F_D.",
        epilog="A plan file is JSON: {\"groups\": [[op names or ids], ...]} or the plan.json "
               "that fusion-dse optimize writes. Groups over the buffer are reported, not "
               "refused; a plan that is not a partition (unknown op, overlap, missing ops, "
               "a cycle between groups) is refused.",
    )
    _add_plan_arguments(p, "cost")
    p.set_defaults(run=_run_evaluate)


def _run_evaluate(args: argparse.Namespace) -> str:
    from fusion_dse.api import evaluate

    result = evaluate(args.model, args.hw, args.scheme, args.plan, hw_overrides(args),
                      args.input_shape, args.allow_opaque)
    _notes(result.notes)
    if args.format == "json":
        return json.dumps(result.to_dict(), indent=2)
    return reports.evaluation_text(result)


def _add_simulate(sub: argparse._SubParsersAction) -> None:
    p = add_subcommand(
        sub, "simulate", help="execute a plan on the cycle-approximate simulator",
        description="Execute a partition plan of MODEL event by event (simpy): DRAM transfers "
                    "over a bandwidth-limited channel, a PE array, a buffer of the given "
                    "capacity. Prints cycles, compute- vs DRAM-bound time, stalls, DRAM bytes, "
                    "peak buffer occupancy and energy, per group and in total, next to the "
                    "analytic model.",
        epilog="--plot draws buffer occupancy and DRAM bandwidth over time with group "
               "boundaries and a Gantt row per group; --trace writes Chrome trace-event JSON "
               "(open it in https://ui.perfetto.dev).",
    )
    _add_plan_arguments(p, "run")
    p.add_argument("--plot", metavar="OUT.png", help="write the occupancy/bandwidth/Gantt plot")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome trace-event file")
    p.set_defaults(run=_run_simulate)


def _run_simulate(args: argparse.Namespace) -> str:
    from fusion_dse.api import simulate

    if args.plot:
        check_out_file(args.plot, "--plot", plot_formats())
    if args.trace:
        check_out_file(args.trace, "--trace")
    result = simulate(args.model, args.hw, args.scheme, args.plan, hw_overrides(args),
                      args.input_shape, args.allow_opaque)
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
        print(f"fusion-dse: note: {note}", file=sys.stderr)


def _write_artifacts(result, plot: str | None, trace: str | None) -> None:
    graph, hw = result.evaluation.graph, result.evaluation.hw
    try:
        if plot:
            from fusion_dse.plots import plot_simulation

            with atomic_file(plot) as tmp:
                plot_simulation(result.report, tmp, f"{graph.name}, {result.report.scheme}, "
                                f"{hw.name} ({hw.buffer_bytes / 1024:,.0f} KiB)",
                                hw.buffer_bytes)
        if trace:
            from simulator.engine.trace import chrome_trace

            with atomic_file(trace) as tmp:
                tmp.write_text(json.dumps(chrome_trace(result.report,
                                                       [op.name for op in graph])))
    except OSError as err:
        raise InputError(f"cannot write {err.filename!r}: {err.strerror}") from err


def _add_explain(sub: argparse._SubParsersAction) -> None:
    p = add_subcommand(
        sub, "explain", help="explain why a fusion group does not fit and split it",
        description="Rank the edges of a fusion group by how much they make it exceed the "
                    "buffer (a graph-explanation technique on the validity GNN), split the "
                    "group along them with the recursive greedy splitter (Algorithm 1), and "
                    "show the explained edges, the pieces and the cut.",
        epilog="--group takes op names or ids separated by commas; A:B is the ids A to B "
               "(fusion-dse inspect MODEL lists them). --plot draws the group with the "
               "explained edges and the cut highlighted.",
    )
    add_model(p)
    p.add_argument("--group", required=True, metavar="OPS", help="the group: OP,OP,... or A:B")
    p.add_argument("--explainer", choices=EXPLAINERS.names(), default="gnne",
                   help="graph-explanation technique: "
                        f"{EXPLAINERS.help_text()} (default: gnne)")
    p.add_argument("--scheme", choices=[str(s) for s in FUSED_SCHEMES],
                   default=str(Scheme.LBDF),
                   help="dataflow (default: lbdf)")
    p.add_argument("--top", type=int, default=8, metavar="K",
                   help="explained edges the splitter considers (default: 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of the explainer (default: 0)")
    add_format(p)
    p.add_argument("--plot", metavar="OUT.png", help="draw the group, explanation and cut")
    add_hw_arguments(p)
    p.set_defaults(run=_run_explain)


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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``fusion-dse``."""
    parser = _Parser(
        prog="fusion-dse",
        description="Design-space exploration of layer fusion for CNN accelerators.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    _add_models(sub)
    _add_inspect(sub)
    _add_evaluate(sub)
    add_optimize(sub)
    _add_simulate(sub)
    _add_explain(sub)
    add_train_gnn(sub)
    add_train_explainer(sub)
    from fusion_dse.sweep.cli import add_compare, add_plot, add_sweep

    add_sweep(sub)
    add_plot(sub)
    add_compare(sub)
    return parser


def _run_models(args: argparse.Namespace) -> str:
    if args.dtype_bytes <= 0:
        raise InputError(f"--dtype-bytes must be positive, got {args.dtype_bytes}")
    table = reports.zoo_table(args.dtype_bytes, progress=sys.stderr.isatty())
    return reports.render(table, args.format, json_doc=reports.zoo_json(table, args.dtype_bytes))


def _run_inspect(args: argparse.Namespace) -> str:
    from simulator.workload.loader import load

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = load(args.model, args.input_shape, allow_opaque=args.allow_opaque)
    for w in caught:
        print(f"fusion-dse: warning: {w.message}", file=sys.stderr)
    if args.format == "json":
        return graph.to_json(indent=2)
    return reports.render(reports.op_table(graph), args.format)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fusion-dse`` console script; returns the exit status.

    Every failure a user can cause ends in one line on stderr: exit status 2 for bad input
    (`InputError`, an unwritable path, input too deep or too large to handle), 130 for Ctrl-C;
    anything else is a bug and keeps its traceback (exit status 1).
    """
    try:
        args = build_parser().parse_args(argv)
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
        where = f" {err.filename!r}" if err.filename else ""
        return _fail(f"cannot access{where}: {err.strerror or err}")
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return 0


def _fail(message: str) -> int:
    print(f"fusion-dse: error: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
