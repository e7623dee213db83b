"""The Python API: one call per job, returning typed results (the CLI renders these).

A plan file carries its context: `evaluate` and `simulate` cost a plan.json under the scheme,
hardware and buffer it records (``fusion-dse optimize`` writes them) unless the caller gives
others, and say so in `Evaluation.notes` (the precedence rules: `fusion_dse.planfile`).

One graph per comparison: `evaluate` and `simulate` run the same graph stages as
``optimize`` (`search.substitution.stages.DEFAULT_STAGES`, ``fuse``, unless told otherwise), so
the layer-by-layer plan they cost, and every reference they print (layer by layer, the lower
bound), is costed on the graph an optimised plan runs on. A plan file names ops of the graph
it was made on: its recorded rewrites are replayed (a plan without a record names ops of the
model as loaded), and stages given with it must be the ones it records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fusion_dse.planfile import (
    plan_from_doc,
    plan_graph,
    plan_settings,
    plan_stages,
    read_plan_document,
)
from search.substitution.stages import (
    DEFAULT_STAGES,
    parse_stages,
    run_stages,
)
from simulator.cost import CostCache, PlanCost, evaluate_plan
from simulator.engine import SimReport
from simulator.engine import simulate as run_simulation
from simulator.hw import HardwareConfig, load_hw
from simulator.partition import violations
from simulator.plan import PartitionPlan, PlanError, layer_by_layer
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load

__all__ = ["Evaluation", "GraphRecord", "Simulation", "evaluate", "resolve_hw", "simulate"]

EVALUATION_FORMAT = "fusion-dse.evaluation"
SIMULATION_FORMAT = "fusion-dse.simulation"


def resolve_hw(hw: str | HardwareConfig, overrides: Mapping[str, Any] | None = None,
               ) -> HardwareConfig:
    """A hardware configuration from a preset name, a YAML path or a config, with overrides."""
    if isinstance(hw, HardwareConfig):
        return hw.with_overrides(**dict(overrides or {})) if overrides else hw
    return load_hw(hw, overrides)


@dataclass(frozen=True)
class Evaluation:
    """A plan of a network costed on one hardware configuration under one dataflow."""

    graph: ComputeGraph
    hw: HardwareConfig
    plan: PartitionPlan
    cost: PlanCost
    cache: CostCache
    notes: tuple[str, ...] = field(default=())
    """Where the caller's scheme, hardware or buffer overrode those the plan file records."""
    stages: GraphRecord | None = None
    """The graph stages between the model as loaded and `graph` (None: a graph given as is)."""

    def to_dict(self) -> dict[str, Any]:
        """The `fusion-dse evaluate --format json` document (stable keys, see README)."""
        mixed = self.cost.scheme.mixed  # a hybrid plan: each group names its dataflow
        groups = [{**g.to_dict(self.graph), "unfusable": g.runs_alone,
                   **({"dataflow": g.scheme} if mixed else {})} for g in self.cost.groups]
        doc = {
            "format": EVALUATION_FORMAT,
            "version": 1,
            "model": self.graph.name,
            "hw": self.hw.to_dict(),
            "totals": self.cost.totals(),
            "unfusable": [self.graph[o].name for o in self.cost.unfusable],
            "groups": groups,
        }
        if self.stages is not None:
            doc["graph"] = self.stages.to_dict()
        return doc


