"""The `Splitter` protocol, the repair applied to fusion groups that exceed the buffer, and the
paper's baseline implementation, `RandomSplitter`.

A splitter receives one weakly connected, convex group of fuseable ops that does not fit and
returns smaller groups that cover it exactly, each weakly connected and fitting the buffer
(`CostCache.group(g).fits`). `search.repair` checks that contract and keeps the graph of groups
acyclic around whatever a splitter returns. The explanation-guided splitter (GET, Mills et al.
§III) plugs into the same protocol. Splitters are offered by name in `search.registry.REPAIRS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from simulator.cost import CostCache
from simulator.partition import Group, components
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

__all__ = ["RandomSplitter", "Splitter"]


@runtime_checkable
class Splitter(Protocol):
    """Splits an invalid fusion group into smaller valid groups.

    Attributes:
        name: Identifier shown in summaries (``"random"``).
    """

    name: str

    def supports(self, scheme: Scheme) -> bool:
        """True if the splitter can repair groups of dataflow `scheme`."""
        ...

    def split(self, graph: ComputeGraph, ops: Group, cache: CostCache,
              rng: np.random.Generator) -> list[Group]:
        """Valid groups covering `ops` exactly, each weakly connected and fitting the buffer.

        Args:
            graph: The network.
            ops: The group to split: sorted op ids, weakly connected, fuseable ops only.
            cache: Group costs of (graph, hardware, dataflow); `cache.group(g).fits`.
            rng: The only source of randomness the splitter may use.
        """
        ...

    def report(self) -> Mapping[str, Any] | None:
        """The splitter's own figures for the run's summary (JSON-ready), or None."""
        ...


@dataclass(frozen=True)
class RandomSplitter:
    """The paper's baseline repair (Mills et al. §IV-B): split at random, blind to DRAM.

    A group that does not fit is cut at a uniformly random position of its topological order;
    each side falls apart into its weakly connected components, and every piece that still does
    not fit is cut again, until all pieces fit (a single fuseable op always does). A cut along
    the topological order only has edges from the first part to the second, so the pieces keep
    an acyclic graph of groups acyclic.
    """

    name: str = "random"

    def supports(self, scheme: Scheme) -> bool:
        """Every dataflow: the splitter only asks the cost model whether a group fits."""
        return True

    def report(self) -> None:
        """No figures of its own: its work shows in the repair cache counts."""
        return None

    def split(self, graph: ComputeGraph, ops: Group, cache: CostCache,
              rng: np.random.Generator) -> list[Group]:
        """Random recursive topological cuts until every piece fits (see the class)."""
        pending, done = [tuple(ops)], []
        while pending:
            g = pending.pop()
            if len(g) == 1 or cache.group(g).fits:
                done.append(g)
                continue
            k = int(rng.integers(1, len(g)))
            pending.extend(reversed(components(graph, g[k:])))
            pending.extend(reversed(components(graph, g[:k])))
        return sorted(done)

