"""The Python API: one call per job, returning typed results (the CLI renders these)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.cost import CostCache, PlanCost, evaluate_plan
from simulator.engine import SimReport
from simulator.engine import simulate as run_simulation
from simulator.hw import HardwareConfig, load_hw
from simulator.partition import violations
from simulator.plan import PartitionPlan, PlanError, layer_by_layer, load_plan
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load

__all__ = ["Evaluation", "Simulation", "evaluate", "resolve_hw", "simulate"]

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

    def to_dict(self) -> dict[str, Any]:
        """The `fusion-dse evaluate --format json` document (stable keys, see README)."""
        groups = [{**g.to_dict(self.graph), "unfusable": g.runs_alone} for g in self.cost.groups]
        return {
            "format": EVALUATION_FORMAT,
            "version": 1,
            "model": self.graph.name,
            "hw": self.hw.to_dict(),
            "totals": self.cost.totals(),
            "unfusable": [self.graph[o].name for o in self.cost.unfusable],
            "groups": groups,
        }


def evaluate(model: str | ComputeGraph, hw: str | HardwareConfig = "edge-npu",
             scheme: str | Scheme = Scheme.LBDF, plan: str | Path | PartitionPlan | None = None,
             overrides: Mapping[str, Any] | None = None,
             input_shape: str | None = None) -> Evaluation:
    """Cost a plan of `model` (the layer-by-layer plan when `plan` is None).

    Raises:
        InputError subclasses: unknown model or scheme, bad hardware file or override, a plan
        file that is unreadable, names unknown ops, overlaps, misses ops or has a cycle.
    """
    scheme = Scheme.parse(scheme)
    graph = model if isinstance(model, ComputeGraph) else load(model, input_shape)
    config = resolve_hw(hw, overrides)
    if plan is None:
        parsed = layer_by_layer(graph)
    elif isinstance(plan, PartitionPlan):
        parsed = plan
    else:
        parsed = load_plan(plan, graph)
    problems = violations(graph, parsed, limit=3)
    if problems:
        where = f"plan {str(plan)!r}" if plan is not None else "plan"
        raise PlanError(f"{where} is not a partition of {graph.name!r}: {'; '.join(problems)}")
    cache = CostCache(graph, config, scheme)
    cost = evaluate_plan(graph, parsed, config, scheme, cache, checked=True)
    return Evaluation(graph, config, parsed, cost, cache)


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
            "analytic": {"dram_bytes": ev.cost.dram_bytes, "mbu_bytes": ev.cost.mbu,
                         "cycles": ev.cost.cycles, "energy_pj": ev.cost.energy_pj},
            "groups": groups,
        }


def simulate(model: str | ComputeGraph, hw: str | HardwareConfig = "edge-npu",
             scheme: str | Scheme = Scheme.LBDF, plan: str | Path | PartitionPlan | None = None,
             overrides: Mapping[str, Any] | None = None,
             input_shape: str | None = None) -> Simulation:
    """Evaluate a plan analytically, then execute it on the simulated machine.

    Raises:
        InputError subclasses as `evaluate`, and `SimulationError` when a group cannot run in
        the buffer (named).
    """
    evaluation = evaluate(model, hw, scheme, plan, overrides, input_shape)
    report = run_simulation(evaluation.graph, evaluation.plan, evaluation.hw, scheme,
                            cache=evaluation.cache, checked=True)
    return Simulation(evaluation, report)
