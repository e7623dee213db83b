"""One sweep point, run where a Dask worker (or the client) puts it, as a pure function.

`run_point(point)` calls the public facade (`fusion_dse.optimization.optimize` with the point's
`fusion_dse.runspec.RunSpec`, `Point.run_spec`, or
`fusion_dse.api.evaluate` for a scheme with nothing to search) on the point's graph
(`model_graph`: with an ``input_shape``, the model imported once per process with symbolic
dimensions and bound to the point's shape) and returns a plain dict of
JSON-ready values: the summary figures, the plan, history and Pareto front as JSON text, the
status (``done``, or ``failed`` with the error's one-line text), start and end times and the
worker. It never raises for a failing point, so one bad point does not stop a sweep; it never
writes anything (the client is the store's only writer).
"""

from __future__ import annotations

import json
import os
import socket
import time
import traceback
from collections import OrderedDict
from enum import Enum
from typing import TYPE_CHECKING, Any

from fusion_dse.sweep.spec import Point
from simulator.errors import InputError

if TYPE_CHECKING:
    from simulator.workload.graph import ComputeGraph
    from simulator.workload.rdp import SymbolicGraph

__all__ = ["FIGURES", "model_graph", "run_point", "without_timing"]

FIGURES = ("dram_bytes", "dram_bytes_fuseable", "mbu_bytes", "cycles", "energy_pj", "groups",
           "unfusable_ops", "lower_bound_bytes", "lower_bound_fuseable_bytes",
           "lbl_dram_bytes", "lbl_dram_fuseable_bytes")
"""The plan figures stored as columns (`PlanCost.totals()` keys)."""

_TIMING_KEYS = ("seconds", "baseline_seconds")

_TEMPLATES: OrderedDict[tuple[str, tuple[int | str, ...]], SymbolicGraph | None] = OrderedDict()
_TEMPLATES_SIZE = 8
"""Symbolic graphs of this process by (model, symbolic input shape), most recent last; None
for a model that cannot take symbolic dimensions (its points load it at their shape)."""


def _symbolic_dims(dims: tuple[int, ...]) -> tuple[int | str, ...] | None:
    """The symbolic input shape the `input_shape` axis binds: H and W of an image, the length
    of a sequence (axis 1 of a rank-2 or rank-3 input); the other axes fixed as given."""
    if len(dims) == 4:
        return (dims[0], dims[1], "H", "W")
    if len(dims) in (2, 3):
        return (dims[0], "L", *dims[2:])
    return None


def _template(model: str, dims: tuple[int | str, ...]) -> SymbolicGraph | None:
    from simulator.workload.rdp import load_symbolic

    key = (model, dims)
    if key not in _TEMPLATES:
        try:
            _TEMPLATES[key] = load_symbolic(model, dims)
        except InputError:
            _TEMPLATES[key] = None
        while len(_TEMPLATES) > _TEMPLATES_SIZE:
            _TEMPLATES.popitem(last=False)
    _TEMPLATES.move_to_end(key)
    return _TEMPLATES[key]


def model_graph(point: Point) -> str | ComputeGraph:
    """The model a point runs: its name when it has no ``input_shape``; else its graph at
    that shape, bound from one symbolic import of the model per process
    (`simulator.workload.rdp`), so that the points of an ``input_shape`` axis import the
    model once, not once each. A model whose shapes cannot follow symbols (a static ONNX
    input, a fixed classifier after a flatten, a graph JSON, ``name@resolution``) keeps its
    name: the point loads it at its shape, as before."""
    if point.input_shape is None or "@" in point.model \
            or point.model.lower().endswith(".json"):
        return point.model
    from simulator.workload.input_shape import check_input_shape

    try:
        dims = check_input_shape(point.input_shape)
    except InputError:
        return point.model  # loading it reports the bad shape
    symbolic = _symbolic_dims(dims)
    template = None if symbolic is None else _template(point.model, symbolic)
    if template is None:
        return point.model
    return template.bind({name: dims[axis] for axis, name in enumerate(symbolic)
                          if isinstance(name, str)})


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return f"{socket.gethostname()}:{os.getpid()}"


