"""Pre-training data for the parameterised explainers (PGExplainer, RG-Explainer).

The paper pre-trains PG and RG "on the same training sets" as the GNN (§IV-A). Explainers only
ever see groups that do not fit, so the samples are the *invalid* (group, buffer) pairs of
random-search proposals on the GNN's training networks, at the paper's buffer sizes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from explain.dataset import DEFAULT_GROUPS, network_rng
from explain.sampling import sample_groups
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load_zoo

__all__ = ["BUFFERS_KIB", "invalid_samples"]

BUFFERS_KIB = (128, 256, 512, 1024, 2048)
Sample = tuple[ComputeGraph, tuple[int, ...], int, int]


def invalid_samples(scheme: str, per_network: int = 40, seed: int = 0,
                    networks: Sequence[str] | None = None) -> list[Sample]:
    """(graph, group, buffer bytes, dtype bytes) of groups that do not fit, shuffled.

    Args:
        scheme: "lbdf" or "brr" (BRR: the networks without squeeze-and-excitation).
        per_network: Invalid samples kept per network.
        seed: Seed of the sampling (one generator per network, as for the GNN dataset).
        networks: Override of the GNN's training networks of `scheme`.
    """
    names = list(networks or DEFAULT_GROUPS[scheme])
    samples: list[Sample] = []
    for name in names:
        samples.extend(_network_samples(name, scheme, per_network, seed))
    rng = np.random.default_rng(seed)
    return [samples[k] for k in rng.permutation(len(samples))]


def _network_samples(name: str, scheme: str, count: int, seed: int) -> list[Sample]:
    graph = load_zoo(name)
    rng = network_rng(seed + 7, name)
    groups = sample_groups(graph, 4 * count, rng)
    found: list[Sample] = []
    for group in groups:
        kib = int(rng.choice(BUFFERS_KIB))
        hw = load_hw("edge-npu", {"buffer": f"{kib}KiB"})
        cache = CostCache(graph, hw, scheme)
        if set(group) & set(cache.unfusable) or cache.group(group).fits:
            continue
        found.append((graph, group, hw.buffer_bytes, hw.dtype_bytes))
        if len(found) == count:
            break
    return found
