"""`fusion-dse explain`: why a fusion group does not fit, and where the splitter cuts it.

The explainer ranks the group's edges; Algorithm 1 turns them into a split. The result lists the
explained edges, the pieces with their F_beta and F_D, and draws the group (the paper's Fig. 4):
explained edges highlighted, the cut edges dashed, pieces coloured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fusion_dse.api import resolve_hw
from simulator.cost import CostCache, GroupCost
from simulator.errors import InputError
from simulator.hw import HardwareConfig
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load

__all__ = ["GroupExplanation", "explain_group", "parse_group"]


@dataclass(frozen=True)
class GroupExplanation:
    """An explained group and the split Algorithm 1 made of it."""

    graph: ComputeGraph
    hw: HardwareConfig
    scheme: str
    explainer: str
    group: tuple[int, ...]
    cost: GroupCost
    edges: tuple[tuple[int, int], ...]
    pieces: tuple[tuple[int, ...], ...]
    piece_costs: tuple[GroupCost, ...]
    rectified: bool

    @property
    def cut(self) -> list[tuple[int, int]]:
        """Group edges whose ends landed in different pieces."""
        piece = {o: k for k, p in enumerate(self.pieces) for o in p}
        return [(i, j) for i, j in self.graph.internal_edges(self.group) if piece[i] != piece[j]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (stable keys)."""
        name = [op.name for op in self.graph]
        return {
            "format": "fusion-dse.explanation", "version": 1, "model": self.graph.name,
            "scheme": self.scheme, "explainer": self.explainer,
            "buffer_bytes": self.hw.buffer_bytes, "group": [name[o] for o in self.group],
            "fits": self.cost.fits, "buffer_needed": self.cost.buffer_bytes,
            "explained_edges": [[name[i], name[j]] for i, j in self.edges],
            "rectified": self.rectified,
            "pieces": [{"ops": [name[o] for o in p], "buffer_bytes": c.buffer_bytes,
                        "dram_bytes": c.dram_bytes, "fits": c.fits}
                       for p, c in zip(self.pieces, self.piece_costs, strict=True)],
            "cut": [[name[i], name[j]] for i, j in self.cut],
        }


def parse_group(graph: ComputeGraph, spec: str) -> tuple[int, ...]:
    """Op names or ids separated by commas; ``A:B`` is the ids A..B (inclusive)."""
    ops: list[int] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if ":" in item and all(p.strip().isdigit() for p in item.split(":", 1)):
            a, b = (int(p) for p in item.split(":", 1))
            ops.extend(range(a, b + 1))
        elif item.isdigit():
            ops.append(int(item))
        else:
            try:
                ops.append(graph.id_of(item))
            except KeyError:
                raise InputError(f"--group: {item!r} is not an op of {graph.name!r} (see "
                                 f"fusion-dse inspect {graph.name})") from None
    bad = [o for o in ops if not 0 <= o < len(graph)]
    if bad or not ops:
        raise InputError(f"--group {spec!r}: op ids must lie in 0..{len(graph) - 1}")
    group = tuple(sorted(set(ops)))
    if not graph.is_weakly_connected(group):
        raise InputError(f"--group {spec!r} is not connected in {graph.name!r}")
    return group


def explain_group(model: str | ComputeGraph, group: str, hw: str | HardwareConfig = "edge-npu",
                  scheme: str = "lbdf", explainer: str = "gnne",
                  overrides: Mapping[str, Any] | None = None, seed: int = 0,
                  top: int = 8) -> GroupExplanation:
    """Explain why `group` of `model` does not fit and split it (Algorithm 1)."""
    from explain.tree_split import GetSplitter
    from fusion_dse.optimization import make_explainer

    graph = model if isinstance(model, ComputeGraph) else load(model)
    config = resolve_hw(hw, overrides)
    ops = parse_group(graph, group)
    cache = CostCache(graph, config, scheme)
    expl = make_explainer(explainer)
    if not expl.supports(scheme):
        raise InputError(f"explainer {explainer!r} has no trained model for scheme {scheme!r}")
    rng = np.random.default_rng(seed)
    cost = cache.group(ops)
    edges = tuple(expl.explain(graph, ops, cache, rng)[:top]) if len(ops) > 1 else ()
    if cost.fits:
        pieces, rectified = (ops,), True
    else:
        splitter = GetSplitter(expl, max_edges=top)
        pieces = tuple(tuple(p) for p in splitter.split(graph, ops, cache, rng))
        rectified = splitter.stats.fallbacks == 0
    return GroupExplanation(graph, config, scheme, explainer, ops, cost, edges, pieces,
                            tuple(cache.group(p) for p in pieces), rectified)


def explanation_text(e: GroupExplanation) -> str:
    """What `fusion-dse explain` prints."""
    name = [op.name for op in e.graph]
    lines = [
        f"{e.graph.name}: group of {len(e.group)} ops on {e.hw.name} (buffer "
        f"{e.hw.buffer_bytes:,} B), {e.scheme}: needs {e.cost.buffer_bytes:,} B -> "
        + ("fits" if e.cost.fits else f"does not fit ({e.cost.reason})"),
        f"explained edges ({e.explainer}, most responsible first):",
        *[f"  {k + 1}. {name[i]} -> {name[j]}" for k, (i, j) in enumerate(e.edges)],
        "split (Algorithm 1)" + ("" if e.rectified else ", by the random fallback") + ":",
        *[f"  {name[p[0]]} .. {name[p[-1]]} ({len(p)} ops): F_beta {c.buffer_bytes:,} B, "
          f"F_D {c.dram_bytes:,} B" for p, c in zip(e.pieces, e.piece_costs, strict=True)],
        "cut edges: " + (", ".join(f"{name[i]} -> {name[j]}" for i, j in e.cut) or "none"),
    ]
    return "\n".join(lines)


def write_plot(e: GroupExplanation, path: str | Path) -> None:
    """Draw the explanation (see `fusion_dse.plots.plot_explanation`)."""
    from fusion_dse.plots import plot_explanation

    plot_explanation(e, path)