def _plain(value: Any) -> Any:
    """`value` with enums (e.g. `Scheme`) and numpy scalars as plain JSON values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if isinstance(value, Enum):
        return value.value
    return value


def without_timing(value: Any) -> Any:
    """`value` without wall-clock fields at any depth (``seconds``, ``*_seconds``) and without
    ``reused`` (whether this worker had already proven the optimum: it depends on which points
    the worker ran before), so that a point's stored summary is the same whatever the worker,
    its load and the order."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items()
                if k not in ("seconds", "reused") and not str(k).endswith("_seconds")}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def _figures(totals: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(totals.get(k)) for k in FIGURES}


def _search_row(point: Point) -> dict[str, Any]:
    from fusion_dse.optimization import optimize, plan_document

    result = optimize(point.run_spec(model_graph(point)))
    raw = result.summary
    summary = _plain(raw.to_dict() if hasattr(raw, "to_dict") else dict(raw))
    timing = {k: summary.get(k) for k in _TIMING_KEYS}
    summary = without_timing(summary)
    return {
        **_figures(result.cost.totals()),
        "buffer_bytes": result.hw.buffer_bytes,
        "hw_name": result.hw.name,
        "budget_used": result.budget_used,
        "search_status": summary.get("status", "ok"),
        "search_seconds": timing["seconds"],
        "summary": json.dumps(summary, sort_keys=True),
        "plan": json.dumps(_plain(plan_document(result)), sort_keys=True),
        "history": result.history.to_json(orient="split", index=False),
        "pareto": None if result.pareto is None
        else result.pareto.to_json(orient="split", index=False),
    }


def _lbl_row(point: Point) -> dict[str, Any]:
    from fusion_dse.api import evaluate

    model = model_graph(point)
    ev = evaluate(model, point.hw, point.scheme, None, dict(point.overrides),
                  point.input_shape if isinstance(model, str) else None,
                  graph_stages=point.graph_stages)
    doc = _plain(ev.to_dict())
    return {
        **_figures(ev.cost.totals()),
        "buffer_bytes": ev.hw.buffer_bytes,
        "hw_name": ev.hw.name,
        "budget_used": 0,
        "search_status": "ok",
        "search_seconds": None,
        "summary": json.dumps({"model": doc["model"], "hardware": doc["hw"],
                               "totals": doc["totals"], "graph": doc.get("graph")},
                              sort_keys=True),
        "plan": json.dumps({"groups": [g.get("ops") for g in doc["groups"]]}, sort_keys=True),
        "history": None,
        "pareto": None,
    }


def run_point(point: Point, key: str) -> dict[str, Any]:
    """Run one point and return its store row (never raises for the point's own errors).

    Args:
        point: The configuration.
        key: Its store key, echoed in the row.

    Returns:
        ``key``, ``status`` (``done`` or ``failed``), ``error`` (one line, or None), the
        figures (`FIGURES`, ``buffer_bytes``, ``hw_name``, ``budget_used``,
        ``search_status``, ``search_seconds``), ``summary``/``plan``/``history``/``pareto``
        as JSON text, ``started``/``finished`` (Unix time), ``worker`` and
        ``computed_seed`` (the point's seed: it ran itself; `engine.copied_row` keeps it
        when the row stands for another seed's point).
    """
    import torch

    torch.set_num_threads(1)
    started = time.time()
    row: dict[str, Any] = {"key": key, "computed_seed": point.seed}
    try:
        searchable = point.search is not None
        row.update(_search_row(point) if searchable else _lbl_row(point))
        row.update(status="done", error=None)
    except Exception as err:  # noqa: BLE001 - a failing point is a result, not a crash
        last = traceback.extract_tb(err.__traceback__)[-1:]
        where = f" ({last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
        text = " ".join(str(err).split()) or type(err).__name__
        row.update(status="failed", error=f"{type(err).__name__}: {text}{where}")
    row.update(started=started, finished=time.time(), worker=_worker_name())
    return row
