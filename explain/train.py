"""Training and evaluation of the validity GNN (Mills et al. §IV-A).

The data are split 80/10/10 by *group*, not by sample: the five samples of a group (one per
buffer size) share its structure and would otherwise leak across the split; groups with
identical encodings share a split too. Training is Adam on the binary cross-entropy of the
logit, with a cosine learning-rate decay, for 50 epochs; the weights of the epoch with the best
validation accuracy are kept. Nothing here touches a global random state: shuffling draws from
the generator seeded with `TrainConfig.seed`, and the model is initialised inside
``torch.random.fork_rng``.

Torch on graphs of a dozen nodes spends most of its time in per-call overhead, so one thread is
the default (`DEFAULT_THREADS`; see docs/gnn.md for the measurement on the 2-core machine).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from explain import defaults
from explain.batch import PackedGraphs, content_ids
from explain.dataset import Dataset
from explain.gnn import GnnSpec, ValidityGNN
from simulator.errors import InputError

__all__ = [
    "DEFAULT_EPOCHS",
    "DEFAULT_THREADS",
    "EpochLog",
    "Metrics",
    "Split",
    "TrainConfig",
    "TrainResult",
    "binary_metrics",
    "evaluate_model",
    "predict_logits",
    "split_groups",
    "threads",
    "train_model",
]

DEFAULT_EPOCHS = defaults.EPOCHS
DEFAULT_THREADS = defaults.THREADS


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one training run.

    Attributes:
        epochs: Passes over the training split.
        batch_size: Samples (group at a buffer size) per step.
        lr: Initial Adam learning rate, decayed to `lr_final` along a cosine.
        lr_final: Learning rate at the last step.
        seed: Seed of the split, the initialisation and the shuffling.
        threads: Torch intra-op threads during training.
        split: Train, validation and test fractions of the groups.
    """

    epochs: int = DEFAULT_EPOCHS
    batch_size: int = 128
    lr: float = 2e-3
    lr_final: float = 2e-5
    seed: int = 0
    threads: int = DEFAULT_THREADS
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.threads < 1:
            raise InputError(f"epochs, batch size and threads must be positive, got "
                             f"{self.epochs}, {self.batch_size}, {self.threads}")
        if len(self.split) != 3 or min(self.split) < 0 or not math.isclose(sum(self.split), 1):
            raise InputError(f"split must be three fractions summing to 1, got {self.split}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**asdict(self), "split": list(self.split)}


@dataclass(frozen=True)
class Split:
    """Group indices of each part of the data."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray

    def sizes(self) -> dict[str, int]:
        """Groups per part."""
        return {"train": len(self.train), "val": len(self.val), "test": len(self.test)}


@dataclass(frozen=True)
class Metrics:
    """Binary classification metrics; the positive class is "valid" (fits the buffer).

    Attributes:
        n: Samples.
        accuracy, precision, recall, f1: Of the valid class.
        f1_invalid: F1 with "invalid" as the positive class.
        valid_fraction: Share of valid samples (the label balance).
    """

    n: int
    accuracy: float
    precision: float
    recall: float
    f1: float
    f1_invalid: float
    valid_fraction: float

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class EpochLog:
    """One epoch: mean training loss, validation accuracy, learning rate, seconds."""

    epoch: int
    loss: float
    val_accuracy: float
    lr: float
    seconds: float


@dataclass(frozen=True)
class TrainResult:
    """A trained model and how it was obtained.

    Attributes:
        spec: The architecture.
        state_dict: Weights of the best validation epoch.
        config: The hyper-parameters.
        split: The group split.
        history: Per-epoch log.
        best_epoch: Epoch whose weights were kept (1-based).
        metrics: "train", "val" and "test" metrics of the kept weights.
        seconds: Wall-clock time of the training loop.
    """

    spec: GnnSpec
    state_dict: dict[str, torch.Tensor]
    config: TrainConfig
    split: Split
    history: tuple[EpochLog, ...]
    best_epoch: int
    metrics: dict[str, Metrics]
    seconds: float = field(default=0.0)

    def model(self) -> ValidityGNN:
        """A fresh model holding the kept weights, in eval mode."""
        model = ValidityGNN(self.spec)
        model.load_state_dict(self.state_dict)
        return model.eval()


def _safe_div(a: float, b: float) -> float:
    return a / b if b else 0.0


def binary_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> Metrics:
    """Accuracy, precision, recall and F1 of binary predictions.

    Definitions as in scikit-learn's ``precision_recall_fscore_support`` (zero where a ratio
    is undefined); F1 is the harmonic mean of precision and recall (van Rijsbergen 1979).
    """
    t, p = np.asarray(y_true, bool), np.asarray(y_pred, bool)
    tp, tn = int((t & p).sum()), int((~t & ~p).sum())
    fp, fn = int((~t & p).sum()), int((t & ~p).sum())
    precision, recall = _safe_div(tp, tp + fp), _safe_div(tp, tp + fn)
    inv_p, inv_r = _safe_div(tn, tn + fn), _safe_div(tn, tn + fp)
    return Metrics(
        n=len(t), accuracy=_safe_div(tp + tn, len(t)), precision=precision, recall=recall,
        f1=_safe_div(2 * precision * recall, precision + recall),
        f1_invalid=_safe_div(2 * inv_p * inv_r, inv_p + inv_r),
        valid_fraction=_safe_div(int(t.sum()), len(t)),
    )


def split_groups(content: np.ndarray, fractions: tuple[float, float, float],
                 rng: np.random.Generator) -> Split:
    """Split groups 80/10/10 (by default) so that groups with one content id stay together.

    Args:
        content: (groups,) content id of every group (`explain.batch.content_ids`).
        fractions: Train, validation and test fractions.
        rng: Source of the permutation.
    """
    ids = np.unique(content)
    order = rng.permutation(ids)
    cut = np.round(np.cumsum(fractions)[:2] * len(ids)).astype(int)
    part = np.empty(int(content.max()) + 1 if len(content) else 0, dtype=np.int8)
    part[order[:cut[0]]], part[order[cut[0]:cut[1]]], part[order[cut[1]:]] = 0, 1, 2
    which = part[content]
    return Split(*(np.flatnonzero(which == k) for k in range(3)))


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """Run the block with `n` torch intra-op threads, restoring the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _new_model(spec: GnnSpec, seed: int) -> ValidityGNN:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ValidityGNN(spec)


