"""``fusion-dse train-gnn`` and ``train-explainer``: reproduce the shipped validity-GNN
checkpoints and the PGExplainer / RG-Explainer parameters (wired in by `cli`).

Thin adapters over `explain.pipeline.train_gnn` and `explain.pretrain.pretrain_explainer`:
parse, run, print the metrics and counts, list the files written. Bad input raises
`InputError` (one line, exit status 2, from `fusion_dse.cli.main`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fusion_dse.cli_args import DEFAULT_OUT_ROOT
from fusion_dse.outputs import check_out_dir, check_out_file
from simulator.errors import InputError
from simulator.hw import DEFAULT_PRESET, load_hw

if TYPE_CHECKING:
    from explain.pipeline import TrainGnnResult

__all__ = ["DEFAULT_OUT_ROOT", "RUNS", "parse_group_counts", "run_train_explainer",
           "run_train_gnn", "summary_text"]


def run_train_explainer(args: argparse.Namespace) -> str:
    """Pre-train and measure an explainer; return the report text."""
    for value, flag in ((args.epochs, "--epochs"),
                        (args.samples_per_network, "--samples-per-network"),
                        (args.top, "--top")):
        _positive(value, flag)
    if args.held_out_per_network < 0:
        raise InputError(f"--held-out-per-network must be >= 0, got {args.held_out_per_network}")
    from explain.checkpoint import GRAPH_STAGE_SUFFIX

    suffix = GRAPH_STAGE_SUFFIX[args.graph_stages]
    out = check_out_file(args.out or Path(DEFAULT_OUT_ROOT)
                         / f"{args.explainer}-{args.scheme}{suffix}.pt",
                         "--out", create_parent=True)
    from explain.pretrain import pretrain_explainer  # torch: once the arguments are checked

    log = logging.getLogger("explain")
    handler = logging.StreamHandler(sys.stderr)  # one line per epoch (loss or reward; time)
    handler.setFormatter(logging.Formatter("fusion-dse: %(message)s"))
    level = log.level
    if not args.quiet:
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        r = pretrain_explainer(args.explainer, args.scheme, out, args.epochs,
                               args.samples_per_network, args.seed,
                               args.held_out_per_network, args.top,
                               hw=load_hw(DEFAULT_PRESET), graph_stages=args.graph_stages)
    except OSError as err:
        raise InputError(f"cannot write to {str(out)!r}: {err.strerror or err}") from err
    finally:  # in-process callers (tests, notebooks) must not collect handlers
        log.removeHandler(handler)
        log.setLevel(level)
    name = {"pg": "PGExplainer", "rg": "RG-Explainer"}[r.explainer]
    lines = [f"{name} for {r.scheme} (graph stage {r.graph_stages}): trained on "
             f"{r.samples:,} invalid groups, {r.epochs} epochs, {r.seconds:.0f} s (sampling "
             "included)"]
    if r.held_out:
        lines.append(f"held-out rectify rate (top {r.top_k} edges alone): "
                     f"{r.rectify_rate:.1%} of {r.held_out:,} invalid groups")
    lines.append(f"parameters in {r.path}")
    return "\n".join(lines)


def parse_group_counts(text: str | None, scheme: str) -> dict[str, int] | None:
    """``--samples-per-network``: None, one count for every network, or NAME=N pairs."""
    if text is None:
        return None
    text = text.strip()
    if text.isdigit():
        from explain.dataset import DEFAULT_GROUPS  # torch

        return dict.fromkeys(DEFAULT_GROUPS[scheme], int(text))
    counts: dict[str, int] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit():
            raise InputError(f"--samples-per-network {text!r}: expected N or NAME=N,... "
                             f"(bad item {item!r})")
        counts[name.strip()] = int(value)
    return counts


def _positive(value: int | None, flag: str) -> None:
    if value is not None and value <= 0:
        raise InputError(f"{flag} must be positive, got {value}")


def run_train_gnn(args: argparse.Namespace) -> str:
    """Run the training pipeline and return the report text."""
    for value, flag in ((args.epochs, "--epochs"), (args.held_out_groups, "--held-out-groups"),
                        (args.threads, "--threads")):
        _positive(value, flag)
    from explain.checkpoint import GRAPH_STAGE_SUFFIX

    stages = args.graph_stages
    out = check_out_dir(args.out or Path(DEFAULT_OUT_ROOT)
                        / f"gnn-{args.scheme}{GRAPH_STAGE_SUFFIX[stages]}", "--out")
    groups = parse_group_counts(args.samples_per_network, args.scheme)
    from explain.dataset import HELD_OUT_GROUPS  # torch, pandas: once the arguments are checked
    from explain.pipeline import train_gnn
    from explain.train import DEFAULT_EPOCHS, DEFAULT_THREADS

    try:
        result = train_gnn(
            args.scheme, out, epochs=args.epochs or DEFAULT_EPOCHS, seed=args.seed,
            groups=groups,
            held_out_groups=args.held_out_groups or HELD_OUT_GROUPS,
            threads=args.threads or DEFAULT_THREADS, hw=load_hw(DEFAULT_PRESET),
            progress=not args.quiet and sys.stderr.isatty(), graph_stages=stages)
    except OSError as err:
        raise InputError(f"cannot write to {str(out)!r}: {err.strerror or err}") from err
    return summary_text(result)


RUNS = {"train-gnn": run_train_gnn, "train-explainer": run_train_explainer}
"""The code of the subcommands this module runs (options: ``cli.toml``)."""


def summary_text(result: TrainGnnResult) -> str:
    """The report printed after a run: metrics, dataset counts, timings, files."""
    from explain.pipeline import metrics_table
    from explain.stats import dataset_table

    t, ds = result.training, result.dataset
    lines = [
        f"validity GNN for {result.scheme} (graph stage {ds.config.graph_stages}): "
        f"{ds.num_groups:,} groups / {ds.num_samples:,} "
        f"samples ({'cached' if ds.from_cache else f'generated in {ds.seconds:.0f} s'}), "
        f"split {t.split.sizes()} groups",
        f"trained {t.config.epochs} epochs in {t.seconds:.0f} s on {t.config.threads} "
        f"thread(s), kept epoch {t.best_epoch}; whole run {result.seconds:.0f} s",
        "",
        metrics_table(t, result.held_out_metrics).to_string(index=False),
        "",
        dataset_table(ds).to_string(index=False),
        "",
        f"outputs in {result.files[0].parent}: {', '.join(f.name for f in result.files)}",
    ]
    return "\n".join(lines)
