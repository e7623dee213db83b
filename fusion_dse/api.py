"""The Python API: one call per job, returning typed results (the CLI renders these).

A plan file carries its context: `evaluate` and `simulate` cost a plan.json under the scheme,
hardware and buffer it records (``fusion-dse optimize`` writes them) unless the caller gives
others, and say so in `Evaluation.notes`.

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

from search.substitution.stages import (
    DEFAULT_STAGES,
    graph_digest,
    parse_stages,
    replay_rewrites,
    run_stages,
)
from simulator.cost import CostCache, PlanCost, evaluate_plan
from simulator.engine import SimReport
from simulator.engine import simulate as run_simulation
from simulator.errors import InputError
from simulator.hw import DEFAULT_PRESET, HardwareConfig, list_presets, load_hw
from simulator.partition import violations
from simulator.plan import (
    PartitionPlan,
    PlanError,
    layer_by_layer,
    plan_context,
    plan_from_doc,
    read_plan_document,
)
from simulator.scheme import DEFAULT_SCHEME, Scheme
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


_BUFFER_KEYS = ("buffer", "buffer_bytes")


def _with_plan_context(doc: Any, hw: str | HardwareConfig | None, scheme: str | Scheme | None,
                       overrides: Mapping[str, Any] | None,
                       ) -> tuple[HardwareConfig, Scheme, tuple[str, ...]]:
    """Hardware and scheme for a plan document: the caller's, else those it records."""
    context, notes = plan_context(doc), []
    recorded = context.get("scheme")
    if scheme is None:
        scheme = _recorded_scheme(recorded) if recorded else DEFAULT_SCHEME
    else:
        scheme = Scheme.parse(scheme)
        if recorded and recorded != str(scheme):
            notes.append(f"scheme {scheme} overrides the plan's {recorded}")
    overrides = dict(overrides or {})
    buffer = context.get("buffer_bytes")
    given = [overrides[k] for k in _BUFFER_KEYS if overrides.get(k) is not None]
    if buffer is not None and not given:
        overrides["buffer"] = buffer
    if hw is None:
        config = _recorded_hw(context.get("hw"), context.get("hardware"), overrides)
    else:
        config = resolve_hw(hw, overrides)
        if context.get("hw") and config.name != context["hw"]:
            notes.append(f"hardware {config.name} overrides the plan's {context['hw']}")
    if buffer is not None and given and config.buffer_bytes != buffer:
        notes.append(f"buffer {config.buffer_bytes:,} B overrides the plan's {buffer:,} B")
    return config, scheme, tuple(notes)


def _recorded_scheme(name: str) -> Scheme:
    try:
        return Scheme.parse(name)
    except InputError as err:
        raise PlanError(f"the plan's scheme: {err}") from err


def _recorded_hw(name: str | None, fields: Mapping[str, Any] | None,
                 overrides: Mapping[str, Any]) -> HardwareConfig:
    if fields is not None:  # every field recorded: a hardware file need not be given again
        try:
            recorded = load_hw(DEFAULT_PRESET).with_overrides(**dict(fields))
        except InputError as err:
            raise PlanError(f"the plan's recorded hardware: {err}") from err
        return recorded.with_overrides(**overrides) if overrides else recorded
    if name is None:
        return load_hw(DEFAULT_PRESET, overrides)
    if name not in list_presets():
        raise PlanError(f"the plan was made for hardware {name!r}, which is not a preset; "
                        "give its YAML file with --hw")
    return load_hw(name, overrides)


def plan_graph(graph: ComputeGraph, doc: Any, where: str) -> tuple[ComputeGraph, int]:
    """The graph a plan document names ops of, and the rewrites replayed to get it.

    A plan made after graph stages records them under ``graph`` (the rewrites and the digest of
    the rewritten graph): given the model as loaded, its rewrites are replayed; given the
    rewritten graph itself (the ``graph.json`` written next to plan.json), nothing is.

    Raises:
        PlanError: the record is malformed, a rewrite does not apply, or the replayed graph is
            not the one the plan was made on.
    """
    record = doc.get("graph") if isinstance(doc, dict) else None
    if record is None:
        return graph, 0
    rewrites = record.get("rewrites") if isinstance(record, dict) else None
    digest = record.get("digest") if isinstance(record, dict) else None
    if not isinstance(rewrites, list) or not isinstance(digest, str):
        raise PlanError(f"{where}: 'graph' must record 'rewrites' (a list) and 'digest'")
    if graph_digest(graph) == digest:
        return graph, 0
    try:
        rewritten = replay_rewrites(graph, rewrites)
    except InputError as err:
        raise PlanError(f"{where} was made on a rewritten graph and its rewrites do not replay "
                        f"on {graph.name!r} ({err}); give the graph.json written next to it "
                        "as the model") from None
    if graph_digest(rewritten) != digest:
        raise PlanError(f"{where} was made on a rewritten graph; its {len(rewrites)} rewrites "
                        f"replayed on {graph.name!r} give another graph (digest "
                        f"{graph_digest(rewritten)}, the plan's {digest}); give the graph.json "
                        "written next to it as the model")
    return rewritten, len(rewrites)


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
    config, scheme, notes = _with_plan_context(doc, hw, scheme, overrides)
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
    """The graph a plan file names ops of and its record; stages asked for must be the
    plan's."""
    graph_doc = doc.get("graph") if isinstance(doc, dict) else None
    recorded = graph_doc.get("stages") if isinstance(graph_doc, dict) else None
    stages = tuple(str(s) for s in recorded) if isinstance(recorded, list) else ()
    if asked is not None and asked != stages:
        raise PlanError(f"{where} was made on graph stages {'+'.join(stages) or 'none'}, not "
                        f"{'+'.join(asked) or 'none'}: leave --graph-stages out to use the "
                        "plan's")
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