@torch.inference_mode()
def predict_logits(model: nn.Module, packed: PackedGraphs, groups: np.ndarray,
                   buffer_bytes: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """Logits of samples (groups[i] at buffer_bytes[i])."""
    model.eval()
    out = []
    for a in range(0, len(groups), batch_size):
        b = packed.collate(groups[a:a + batch_size], buffer_bytes[a:a + batch_size])
        out.append(model(b.x, b.edge_index, b.batch).reshape(-1).numpy())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def evaluate_model(model: nn.Module, dataset: Dataset,
                   groups: np.ndarray | None = None) -> Metrics:
    """Metrics of `model` on every sample of `groups` (default: all) of `dataset`."""
    g, b = dataset.samples(groups)
    logits = predict_logits(model, dataset.packed, g, dataset.buffer_bytes[b])
    return binary_metrics(dataset.labels[g, b], logits > 0)


def _lr_at(config: TrainConfig, step: int, total: int) -> float:
    cosine = 0.5 * (1 + math.cos(math.pi * step / max(total - 1, 1)))
    return config.lr_final + (config.lr - config.lr_final) * cosine


def _epoch(model: ValidityGNN, opt: torch.optim.Optimizer, dataset: Dataset, g: np.ndarray,
           b: np.ndarray, config: TrainConfig, step: int, total: int) -> tuple[float, int]:
    model.train()
    loss_fn = nn.BCEWithLogitsLoss(reduction="sum")
    total_loss = 0.0
    for a in range(0, len(g), config.batch_size):
        for group in opt.param_groups:
            group["lr"] = _lr_at(config, step, total)
        batch = dataset.packed.collate(g[a:a + config.batch_size],
                                       dataset.buffer_bytes[b[a:a + config.batch_size]])
        target = torch.from_numpy(dataset.labels[g[a:a + config.batch_size],
                                                 b[a:a + config.batch_size]].astype(np.float32))
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(batch.x, batch.edge_index, batch.batch).reshape(-1), target)
        (loss / len(target)).backward()
        opt.step()
        total_loss += float(loss.detach())
        step += 1
    return total_loss / max(len(g), 1), step


def train_model(dataset: Dataset, config: TrainConfig | None = None,
                spec: GnnSpec | None = None, progress: bool = False) -> TrainResult:
    """Train the validity GNN on `dataset` and evaluate it on the held-back splits.

    Args:
        dataset: Labelled groups.
        config: Hyper-parameters (default `TrainConfig()`).
        spec: Architecture (default `GnnSpec()`).
        progress: Show a tqdm progress bar over the epochs.
    """
    config, spec = config or TrainConfig(), spec or GnnSpec()
    rng = np.random.default_rng(config.seed)
    split = split_groups(content_ids(dataset.packed), config.split, rng)
    if not len(split.train):
        raise InputError(f"no training groups in a dataset of {dataset.num_groups} groups")
    g_train, b_train = dataset.samples(split.train)
    steps = config.epochs * math.ceil(len(g_train) / config.batch_size)
    history: list[EpochLog] = []
    start = time.perf_counter()
    with threads(config.threads):
        model = _new_model(spec, config.seed)
        opt = torch.optim.Adam(model.parameters(), lr=config.lr)
        best = (-1.0, 0, {k: v.clone() for k, v in model.state_dict().items()})
        step = 0
        bar = tqdm(range(1, config.epochs + 1), desc="train-gnn", unit="epoch",
                   disable=not progress)
        for epoch in bar:
            t0 = time.perf_counter()
            order = rng.permutation(len(g_train))
            loss, step = _epoch(model, opt, dataset, g_train[order], b_train[order], config,
                                step, steps)
            val = evaluate_model(model, dataset, split.val).accuracy if len(split.val) else 0.0
            history.append(EpochLog(epoch, loss, val, _lr_at(config, step - 1, steps),
                                    time.perf_counter() - t0))
            bar.set_postfix(loss=f"{loss:.4f}", val_acc=f"{val:.4f}")
            if val > best[0]:
                best = (val, epoch, {k: v.clone() for k, v in model.state_dict().items()})
        seconds = time.perf_counter() - start
        model.load_state_dict(best[2])
        metrics = {name: evaluate_model(model, dataset, part)
                   for name, part in (("train", split.train), ("val", split.val),
                                      ("test", split.test)) if len(part)}
    return TrainResult(spec, best[2], config, split, tuple(history), best[1], metrics, seconds)
