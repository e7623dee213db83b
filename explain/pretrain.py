"""Pre-training of the parameterised explainers (PGExplainer, RG-Explainer): data, training and
the held-out measurement, what ``fusion-dse train-explainer`` runs.

The paper pre-trains PG and RG "on the same training sets" as the GNN (§IV-A). Explainers only
ever see groups that do not fit, so the samples are the *invalid* (group, buffer) pairs of
random-search proposals on the GNN's training networks, at the paper's buffer sizes of the
hardware the caller passes (the shipped parameters: the ``edge-npu`` preset). The
trained parameters are measured on invalid groups drawn with another seed: the rectify rate of
the explanation alone (Table V's definition, `explain.tree_split`) with the top `K` edges.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from explain import defaults
from explain.dataset import DEFAULT_GROUPS, check_graph_stages, load_network, network_rng
from explain.sampling import sample_groups
from search.registry import EXPLAINERS, resolve
from simulator.cost import CostCache
from simulator.errors import InputError
from simulator.hw import HardwareConfig
from simulator.workload.graph import ComputeGraph

__all__ = ["BUFFERS_KIB", "DEFAULTS", "TRAINABLE", "PretrainResult", "invalid_samples",
           "pretrain_explainer", "rectify_rate"]

BUFFERS_KIB = (128, 256, 512, 1024, 2048)
Sample = tuple[ComputeGraph, tuple[int, ...], int, int]


def invalid_samples(scheme: str, per_network: int = 40, seed: int = 0,
                    networks: Sequence[str] | None = None, *,
                    hw: HardwareConfig, graph_stages: str = "none") -> list[Sample]:
    """(graph, group, buffer bytes, dtype bytes) of groups that do not fit, shuffled.

    Args:
        scheme: "lbdf" or "brr" (BRR: the networks without squeeze-and-excitation).
        per_network: Invalid samples kept per network.
        seed: Seed of the sampling (one generator per network, as for the GNN dataset).
        networks: Override of the GNN's training networks of `scheme`.
        hw: Hardware of the samples (its buffer overridden by each of `BUFFERS_KIB`).
        graph_stages: The networks as imported (``none``) or after the fuse stage (``fuse``).
    """
    names = list(networks or DEFAULT_GROUPS[scheme])
    samples: list[Sample] = []
    for name in names:
        samples.extend(_network_samples(name, scheme, per_network, seed, hw, graph_stages))
    rng = np.random.default_rng(seed)
    return [samples[k] for k in rng.permutation(len(samples))]


def _network_samples(name: str, scheme: str, count: int, seed: int,
                     hw: HardwareConfig, graph_stages: str = "none") -> list[Sample]:
    """Up to `count` invalid (group, buffer) pairs of one network: every sampled group at every
    buffer size of `BUFFERS_KIB` where it does not fit (as the GNN dataset labels each group at
    every size), groups in order of discovery."""
    graph = load_network(name, graph_stages)
    rng = network_rng(seed + 7, name)
    caches = [CostCache(graph, hw.with_overrides(buffer=f"{kib}KiB"), scheme)
              for kib in BUFFERS_KIB]
    found: list[Sample] = []
    for group in sample_groups(graph, 20 * count, rng):
        for cache in caches:
            if set(group) & set(cache.unfusable) or cache.group(group).fits:
                continue
            found.append((graph, group, cache.hw.buffer_bytes, cache.hw.dtype_bytes))
            if len(found) == count:
                return found
    return found


DEFAULTS = defaults.PRETRAIN
"""Epochs and invalid samples per training network of the shipped parameters."""

TRAINABLE = EXPLAINERS.by(lambda s: s.trainer is not None)
"""Explainers with parameters to pre-train (`search.registry.Strategy.trainer`)."""


@dataclass(frozen=True)
class PretrainResult:
    """What one pre-training run did.

    Attributes:
        explainer, scheme: Which parameters.
        graph_stages: The graph stage they were trained for (``none`` or ``fuse``).
        path: The parameters written.
        samples: Invalid groups trained on.
        epochs: Passes over them.
        seconds: Sampling and training time.
        held_out: Invalid groups of the held-out measurement.
        rectify_rate: Share of those the top `top_k` explained edges alone rectify.
        top_k: Explained edges per group in the measurement.
    """

    explainer: str
    scheme: str
    path: Path
    samples: int
    epochs: int
    seconds: float
    held_out: int
    rectify_rate: float
    top_k: int
    graph_stages: str = "none"


def rectify_rate(explainer, samples: Sequence[Sample], scheme: str, top_k: int = 4,
                 seed: int = 0, *, hw: HardwareConfig) -> float:
    """Share of invalid `samples` that the explainer's top `top_k` edges alone break into
    fitting pieces (Table V's rectify rate, `explain.tree_split.SplitStats`).

    Args:
        explainer: An `explain.tree_split.Explainer`.
        samples: (graph, group, buffer bytes, dtype bytes) of groups that do not fit.
        scheme: Their dataflow.
        top_k: Explained edges considered per group.
        seed: Seed of the explainer's randomness.
        hw: Hardware of the samples (its buffer overridden by each sample's).
    """
    from explain.tree_split import GetSplitter

    splitter = GetSplitter(explainer, max_edges=top_k, keep_baseline=False)
    rng = np.random.default_rng(seed)
    caches: dict[tuple[ComputeGraph, int], CostCache] = {}
    for graph, group, buffer_bytes, _ in samples:
        if (graph, buffer_bytes) not in caches:
            caches[graph, buffer_bytes] = CostCache(
                graph, hw.with_overrides(buffer=buffer_bytes), scheme)
        splitter.split(graph, group, caches[graph, buffer_bytes], rng)
    return splitter.stats.rectify_rate


def pretrain_explainer(explainer: str, scheme: str, out: str | Path | None = None,
                       epochs: int | None = None, per_network: int | None = None,
                       seed: int = 0, held_out_per_network: int = defaults.PRETRAIN_HELD_OUT,
                       top_k: int = defaults.PRETRAIN_TOP, *, hw: HardwareConfig,
                       graph_stages: str = "none") -> PretrainResult:
    """Train PGExplainer's or RG-Explainer's parameters for `scheme` and measure them.

    Args:
        explainer: ``"pg"`` or ``"rg"``.
        scheme: ``"lbdf"`` or ``"brr"``.
        out: Where to write (default: the shipped location, `explain/checkpoints`).
        epochs: Passes over the samples (default: `DEFAULTS`).
        per_network: Invalid samples per training network (default: `DEFAULTS`).
        seed: Seed of the sampling and the training; the held-out groups use ``seed + 1``.
        held_out_per_network: Invalid groups per training network in the measurement (0
            skips it).
        top_k: Explained edges per group in the measurement.
        hw: Hardware of the samples (the shipped parameters: the ``edge-npu`` preset).
        graph_stages: Train on the networks as imported (``none``) or after the fuse stage
            (``fuse``), explaining the GNN of that stage (default `out`:
            ``EXPLAINER-SCHEME-fused.pt`` for ``fuse``).
    """
    graph_stages = check_graph_stages(graph_stages)
    entry = EXPLAINERS.get(explainer)
    if entry.trainer is None:
        raise InputError(f"explainer {explainer!r} has no parameters to train; choose one of "
                         f"{', '.join(TRAINABLE)}")
    epochs = epochs or DEFAULTS[entry.name]["epochs"]
    per_network = per_network or DEFAULTS[entry.name]["per_network"]
    start = time.perf_counter()
    samples = invalid_samples(scheme, per_network, seed, hw=hw, graph_stages=graph_stages)
    path = resolve(entry.trainer)(scheme, samples, epochs=epochs, seed=seed,
                                  out=Path(out) if out is not None else None,
                                  graph_stages=graph_stages)
    seconds = time.perf_counter() - start
    held = (invalid_samples(scheme, held_out_per_network, seed + 1, hw=hw,
                            graph_stages=graph_stages) if held_out_per_network else [])
    rate = 0.0
    if held:
        get = resolve(entry.target)(checkpoint=Path(path), graph_stages=graph_stages)
        rate = rectify_rate(get, held, scheme, top_k, seed, hw=hw)
    return PretrainResult(entry.name, scheme, Path(path), len(samples), epochs, seconds,
                          len(held), rate, top_k, graph_stages)