@dataclass(frozen=True)
class GraphRecord:
    """How the graph an evaluation costs was made from the model as loaded.

    Attributes:
        stages: The graph stages run (or replayed from a plan file), in order.
        ops_before, ops_after: Ops of the imported graph and of the costed one.
        rewrites: Rewrites applied.
        imported_lbl_dram_bytes, imported_lbl_dram_fuseable_bytes: The layer-by-layer plan of
            the imported graph (whole network, fuseable ops), when the stages changed the
            graph: reported as "layer by layer (imported graph)", never as the reference.
    """

    stages: tuple[str, ...]
    ops_before: int
    ops_after: int
    rewrites: int
    imported_lbl_dram_bytes: int | None = None
    imported_lbl_dram_fuseable_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``graph`` entry of the evaluation document."""
        return {"stages": list(self.stages), "ops_before": self.ops_before,
                "ops_after": self.ops_after, "rewrites": self.rewrites,
                "imported_lbl_dram_bytes": self.imported_lbl_dram_bytes,
                "imported_lbl_dram_fuseable_bytes": self.imported_lbl_dram_fuseable_bytes}


def evaluate(model: str | ComputeGraph, hw: str | HardwareConfig | None = None,
             scheme: str | Scheme | None = None,
             plan: str | Path | PartitionPlan | None = None,
             overrides: Mapping[str, Any] | None = None,
             input_shape: str | None = None, allow_opaque: bool = False,
             graph_stages: str | Sequence[str] | None = None,
             substitution: str = "sampling", seed: int = 0) -> Evaluation:
    """Cost a plan of `model` (the layer-by-layer plan when `plan` is None) on the graph the
    graph stages make of it, the graph ``optimize`` searches at the same settings.

    Args:
        model: Zoo name, .onnx or graph .json path, ``module:callable``, or a graph.
        hw: Preset name, YAML path or configuration; None: the plan file's hardware, else
            ``edge-npu``.
        scheme: Dataflow; None: the plan file's, else LBDF.
        plan: A plan file, a plan (op ids of the graph after `graph_stages`), or None for
            layer by layer. A plan file's recorded buffer applies unless `overrides` set one.
        overrides: Hardware overrides.
        input_shape: Input shape override (``N,C,H,W``).
        allow_opaque: Import unsupported ops as opaque ops instead of failing.
        graph_stages: Graph stages run on `model` first (``none``, ``all``, or a list of
            ``fuse``, ``fission``, ``substitute``, as ``optimize`` takes them). None: those of
            ``optimize``, `DEFAULT_STAGES`; for a plan file, the stages it records (replayed),
            and stages given with a plan file must be those it records.
        substitution: The substitute stage's search.
        seed: Seed of the substitute stage's search.

    Raises:
        InputError subclasses: unknown model, scheme or graph stage, bad hardware file or
        override, a plan file that is unreadable, names unknown ops, overlaps, misses ops, has
        a cycle, or records other graph stages than those given.
    """
    doc = read_plan_document(plan) if isinstance(plan, str | Path) else None
    config, scheme, notes = plan_settings(doc, hw, scheme, overrides)
    asked = None if graph_stages is None else parse_stages(graph_stages)
    source = model if isinstance(model, ComputeGraph) else load(model, input_shape,
                                                                allow_opaque=allow_opaque)
    if doc is not None:  # the rewritten graph the plan names ops of (digest checked)
        graph, record = _plan_file_graph(source, doc, str(plan), asked)
    else:
        staged = run_stages(source, parse_stages(DEFAULT_STAGES) if asked is None else asked,
                            config, scheme, algorithm=substitution, seed=seed)
        graph = staged.graph
        record = GraphRecord(staged.stages, len(source), len(graph), len(staged.rewrites))
    if plan is None:
        parsed = layer_by_layer(graph)
    elif isinstance(plan, PartitionPlan):
        parsed = plan
    else:
        parsed = plan_from_doc(doc, graph, str(plan))
    problems = violations(graph, parsed, limit=3)
    if problems:
        where = f"plan {str(plan)!r}" if plan is not None else "plan"
        raise PlanError(f"{where} is not a partition of {graph.name!r}"
                        f"{_after(record)}: {'; '.join(problems)}")
    cache = CostCache(graph, config, scheme)
    cost = evaluate_plan(graph, parsed, config, scheme, cache, checked=True)
    if record.rewrites:  # the imported graph's layer by layer, named as such
        imported = CostCache(source, config, scheme).references
        record = replace(record, imported_lbl_dram_bytes=imported["lbl_dram"],
                         imported_lbl_dram_fuseable_bytes=imported["lbl_dram_fuseable"])
    return Evaluation(graph, config, parsed, cost, cache, notes, record)


def _after(record: GraphRecord) -> str:
    """Where a plan is checked: after the graph stages, when they rewrote the graph."""
    return f" after graph stages {'+'.join(record.stages)}" if record.rewrites else ""


def _plan_file_graph(source: ComputeGraph, doc: Any, where: str,
                     asked: tuple[str, ...] | None) -> tuple[ComputeGraph, GraphRecord]:
    """The graph a plan file names ops of and its record (`fusion_dse.planfile`'s rules)."""
    stages = plan_stages(doc, where, asked)
    graph, replayed = plan_graph(source, doc, where)
    return graph, GraphRecord(stages, len(source), len(graph), replayed)


@dataclass(frozen=True)
class Simulation:
    """A plan executed on the simulated machine, next to its analytic evaluation."""

    evaluation: Evaluation
    report: SimReport

    def to_dict(self) -> dict[str, Any]:
        """The `fusion-dse simulate --format json` document (stable keys, see README)."""
        ev, rep = self.evaluation, self.report
        names = [op.name for op in ev.graph]
        groups = []
        for g in rep.groups:
            entry = g.to_dict(names)
            analytic = ev.cost.groups[g.index]
            entry["analytic"] = {"buffer_bytes": analytic.buffer_bytes,
                                 "dram_bytes": analytic.dram_bytes,
                                 "cycles": analytic.timing.cycles}
            groups.append(entry)
        return {
            "format": SIMULATION_FORMAT, "version": 1, "model": ev.graph.name,
            "hw": ev.hw.to_dict(), "totals": rep.totals(),
            "analytic": {"dram_bytes": ev.cost.dram_bytes,
                         "peak_buffer_bytes": ev.cost.peak_buffer, "mbu_bytes": ev.cost.mbu,
                         "cycles": ev.cost.cycles, "energy_pj": ev.cost.energy_pj},
            "groups": groups,
        }


def simulate(model: str | ComputeGraph, hw: str | HardwareConfig | None = None,
             scheme: str | Scheme | None = None,
             plan: str | Path | PartitionPlan | None = None,
             overrides: Mapping[str, Any] | None = None,
             input_shape: str | None = None, allow_opaque: bool = False,
             graph_stages: str | Sequence[str] | None = None,
             substitution: str = "sampling", seed: int = 0) -> Simulation:
    """Evaluate a plan analytically (arguments as `evaluate`: the same graph stages, so the
    plan runs on the graph ``optimize`` searches), then execute it on the simulated machine.

    Raises:
        InputError subclasses as `evaluate`, and `SimulationError` when a group cannot run in
        the buffer (named).
    """
    evaluation = evaluate(model, hw, scheme, plan, overrides, input_shape, allow_opaque,
                          graph_stages, substitution, seed)
    report = run_simulation(evaluation.graph, evaluation.plan, evaluation.hw,
                            evaluation.cost.scheme,
                            cache=evaluation.cache, checked=True)
    return Simulation(evaluation, report)
