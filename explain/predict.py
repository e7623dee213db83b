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
from explain.checkpoint import (
    LoadedCheckpoint,
    checkpoint_graph_stages,
    graph_stages_of,
    load_checkpoint,
    shipped_checkpoint,
)
from explain.features import capacities, encode_group
from explain.train import predict_logits, threads
from simulator.hw import HardwareConfig
from simulator.workload.graph import ComputeGraph

__all__ = ["load_predictor", "predict_valid"]


@lru_cache(maxsize=8)
def _load(path: str, scheme: str, mtime_ns: int, graph_stages: str | None) -> LoadedCheckpoint:
    return load_checkpoint(path, scheme, graph_stages)


def load_predictor(scheme: str, checkpoint: str | Path | None = None,
                   graph_stages: str | None = None) -> LoadedCheckpoint:
    """The verified checkpoint for `scheme`, cached per file version.

    Args:
        scheme: The dataflow.
        checkpoint: A ``.pt`` file instead of the shipped one.
        graph_stages: The graph stage of the graphs it will see: ``none`` (as imported; the
            default) or ``fuse`` (`explain.checkpoint.graph_stages_of` tells a graph's); the
            shipped checkpoint of that stage is loaded, and a `checkpoint` must have been
            trained for it.

    Raises:
        CheckpointError: Missing, tampered or mismatched checkpoint.
    """
    if graph_stages is not None:
        graph_stages = checkpoint_graph_stages(graph_stages)
    path = Path(checkpoint) if checkpoint is not None \
        else shipped_checkpoint(scheme, graph_stages or "none")
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        mtime = -1  # load_checkpoint reports the missing file
    return _load(str(path.resolve()), scheme, mtime, graph_stages)


def predict_valid(graph: ComputeGraph, groups: Iterable[Sequence[int]], hw: HardwareConfig,
                  scheme: str, *, checkpoint: str | Path | None = None,
                  batch_size: int = 256, graph_stages: str | None = None) -> np.ndarray:
    """Probability that each group fits `hw`'s buffer under `scheme`, as the GNN predicts it.

    Args:
        graph: The network.
        groups: Fusion groups as op ids.
        hw: Hardware: its buffer (or split buffers, `explain.features.capacities`) and
            ``dtype_bytes`` enter the features.
        scheme: "lbdf" or "brr".
        checkpoint: A ``.pt`` file instead of the shipped checkpoint.
        batch_size: Groups per forward pass.
        graph_stages: The checkpoint's graph stage (``none`` or ``fuse``); default: the one
            that suits `graph` (`explain.checkpoint.graph_stages_of`: ``fuse`` for a graph
            with fused activations).

    Returns:
        (groups,) float64 probabilities in [0, 1].

    Raises:
        CheckpointError: The checkpoint is missing, tampered or does not match the code.
        InputError: A group that is empty, repeats an op or names an op not in `graph`.
    """
    if graph_stages is None and checkpoint is None:
        graph_stages = graph_stages_of(graph)
    loaded = load_predictor(scheme, checkpoint, graph_stages)
    encoded = [encode_group(graph, g, hw.dtype_bytes) for g in groups]
    if not encoded:
        return np.zeros(0, dtype=np.float64)
    packed = PackedGraphs.pack(encoded)
    n = len(encoded)
    with threads(1):  # graphs of a few nodes: one thread beats two (docs/gnn.md)
        caps = np.asarray(capacities(hw), dtype=np.float64)
        logits = predict_logits(loaded.model, packed, np.arange(n),
                                np.repeat(caps[None], n, axis=0), batch_size)
    return 0.5 * (1.0 + np.tanh(0.5 * logits.astype(np.float64)))  # the logistic, no overflow
