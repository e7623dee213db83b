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

from fusion_dse.cli_args import add_subcommand
from fusion_dse.outputs import check_out_dir, check_out_file
from search.registry import EXPLAINERS
from simulator.errors import InputError
from simulator.hw import DEFAULT_PRESET, load_hw
from simulator.scheme import FUSED_SCHEMES

if TYPE_CHECKING:
    from explain.pipeline import TrainGnnResult

__all__ = ["DEFAULT_OUT_ROOT", "add_train_explainer", "add_train_gnn", "parse_group_counts",
           "run_train_explainer", "run_train_gnn", "summary_text"]

DEFAULT_OUT_ROOT = "fusion-dse-out"


def add_train_gnn(sub: argparse._SubParsersAction) -> None:
    """Add the ``train-gnn`` subcommand to a `fusion-dse` subparsers action."""
    p = add_subcommand(
        sub, "train-gnn", help="train the GNN that predicts whether a fusion group fits the buffer",
        description="Reproduce a shipped validity-GNN checkpoint (Mills et al. §IV-A): sample "
                    "distinct fusion groups of the training networks by random search, label "
                    "each with the dataflow's cost model at 128..2048 KiB, train 4 GraphConv "
                    "layers on an 80/10/10 split by group, and measure the model on the test "
                    "split and on networks never trained on. Writes SCHEME.pt and SCHEME.json "
                    "(metrics, dataset statistics, versions), the Table I-style counts "
                    "SCHEME-dataset.csv/.md and the Fig. 3-style plot validity.png to --out.",
        epilog="Datasets are cached under $FUSION_DSE_CACHE (default ~/.cache/fusion-dse). To "
               "replace the shipped checkpoints: --out explain/checkpoints. The same --seed "
               "gives the same dataset and split.",
    )
    p.add_argument("--scheme", choices=[str(s) for s in FUSED_SCHEMES], required=True,
                   help="dataflow whose validity the model predicts")
    p.add_argument("--epochs", type=int, default=None, metavar="N",
                   help="training epochs (default: 50)")
    p.add_argument("--out", metavar="DIR",
                   help=f"output folder, created (default: {DEFAULT_OUT_ROOT}/gnn-SCHEME)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed (default: 0)")
    p.add_argument("--samples-per-network", metavar="N|NAME=N,...",
                   help="distinct groups to draw per training network (each labelled at 5 "
                        "buffer sizes): one count for every network, or NAME=N pairs "
                        "overriding the defaults (0 drops a network)")
    p.add_argument("--held-out-groups", type=int, default=None, metavar="N",
                   help="groups per held-out network (default: 1000)")
    p.add_argument("--threads", type=int, default=None, metavar="T",
                   help="torch threads while training (default: 1, the faster here)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bars (they are shown only when stderr is a terminal)")
    p.set_defaults(run=run_train_gnn)


def add_train_explainer(sub: argparse._SubParsersAction) -> None:
    """Add the ``train-explainer`` subcommand to a `fusion-dse` subparsers action."""
    p = add_subcommand(
        sub, "train-explainer", help="pre-train PGExplainer or RG-Explainer on the validity GNN",
        description="Reproduce the shipped parameters of a parameterised explainer (Mills et "
                    "al. §IV-A: pre-trained on the GNN's training networks): sample groups "
                    "that do not fit from random-search proposals at 128..2048 KiB, train "
                    "PGExplainer's edge scorer or RG-Explainer's seed locator and policy on "
                    "them, write the parameters, and measure them on invalid groups drawn "
                    "with seed+1: the rectify rate of the top-K explained edges alone.",
        epilog="To replace the shipped parameters: --out explain/checkpoints/EXPLAINER-SCHEME.pt "
               "(RG parameters record the GNN they explain and are refused by another one).",
    )
    trainable = EXPLAINERS.by(lambda s: s.trainer is not None)
    p.add_argument("--explainer", choices=trainable, required=True,
                   help=", ".join(f"{n}: {EXPLAINERS.get(n).help}" for n in trainable))
    p.add_argument("--scheme", choices=[str(s) for s in FUSED_SCHEMES], required=True,
                   help="dataflow of the GNN explained")
    p.add_argument("--epochs", type=int, default=None, metavar="N",
                   help="passes over the samples (default: pg 30, rg 10)")
    p.add_argument("--samples-per-network", type=int, default=None, metavar="N",
                   help="invalid groups drawn per training network (default: 40)")
    p.add_argument("--held-out-per-network", type=int, default=10, metavar="N",
                   help="invalid groups per network in the measurement (default: 10; 0 skips)")
    p.add_argument("--top", type=int, default=4, metavar="K",
                   help="explained edges per group in the measurement (default: 4)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed (default: 0)")
    p.add_argument("--out", metavar="FILE.pt",
                   help=f"parameters file (default: {DEFAULT_OUT_ROOT}/EXPLAINER-SCHEME.pt)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no per-epoch progress lines on stderr")
    p.set_defaults(run=run_train_explainer)


