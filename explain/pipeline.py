"""Reproducing a shipped checkpoint: dataset -> training -> held-out evaluation -> files.

`train_gnn` is what ``fusion-dse train-gnn`` runs: it builds (or reads from the cache) the
training and held-out datasets of one dataflow, trains the validity GNN, measures it on the
test split and on each held-out network, and writes into one folder the checkpoint
(``<scheme>.pt`` + ``<scheme>.json``), the Table I-style dataset counts
(``<scheme>-dataset.csv``/``.md``) and the Fig. 3-style validity plot (``validity.png``; the
other dataflow's panel is added when its dataset is already in the cache).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch_geometric

from explain.batch import content_ids
from explain.checkpoint import GRAPH_STAGE_SUFFIX, save_checkpoint
from explain.dataset import (
    HELD_OUT_GROUPS,
    Dataset,
    build_dataset,
    cache_key,
    cached_dataset,
    check_graph_stages,
    held_out_config,
    training_config,
)
from explain.features import FEATURE_SCHEMA
from explain.stats import dataset_table, plot_validity, write_dataset_table
from explain.train import (
    DEFAULT_EPOCHS,
    DEFAULT_THREADS,
    Metrics,
    TrainConfig,
    TrainResult,
    evaluate_model,
    train_model,
)
from simulator.hw import HardwareConfig
from simulator.scheme import FUSED_SCHEMES

__all__ = ["TrainGnnResult", "held_out_metrics", "metrics_table", "train_gnn"]


@dataclass(frozen=True)
class TrainGnnResult:
    """Everything one ``train-gnn`` run produced.

    Attributes:
        scheme: The dataflow.
        dataset: Training data (split into train/val/test by `training.split`).
        held_out: Groups of the networks never trained on.
        training: The trained model and its split metrics.
        held_out_metrics: Metrics per held-out network and over all of them ("all").
        files: Files written.
        seconds: Wall-clock time of the whole run (dataset included).
    """

    scheme: str
    dataset: Dataset
    held_out: Dataset
    training: TrainResult
    held_out_metrics: dict[str, Metrics]
    files: tuple[Path, ...]
    seconds: float


def held_out_metrics(training: TrainResult, held_out: Dataset) -> dict[str, Metrics]:
    """Metrics of the trained model on each held-out network and on all of them."""
    model = training.model()
    per = {name: evaluate_model(model, held_out, np.flatnonzero(held_out.network_index == k))
           for k, name in enumerate(held_out.networks)}
    return {**per, "all": evaluate_model(model, held_out)}


def metrics_table(training: TrainResult, held_out: Mapping[str, Metrics]) -> pd.DataFrame:
    """One row per evaluation set: samples, accuracy, F1, precision, recall, F1 of invalid."""
    rows = [(f"{name} split", m) for name, m in training.metrics.items()]
    rows += [(f"held-out {name}", m) for name, m in held_out.items()]
    return pd.DataFrame([{
        "set": name, "samples": m.n, "accuracy %": round(100 * m.accuracy, 2),
        "F1 %": round(100 * m.f1, 2), "precision %": round(100 * m.precision, 2),
        "recall %": round(100 * m.recall, 2), "F1 invalid %": round(100 * m.f1_invalid, 2),
        "valid %": round(100 * m.valid_fraction, 1),
    } for name, m in rows])


def _dataset_summary(ds: Dataset) -> dict[str, Any]:
    table = dataset_table(ds)
    return {
        "cache_key": cache_key(ds.config),
        "config": ds.config.to_dict(),
        "groups": ds.num_groups,
        "samples": ds.num_samples,
        "distinct_encodings": int(content_ids(ds.packed).max(initial=-1) + 1),
        "generation_seconds": round(ds.seconds, 2),
        "per_network": table.to_dict(orient="records"),
    }


def _metadata(result: TrainResult, ds: Dataset, held_out: Dataset,
              ho_metrics: Mapping[str, Metrics]) -> dict[str, Any]:
    return {
        "metrics": {**{k: m.to_dict() for k, m in result.metrics.items()},
                    "held_out": {k: m.to_dict() for k, m in ho_metrics.items()}},
        "dataset": {**_dataset_summary(ds), "split_groups": result.split.sizes(),
                    "split_by": "group (groups with identical encodings together)"},
        "held_out_dataset": _dataset_summary(held_out),
        "training": {
            **result.config.to_dict(), "best_epoch": result.best_epoch,
            "seconds": round(result.seconds, 1),
            "history": [{"epoch": h.epoch, "loss": round(h.loss, 5),
                         "val_accuracy": round(h.val_accuracy, 5), "seconds": round(h.seconds, 2)}
                        for h in result.history],
        },
        "graph_stages": ds.config.graph_stages,
        "feature_schema": [name for name, _ in FEATURE_SCHEMA],
        "versions": {"torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
                     "numpy": np.__version__, "python": platform.python_version()},
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _plot(scheme: str, ds: Dataset, seed: int, out: Path, suffix: str = "") -> Path:
    """Fig. 3 with this dataflow's panel, and the other's if its default dataset is cached."""
    datasets = {s: ds if s == scheme else cached_dataset(training_config(
        s, seed, hw=ds.config.hw, graph_stages=ds.config.graph_stages)) for s in FUSED_SCHEMES}
    return plot_validity({s: d for s, d in datasets.items() if d is not None},
                         out / f"validity{suffix}.png")


def train_gnn(scheme: str, out_dir: str | Path, *, hw: HardwareConfig,
              epochs: int = DEFAULT_EPOCHS, seed: int = 0,
              groups: Mapping[str, int] | None = None, held_out_groups: int = HELD_OUT_GROUPS,
              threads: int = DEFAULT_THREADS, progress: bool = False,
              graph_stages: str = "none") -> TrainGnnResult:
    """Build the data, train, evaluate and write the checkpoint and reports of `scheme`.

    Args:
        scheme: "lbdf" or "brr".
        out_dir: Folder for the checkpoint, tables and plot (created).
        hw: Hardware labelling the groups (its buffer overridden by each buffer size; the
            shipped checkpoints use the ``edge-npu`` preset).
        epochs: Training epochs.
        seed: Seed of the sampling, the split, the initialisation and the shuffling.
        groups: Per-network group counts overriding the defaults (`DEFAULT_GROUPS`).
        held_out_groups: Groups per held-out network.
        threads: Torch threads while training.
        progress: Progress bars on stderr.
        graph_stages: The networks as imported (``none``) or after the fuse stage (``fuse``);
            the files of ``fuse`` are named ``<scheme>-fused*`` (`GRAPH_STAGE_SUFFIX`).
    """
    start = time.perf_counter()
    out = Path(out_dir)
    graph_stages = check_graph_stages(graph_stages)
    name = f"{scheme}{GRAPH_STAGE_SUFFIX[graph_stages]}"
    ds = build_dataset(training_config(scheme, seed, groups, hw=hw, graph_stages=graph_stages),
                       progress=progress)
    held_out = build_dataset(held_out_config(scheme, seed, held_out_groups, hw=hw,
                                             graph_stages=graph_stages), progress=progress)
    result = train_model(ds, TrainConfig(epochs=epochs, seed=seed, threads=threads),
                         progress=progress)
    ho = held_out_metrics(result, held_out)
    json_path = save_checkpoint(out / f"{name}.pt", scheme, result.spec, result.state_dict,
                                _metadata(result, ds, held_out, ho), graph_stages)
    files = [out / f"{name}.pt", json_path]
    files += write_dataset_table(dataset_table(ds), out, f"{name}-dataset")
    files += write_dataset_table(dataset_table(held_out), out, f"{name}-held-out-dataset")
    files.append(_plot(scheme, ds, seed, out, GRAPH_STAGE_SUFFIX[graph_stages]))
    return TrainGnnResult(scheme, ds, held_out, result, ho, tuple(files),
                          time.perf_counter() - start)
