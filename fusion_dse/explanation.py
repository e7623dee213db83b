"""`fusion-dse explain`: why a fusion group does not fit, and where the splitter cuts it.

The explainer ranks the group's edges once; Algorithm 1 (`explain.tree_split.GetSplitter`)
turns that explanation into a split. The result lists exactly the explained edges the split was
cut by, which split was kept (Algorithm 1's, the cheaper baseline random split, or the random
fallback), the pieces with their F_beta and F_D and the cut edges, and draws the group (the
paper's Fig. 4): explained edges highlighted, the cut edges dashed, pieces coloured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from explain import defaults
from explain.tree_split import Explainer, GetSplitter, SplitChoice
from fusion_dse.api import resolve_hw
from fusion_dse.reports import buffer_text
from fusion_dse.runspec import RunSpec
from simulator.cost import CostCache, GroupCost
from simulator.errors import InputError
from simulator.hw import DEFAULT_PRESET, HardwareConfig
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import check_spec, load

__all__ = ["GroupExplanation", "explain_group", "explanation_text", "parse_group", "write_plot"]


@dataclass(frozen=True)
class GroupExplanation:
    """An explained group and the split kept for it.

    Attributes:
        edges: The explanation Algorithm 1 cut the group by (empty when the group fits).
        choice: Which split `pieces` is (`explain.tree_split.SplitChoice`).
        algorithm_1_dram: F_D of Algorithm 1's split summed over its pieces; None when the
            group fits or Algorithm 1 found no split into fitting groups.
    """

    graph: ComputeGraph
    hw: HardwareConfig
    scheme: str
    explainer: str
    group: tuple[int, ...]
    cost: GroupCost
    edges: tuple[tuple[int, int], ...]
    pieces: tuple[tuple[int, ...], ...]
    piece_costs: tuple[GroupCost, ...]
    choice: SplitChoice
    algorithm_1_dram: int | None

    @property
    def rectified(self) -> bool:
        """True if the pieces fit without the random fallback."""
        return self.choice is not SplitChoice.FALLBACK

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
            "rectified": self.rectified, "split": self.choice.value,
            "algorithm_1_dram_bytes": self.algorithm_1_dram,
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
            if not 0 <= a <= b < len(graph):
                raise InputError(f"--group {item!r}: op ids must lie in 0..{len(graph) - 1} "
                                 "(a range A:B needs A <= B)")
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


def explain_group(model: str | ComputeGraph, group: str, hw: str | HardwareConfig = DEFAULT_PRESET,
                  scheme: str = RunSpec.scheme, explainer: str | Explainer = defaults.EXPLAINER,
                  overrides: Mapping[str, Any] | None = None, seed: int = RunSpec.seed,
                  top: int = defaults.EXPLAIN_TOP) -> GroupExplanation:
    """Explain why `group` of `model` does not fit and split it (Algorithm 1, with the baseline
    guard of `explain.tree_split.GetSplitter`); the group is explained once.

    Args:
        model: Zoo name, ``.onnx`` path, ``module:callable`` or a graph.
        group: Op names or ids (see `parse_group`).
        hw: Preset name, YAML path or configuration.
        scheme: Dataflow.
        explainer: A name of `search.registry.EXPLAINERS` or an explainer.
        overrides: Hardware overrides.
        seed: Seed of the explainer and of the baseline random split.
        top: Explained edges Algorithm 1 considers.

    Raises:
        InputError: Bad group, hardware or explainer, or an explainer without trained
            parameters for `scheme`.
    """
    from search.registry import EXPLAINERS

    if not isinstance(model, ComputeGraph):
        check_spec(model)  # the model's name, then the hardware, before it is built
    config = resolve_hw(hw, overrides)
    graph = model if isinstance(model, ComputeGraph) else load(model)
    ops = parse_group(graph, group)
    cache = CostCache(graph, config, scheme)
    expl = EXPLAINERS.create(explainer) if isinstance(explainer, str) else explainer
    if not expl.supports(scheme):
        raise InputError(f"explainer {expl.name!r} has no trained model for scheme {scheme!r}")
    outcome = GetSplitter(expl, max_edges=top).split_outcome(graph, ops, cache,
                                                             np.random.default_rng(seed))
    dram = (None if outcome.algorithm_1 is None
            else sum(cache.group(p).dram_bytes for p in outcome.algorithm_1))
    return GroupExplanation(graph, config, scheme, expl.name, ops, cache.group(ops),
                            outcome.explained, outcome.pieces,
                            tuple(cache.group(p) for p in outcome.pieces), outcome.choice, dram)


def _split_line(e: GroupExplanation) -> str:
    if e.choice is SplitChoice.BASELINE:
        kept = sum(c.dram_bytes for c in e.piece_costs)
        return (f"split kept: the baseline random split (F_D {kept:,} B, less than Algorithm "
                f"1's {e.algorithm_1_dram:,} B):")
    if e.choice is SplitChoice.FALLBACK:
        return "split kept: the random fallback (Algorithm 1 found no split into fitting groups):"
    return "split kept: Algorithm 1 (cut by the explained edges):"


def explanation_text(e: GroupExplanation) -> str:
    """What `fusion-dse explain` prints."""
    name = [op.name for op in e.graph]
    head = (f"{e.graph.name}: group of {len(e.group)} ops on {e.hw.name} "
            f"({buffer_text(e.hw)}), {e.scheme}: needs {e.cost.buffer_bytes:,} B -> "
            + ("fits" if e.cost.fits else f"does not fit ({e.cost.reason})"))
    if e.choice is SplitChoice.FITS:
        return head + "\nnothing to explain or split"
    lines = [
        head,
        f"explained edges ({e.explainer}, most responsible first; Algorithm 1 cuts the group "
        "at these):",
        *[f"  {k + 1}. {name[i]} -> {name[j]}" for k, (i, j) in enumerate(e.edges)],
        _split_line(e),
        *[f"  {name[p[0]]} .. {name[p[-1]]} ({len(p)} ops): F_beta {c.buffer_bytes:,} B, "
          f"F_D {c.dram_bytes:,} B" for p, c in zip(e.pieces, e.piece_costs, strict=True)],
        "cut edges: " + (", ".join(f"{name[i]} -> {name[j]}{_rank_mark(e, (i, j))}"
                                   for i, j in e.cut) or "none"),
    ]
    return "\n".join(lines)


def _rank_mark(e: GroupExplanation, edge: tuple[int, int]) -> str:
    return f" (explained {e.edges.index(edge) + 1})" if edge in e.edges else ""


def write_plot(e: GroupExplanation, path: str | Path) -> None:
    """Draw the explanation (see `fusion_dse.plots.plot_explanation`)."""
    from fusion_dse.plots import plot_explanation

    plot_explanation(e, path)