def run_train_explainer(args: argparse.Namespace) -> str:
    """Pre-train and measure an explainer; return the report text."""
    for value, flag in ((args.epochs, "--epochs"),
                        (args.samples_per_network, "--samples-per-network"),
                        (args.top, "--top")):
        _positive(value, flag)
    if args.held_out_per_network < 0:
        raise InputError(f"--held-out-per-network must be >= 0, got {args.held_out_per_network}")
    from explain.pretrain import pretrain_explainer

    out = check_out_file(args.out or Path(DEFAULT_OUT_ROOT) / f"{args.explainer}-{args.scheme}.pt",
                         "--out", create_parent=True)
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
                               hw=load_hw(DEFAULT_PRESET))
    except OSError as err:
        raise InputError(f"cannot write to {str(out)!r}: {err.strerror or err}") from err
    finally:  # in-process callers (tests, notebooks) must not collect handlers
        log.removeHandler(handler)
        log.setLevel(level)
    name = {"pg": "PGExplainer", "rg": "RG-Explainer"}[r.explainer]
    lines = [f"{name} for {r.scheme}: trained on {r.samples:,} invalid groups, {r.epochs} "
             f"epochs, {r.seconds:.0f} s (sampling included)"]
    if r.held_out:
        lines.append(f"held-out rectify rate (top {r.top_k} edges alone): "
                     f"{r.rectify_rate:.1%} of {r.held_out:,} invalid groups")
    lines.append(f"parameters in {r.path}")
    return "\n".join(lines)


def parse_group_counts(text: str | None, scheme: str) -> dict[str, int] | None:
    """``--samples-per-network``: None, one count for every network, or NAME=N pairs."""
    from explain.dataset import DEFAULT_GROUPS

    if text is None:
        return None
    text = text.strip()
    if text.isdigit():
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
    from explain.dataset import HELD_OUT_GROUPS
    from explain.pipeline import train_gnn
    from explain.train import DEFAULT_EPOCHS, DEFAULT_THREADS

    for value, flag in ((args.epochs, "--epochs"), (args.held_out_groups, "--held-out-groups"),
                        (args.threads, "--threads")):
        _positive(value, flag)
    out = check_out_dir(args.out or Path(DEFAULT_OUT_ROOT) / f"gnn-{args.scheme}", "--out")
    try:
        result = train_gnn(
            args.scheme, out, epochs=args.epochs or DEFAULT_EPOCHS, seed=args.seed,
            groups=parse_group_counts(args.samples_per_network, args.scheme),
            held_out_groups=args.held_out_groups or HELD_OUT_GROUPS,
            threads=args.threads or DEFAULT_THREADS, hw=load_hw(DEFAULT_PRESET),
            progress=not args.quiet and sys.stderr.isatty())
    except OSError as err:
        raise InputError(f"cannot write to {str(out)!r}: {err.strerror or err}") from err
    return summary_text(result)


def summary_text(result: TrainGnnResult) -> str:
    """The report printed after a run: metrics, dataset counts, timings, files."""
    from explain.pipeline import metrics_table
    from explain.stats import dataset_table

    t, ds = result.training, result.dataset
    lines = [
        f"validity GNN for {result.scheme}: {ds.num_groups:,} groups / {ds.num_samples:,} "
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
