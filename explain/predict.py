"""Batched validity prediction with the shipped GNN checkpoints (used by the splitter).

`predict_valid(graph, groups, hw, scheme)` encodes every group at the hardware's buffer size and
element width and returns the GNN's probability that the group fits, one per group. The
checkpoint is loaded and verified once per process (per file version); a checkpoint trained
for another feature schema or architecture is refused with `CheckpointError`.

The shipped models were trained on buffers of 128 KiB to 2 MiB; other sizes extrapolate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from explain.batch import PackedGraphs
from explain.checkpoint import LoadedCheckpoint, load_checkpoint, shipped_checkpoint
from explain.features import encode_group
from explain.train import predict_logits, threads
from simulator.hw import HardwareConfig
from simulator.workload.graph import ComputeGraph

__all__ = ["load_predictor", "predict_valid"]


@lru_cache(maxsize=8)
def _load(path: str, scheme: str, mtime_ns: int) -> LoadedCheckpoint:
    return load_checkpoint(path, scheme)


def load_predictor(scheme: str, checkpoint: str | Path | None = None) -> LoadedCheckpoint:
    """The verified checkpoint for `scheme` (default: the shipped one), cached per file version.

    Raises:
        CheckpointError: Missing, tampered or mismatched checkpoint.
    """
    path = Path(checkpoint) if checkpoint is not None else shipped_checkpoint(scheme)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        mtime = -1  # load_checkpoint reports the missing file
    return _load(str(path.resolve()), scheme, mtime)


def predict_valid(graph: ComputeGraph, groups: Iterable[Sequence[int]], hw: HardwareConfig,
                  scheme: str, *, checkpoint: str | Path | None = None,
                  batch_size: int = 256) -> np.ndarray:
    """Probability that each group fits `hw`'s buffer under `scheme`, as the GNN predicts it.

    Args:
        graph: The network.
        groups: Fusion groups as op ids.
        hw: Hardware: its ``buffer_bytes`` and ``dtype_bytes`` enter the features.
        scheme: "lbdf" or "brr".
        checkpoint: A ``.pt`` file instead of the shipped checkpoint.
        batch_size: Groups per forward pass.

    Returns:
        (groups,) float64 probabilities in [0, 1].

    Raises:
        CheckpointError: The checkpoint is missing, tampered or does not match the code.
        InputError: A group that is empty, repeats an op or names an op not in `graph`.
    """
    loaded = load_predictor(scheme, checkpoint)
    encoded = [encode_group(graph, g, hw.dtype_bytes) for g in groups]
    if not encoded:
        return np.zeros(0, dtype=np.float64)
    packed = PackedGraphs.pack(encoded)
    n = len(encoded)
    with threads(1):  # graphs of a few nodes: one thread beats two (docs/gnn.md)
        logits = predict_logits(loaded.model, packed, np.arange(n),
                                np.full(n, float(hw.buffer_bytes)), batch_size)
    return 0.5 * (1.0 + np.tanh(0.5 * logits.astype(np.float64)))  # the logistic, no overflow
