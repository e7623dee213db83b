"""The graph stages of a run: fuse, fission and substitute, applied before partition search.

::

    fuse        DNNFusion (Niu et al. 2021, §4): One-to-One ops fused into their producers,
                algebraic simplifications, concat/slice elimination, to a fixpoint. Needs no
                machine: every rewrite removes an op or a tensor.
    fission     operator fission (`operator-fission.txt`): every op that fits no group on the
                machine split into the fewest output-channel, input-channel or row pieces that
                fit, to a fixpoint. Needs the hardware and the dataflow.
    substitute  OCGGS (`graph-substitution-ocggs.txt`): a search over the whole rule set
                (horizontal fusion, decompositions, fission variants, ...) whose cost is the
                DRAM of the graph's best plan on the machine.

`run_stages` applies the stages asked for in this order and records every rewrite as a `Match`,
so a plan can name the rewrites of its graph and `replay_rewrites` can rebuild that graph from
the model (`fusion-dse evaluate MODEL --plan plan.json`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from search.substitution.base import Match, RewriteError, RuleContext, apply_all, replay
from simulator.errors import InputError
from simulator.hw import HardwareConfig
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

__all__ = ["DEFAULT_STAGES", "STAGES", "STAGE_CHOICES", "SUBSTITUTIONS", "StageReport",
           "StagedGraph", "graph_digest", "parse_stages", "replay_rewrites", "run_stages"]

STAGES: tuple[str, ...] = ("fuse", "fission", "substitute")
"""The stages, in the order they run."""
STAGE_CHOICES: tuple[str, ...] = ("none", *STAGES, "all")
"""What ``--graph-stages`` accepts (alone or, for the stages, as a comma list)."""
SUBSTITUTIONS: tuple[str, ...] = ("sampling", "dpp", "pruning", "greedy")
"""The substitute stage's searches (`search.substitution.search`)."""
SUBSTITUTE_LIMITS: dict[str, Any] = {"max_graphs": 200, "time_limit": None}
"""The substitute stage's limits unless told otherwise: each graph costs a segment DP (0.1-1 s
on the zoo), so 200 graphs keep the stage within minutes (docs/graph-stages.md). The cap counts
graphs evaluated, never seconds, so the rewritten graph is the same on any machine under any
load (a ``time_limit`` stays available as an explicit opt-in)."""
DEFAULT_STAGES = "fuse"
"""The stages a run applies unless told otherwise (docs/graph-stages.md says why)."""


def parse_stages(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """The stages named by `value` (``none``, ``all``, a stage, or a list of stages separated
    by commas or ``+``), in the order they run; raises `InputError` naming an unknown entry."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.replace("+", ",").split(",")
    names = [s.strip().lower() for s in value]
    names = [s for s in names if s]
    if not names or names == ["none"]:
        return ()
    if names == ["all"]:
        return STAGES
    unknown = [s for s in names if s not in STAGES]
    if unknown and unknown[0] in STAGE_CHOICES:
        raise InputError(f"graph stages {'+'.join(names)!r}: {unknown[0]!r} stands alone, "
                         f"not in a list of stages ({', '.join(STAGES)})")
    if unknown:
        raise InputError(f"graph stage {unknown[0]!r} is not one of {', '.join(STAGE_CHOICES)}")
    return tuple(s for s in STAGES if s in names)


def graph_digest(graph: ComputeGraph) -> str:
    """SHA-256 (16 hex digits) of the graph's JSON document: equal graphs, equal digests."""
    return hashlib.sha256(graph.to_json().encode()).hexdigest()[:16]


@dataclass(frozen=True)
class StageReport:
    """What one stage did.

    Attributes:
        stage: Its name.
        rewrites: The rewrites it applied, in order.
        ops_before, ops_after: Ops of the graph before and after it.
        seconds: Wall-clock time it took.
        detail: The stage's own figures (substitute: algorithm, cost before and after,
            graphs costed, whether its limit cut it).
    """

    stage: str
    rewrites: tuple[Match, ...]
    ops_before: int
    ops_after: int
    seconds: float
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "rewrites": len(self.rewrites),
                "ops_before": self.ops_before, "ops_after": self.ops_after,
                "seconds": round(self.seconds, 3), **dict(self.detail)}


