"""Plan files (plan.json): the writer, the reader and the precedence rules, in one module.

`plan_document` writes what ``fusion-dse optimize`` saves (the groups by op name with their
F_beta, F_D and cycles, and in a hybrid plan each group's dataflow; the totals; the scheme,
hardware, buffer and every hardware field; the model as asked for and its input shapes; the
graph stages' rewrites). The document is read by `simulator.plan` (`read_plan_document`,
`plan_from_doc`, `plan_context`: the groups and the recorded context, re-exported here);
`plan_settings` says which hardware and dataflow a plan is costed under (the caller's
settings over the plan's, with a note for each override), `plan_stages` which graph stages
(the plan's; others asked for are refused), `plan_graph` which graph its op names refer to
(its recorded rewrites replayed) and `plan_model` which network a plan file is of when none is
given (the graph.json beside it, else the model and input shape it records).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from search.substitution.stages import graph_digest, replay_rewrites
from simulator.errors import InputError
from simulator.hw import DEFAULT_PRESET, HardwareConfig, list_presets, load_hw
from simulator.plan import PlanError, load_plan, plan_context, plan_from_doc, read_plan_document
from simulator.scheme import DEFAULT_SCHEME, Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from search.result import SearchResult

__all__ = ["load_plan", "plan_context", "plan_document", "plan_from_doc", "plan_graph",
           "plan_model", "plan_settings", "plan_stages", "read_plan_document"]


def plan_document(result: SearchResult, own: bool = False) -> dict[str, Any]:
    """plan.json: the plan's groups by op name with F_beta and F_D (and, in a hybrid plan, the
    dataflow each runs under), readable by `load_plan`
    (`own`: the search's own best plan, ``result.search_plan``, instead; search_plan.json)."""
    plan, cost = ((result.search_plan, result.search_cost) if own
                  else (result.plan, result.cost))
    assert plan is not None and cost is not None, "the search's own plan is the result's"
    extra = [{
        "buffer_bytes": g.buffer_bytes,
        "dram_bytes": g.dram_bytes,
        "cycles": g.timing.cycles,
        "unfusable": g.runs_alone,
        **({"dataflow": g.scheme} if cost.scheme.mixed else {}),
    } for g in cost.groups]
    doc = plan.to_dict(result.graph, extra)
    doc.update(scheme=cost.scheme, hw=result.hw.name,
               buffer_bytes=result.hw.buffer_bytes, totals=cost.totals(),
               hardware=result.hw.to_dict(),
               source="search" if own else result.summary.best_source,
               model_spec=result.summary.model_spec or result.graph.name,
               input_shapes=[list(shape) for shape in result.graph.input_shapes])
    if result.summary.graph_stages:  # without the stages' seconds: a plan is deterministic
        record = dict(result.summary.graph_stages)
        record["per_stage"] = [{k: v for k, v in r.items() if k != "seconds"}
                               for r in record["per_stage"]]
        doc["graph"] = record
    return doc


_BUFFER_KEYS = ("buffer", "buffer_bytes", "weight_buffer", "weight_buffer_bytes",
                "activation_buffer", "activation_buffer_bytes")


def plan_settings(doc: Any, hw: str | HardwareConfig | None, scheme: str | Scheme | None,
                       overrides: Mapping[str, Any] | None,
                       ) -> tuple[HardwareConfig, Scheme, tuple[str, ...]]:
    """Hardware and scheme for a plan document (None: a bare plan) and the notes saying what
    overrides it: the caller's `hw`, `scheme` and buffer (in `overrides`) take precedence over
    those the plan records; what the caller leaves out is the plan's, and a plan that records
    nothing runs on the default preset and dataflow.

    Raises:
        PlanError: a recorded scheme or hardware that cannot be used.
    """
    from fusion_dse.api import resolve_hw

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
    if not given:
        recorded_buffers = _recorded_buffers(context)
        if hw is not None and recorded_buffers:
            target = resolve_hw(hw, overrides)
            if target.is_split != ("weight_buffer" in recorded_buffers):
                kind = "split" if target.is_split else "shared"
                notes.append(f"the plan's buffers do not apply to {target.name}'s {kind} "
                             "buffer; its own are used")
                recorded_buffers = {}
        overrides.update(recorded_buffers)
    if hw is None:
        config = _recorded_hw(context.get("hw"), context.get("hardware"), overrides)
    else:
        config = resolve_hw(hw, overrides)
        if context.get("hw") and config.name != context["hw"]:
            notes.append(f"hardware {config.name} overrides the plan's {context['hw']}")
    if buffer is not None and given and config.buffer_bytes != buffer:
        notes.append(f"buffer {config.buffer_bytes:,} B overrides the plan's {buffer:,} B")
    return config, scheme, tuple(notes)


def _recorded_buffers(context: Mapping[str, Any]) -> dict[str, Any]:
    """The buffer overrides a plan records: its split capacities (weight and activation
    buffers), or its buffer."""
    fields = context.get("hardware")
    if isinstance(fields, Mapping) and fields.get("weight_buffer_bytes") is not None:
        return {"weight_buffer": fields["weight_buffer_bytes"],
                "activation_buffer": fields.get("activation_buffer_bytes")}
    buffer = context.get("buffer_bytes")
    return {} if buffer is None else {"buffer": buffer}


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


def plan_stages(doc: Any, where: str, asked: tuple[str, ...] | None) -> tuple[str, ...]:
    """The graph stages a plan document records (none for a plan without a ``graph``
    record); stages the caller asks for (`asked`, None: none asked) must be those.

    Raises:
        PlanError: other stages asked for than the plan's.
    """
    graph_doc = doc.get("graph") if isinstance(doc, dict) else None
    recorded = graph_doc.get("stages") if isinstance(graph_doc, dict) else None
    stages = tuple(str(s) for s in recorded) if isinstance(recorded, list) else ()
    if asked is not None and asked != stages:
        raise PlanError(f"{where} was made on graph stages {'+'.join(stages) or 'none'}, not "
                        f"{'+'.join(asked) or 'none'}: leave --graph-stages out to use the "
                        "plan's")
    return stages


def plan_model(path: str | Path, doc: Any) -> tuple[Any, str | None]:
    """The network a plan file is of when the caller names none, and its input shape: the
    graph.json written next to a plan made after graph stages; else the model the plan
    records (``model_spec``, or ``model`` in plans of earlier versions) with its recorded
    input shape (``N,C,H,W``, for a one-input model named without ``@``); (None, None) when
    it records none."""
    doc = doc if isinstance(doc, dict) else {}
    beside = Path(path).with_name("graph.json")
    if doc.get("graph") is not None and beside.is_file():
        return str(beside), None
    model = doc.get("model_spec") or doc.get("model")
    return model, _recorded_shape(doc, model)


def _recorded_shape(doc: dict[str, Any], model: Any) -> str | None:
    shapes = doc.get("input_shapes")
    if not isinstance(model, str) or "@" in model or not isinstance(shapes, list) \
            or len(shapes) != 1 or not isinstance(shapes[0], list):
        return None
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in shapes[0]):
        return None
    return ",".join(map(str, shapes[0]))