@dataclass(frozen=True)
class StagedGraph:
    """A graph after its stages.

    Attributes:
        source: The graph as loaded.
        graph: The graph after every stage.
        stages: The stages run, in order.
        reports: One `StageReport` per stage.
    """

    source: ComputeGraph
    graph: ComputeGraph
    stages: tuple[str, ...] = ()
    reports: tuple[StageReport, ...] = ()

    @property
    def rewrites(self) -> tuple[Match, ...]:
        """Every rewrite applied, in order (replayable on `source` with `replay_rewrites`)."""
        return tuple(m for r in self.reports for m in r.rewrites)

    def to_dict(self) -> dict[str, Any]:
        """The ``graph`` record of plan.json and summary.json."""
        return {
            "source": self.source.name,
            "stages": list(self.stages),
            "ops_before": len(self.source),
            "ops_after": len(self.graph),
            "digest": graph_digest(self.graph),
            "per_stage": [r.to_dict() for r in self.reports],
            "rewrites": [m.to_dict() for m in self.rewrites],
        }


def _rules(stage: str) -> list:
    from search.substitution.rules import RULES  # the rule modules import torch-free code only

    return [r for r in RULES.values() if r.stage == stage]


def run_stages(graph: ComputeGraph, stages: str | Sequence[str] | None,
               hw: HardwareConfig | None = None, scheme: str | Scheme | None = None, *,
               algorithm: str = "sampling", seed: int = 0,
               options: Mapping[str, Any] | None = None,
               progress: Callable[[str], None] | None = None) -> StagedGraph:
    """`graph` after the stages named by `stages` (see `parse_stages`).

    Args:
        graph: The network as loaded.
        stages: Stage names; ``fission`` and ``substitute`` need `hw` and `scheme`.
        hw, scheme: The machine and the dataflow the rewritten graph is for.
        algorithm: The substitution search (``sampling``, ``dpp``, ``pruning``, ``greedy``).
        seed: Seed of the substitution search.
        options: Further options of the substitution search (e.g. its limit on graphs costed).
        progress: Called with a line as each stage starts.

    Raises:
        InputError: an unknown stage, or a machine-dependent stage without a machine.
    """
    names = parse_stages(stages)
    if any(s != "fuse" for s in names) and (hw is None or scheme is None):
        raise InputError("graph stages fission and substitute need the hardware and the "
                         "dataflow the graph is rewritten for")
    scheme = Scheme.parse(scheme) if scheme is not None else None
    source, reports = graph, []
    for stage in names:
        if progress:
            progress(f"graph stage {stage} on {graph.name} ({len(graph)} ops)")
        started, before = time.perf_counter(), graph
        detail: dict[str, Any] = {}
        if stage == "substitute":
            graph, done, detail = _substitute(graph, hw, scheme, algorithm, seed, options)
        else:
            graph, rewrites = apply_all(graph, _rules(stage), _context(graph, hw, scheme))
            done = tuple(r.match for r in rewrites)
        reports.append(StageReport(stage, tuple(done), len(before), len(graph),
                                   time.perf_counter() - started, detail))
    return StagedGraph(source, graph, names, tuple(reports))


def _context(graph: ComputeGraph, hw: HardwareConfig | None,
             scheme: Scheme | None) -> RuleContext:
    if hw is None or scheme is None:
        return RuleContext()
    from simulator.cost import CostCache

    return RuleContext(hw, scheme, CostCache(graph, hw, scheme))


def _substitute(graph: ComputeGraph, hw: HardwareConfig, scheme: Scheme, algorithm: str,
                seed: int, options: Mapping[str, Any] | None,
                ) -> tuple[ComputeGraph, tuple[Match, ...], dict[str, Any]]:
    from search.substitution.search import substitute

    given = {**SUBSTITUTE_LIMITS, **dict(options or {})}
    result = substitute(graph, _all_rules(), RuleContext(hw, scheme), hw=hw, scheme=scheme,
                        algorithm=algorithm, seed=seed, **given)
    return result.graph, tuple(result.matches), result.report()


def _all_rules() -> list:
    from search.substitution.rules import RULES

    return list(RULES.values())


def replay_rewrites(graph: ComputeGraph, rewrites: Sequence[Mapping[str, Any] | Match],
                    ) -> ComputeGraph:
    """`graph` after recorded rewrites (`Match`es or their dicts), in order; raises
    `RewriteError` naming the first that does not apply."""
    from search.substitution.rules import RULES

    matches = [m if isinstance(m, Match) else Match.from_dict(m) for m in rewrites]
    try:
        return replay(graph, matches, RULES)
    except (KeyError, ValueError, IndexError) as exc:
        raise RewriteError(f"a recorded rewrite does not apply to {graph.name!r}: {exc}") \
            from None
