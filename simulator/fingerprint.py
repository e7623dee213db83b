"""A semantic fingerprint of the cost models: a digest of the figures they produce.

`simulator.cost`'s source digest (``fusion_dse.sweep.store.source_digests``) changes with
every edit of its files, a refactor or a speed-up included. This fingerprint changes only
when a figure changes: it hashes what the analytic cost models and the simulator answer on a
fixed, small reference set (`CASES`), so two versions of the code that give the same figures
have the same fingerprint, whatever their source.

The reference set: four zoo networks at their default input (SqueezeNet 1.0: fire modules and
concats; MobileNetV2: depthwise convs and residuals; MobileNetV3-Small: squeeze-and-excitation,
a global pool broadcast onto a map; ResNet-50: bottleneck residuals, and a classifier whose
weights exceed both buffers, tiled) and a two-layer BERT-base encoder at 128 tokens (token
rows; linear layers tiled to the buffer), each on the ``edge-npu`` preset at 64 KiB and 1 MiB
under LBDF with pixel and with row line buffers, BRR and layer by layer. For each it takes, for
two plans (layer by layer, and the segment plan cut every `SEGMENT` ops of
`simulator.plan.segment_plan`), every group's F_beta (and its weight part), F_D (activations
read, weights read, written, re-reads), MACs, whether it fits and why not (the `Failure` kind,
not the words), tiles, weight streaming, cycles and energy, and the plan's totals and
references (lower bounds, layer by layer), through `simulator.cost.evaluate_plan`, the function
every report reads. The simulator (`simulator.engine.simulate`) runs the segment plan (layer by
layer under LBL) with its non-fitting groups split into single ops on smaller inputs of three of
the networks (`SIMULATED`: 64 px, 32 tokens) at 64 KiB under every dataflow: its cycles, DRAM
bytes, peak occupancy, MACs and energy per group (or that it cannot run). Floats
are rounded to `SIGNIFICANT` digits, so a change in the last bits of a sum (another summation
order) is not a change of a figure.

Scopes (`SCOPES`): ``all`` hashes every figure (`Fingerprint.digest`), ``cnn`` only those
of the CNNs, so a result on CNNs alone stays current when only transformer figures move;
``all/dram`` and ``cnn/dram`` hash only the figures that decide which plans fit and what they
move (`DRAM_KINDS`), so a result of DRAM alone stays current when only the timing or energy
model moves.
Per-network and per-kind digests (`Fingerprint.parts`: dram, buffer, fits, cycles, energy,
simulator) say what changed. The digests are over the figures only; the tool version is
reported next to them (`Fingerprint.version`), never hashed in, so a version bump alone changes
nothing. The reference set is part of what is hashed: changing `NETWORKS`, `CASES`, `SEGMENT`
or `SIGNIFICANT` changes every fingerprint (`SCHEMA` names the set and is hashed too).

    from simulator.fingerprint import fingerprint
    fp = fingerprint()          # a few seconds; cached per process (`fingerprint.cache_clear`)
    fp.digest, fp.scopes["cnn"], fp.parts, fp.version

Nothing here imports a layer above `simulator`; the tool version is read from the installed
package's metadata unless the caller passes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = ["CASES", "NETWORKS", "SCHEMA", "SCOPES", "SEGMENT", "SIGNIFICANT", "SIMULATED", "Case",
           "Fingerprint", "compute", "fingerprint", "reference_figures", "tool_version"]

SCHEMA = "fingerprint-2"
"""The name of the reference set and of the figures taken (hashed with them)."""

SEGMENT = 4
"""The fixed fused plan cuts the topological order every `SEGMENT` ops."""

SIGNIFICANT = 10
"""Floats (cycles, energy) are hashed rounded to this many significant digits."""

BUFFERS = ("64KiB", "1MiB")
"""Buffer sizes of the reference set (the simulator runs at the first)."""

HW = "edge-npu"


@dataclass(frozen=True)
class Case:
    """One dataflow setting of the reference set.

    Attributes:
        name: ``lbdf-pixel``, ``lbdf-row``, ``brr`` or ``lbl``.
        scheme: The dataflow.
        overrides: Hardware fields besides the buffer.
    """

    name: str
    scheme: str
    overrides: tuple[tuple[str, str], ...] = ()


CASES = (Case("lbdf-pixel", "lbdf", (("lbdf_buffer", "pixel"),)),
         Case("lbdf-row", "lbdf", (("lbdf_buffer", "row"),)),
         Case("brr", "brr"),
         Case("lbl", "lbl"))
"""The dataflow settings of the reference set."""


def _bert2(tokens: int = 128):  # noqa: ANN202 - a ComputeGraph
    from simulator.workload.torch_import import from_torch
    from simulator.workload.zoo.bert import BertEncoder

    return from_torch(BertEncoder(2, 768, 12, 3072), (1, tokens, 768), name="bert_base_2layers")


def _zoo(name: str, shape: tuple[int, ...] | None = None) -> Callable[[], Any]:
    def build():  # noqa: ANN202 - a ComputeGraph
        from simulator.workload.loader import load_zoo

        return load_zoo(name, shape)
    return build


NETWORKS: dict[str, tuple[str, Callable[[], Any]]] = {
    "squeezenet1_0": ("cnn", _zoo("squeezenet1_0")),
    "mobilenet_v2": ("cnn", _zoo("mobilenet_v2")),
    "mobilenet_v3_small": ("cnn", _zoo("mobilenet_v3_small")),
    "resnet50": ("cnn", _zoo("resnet50")),
    "bert_base_2layers@128": ("transformer", _bert2),
}
"""The networks of the reference set, by name: their kind (the zoo's: ``cnn`` or
``transformer``) and a builder of the graph."""

SCOPES = ("cnn", "all", "cnn/dram", "all/dram")
"""What a fingerprint digest covers: the figures of the CNNs of the reference set (``cnn``),
or of every network (``all``); with ``/dram``, only the figures that decide which plans fit and
what they move: each group's ops, dataflow, buffer, DRAM and fit figures and the plan totals of
those kinds (not cycles, energy or the simulator's run). A result on CNNs only depends on the
``cnn`` scope, so a change that moves only transformer figures leaves it current; a result that
shows DRAM, buffer use and fit only (tables of DRAM, DRAM curves) depends on a ``/dram`` scope,
so a change to the timing or energy model leaves it current."""

DRAM_KINDS = ("buffer", "dram", "fits")
"""The figure kinds of the ``/dram`` scopes."""

SIMULATED: dict[str, tuple[str, Callable[[], Any]]] = {
    "squeezenet1_0@64": ("cnn", _zoo("squeezenet1_0", (1, 3, 64, 64))),
    "mobilenet_v3_small@64": ("cnn", _zoo("mobilenet_v3_small", (1, 3, 64, 64))),
    "bert_base_2layers@32": ("transformer", lambda: _bert2(32)),
}
"""The networks the simulator runs, smaller inputs of three of `NETWORKS` (an event per row
or tile: at full size they take seconds each), at the first buffer, every dataflow."""


@dataclass(frozen=True)
class Fingerprint:
    """The fingerprint of the cost models of this code.

    Attributes:
        digest: SHA-256 (hex, 16 digits) of every figure of `reference_figures` (the
            ``all`` scope).
        scopes: The digest of each of `SCOPES` (``all`` is `digest`).
        parts: The same over one part of the figures, for telling what changed: per network
            (``net:<name>``), per figure kind (``dram``, ``buffer``, ``cycles``, ``energy``,
            ``fits``) and ``simulator``. Two fingerprints with equal digests have equal parts.
        version: The tool version of the code (reported, not hashed).
        totals: Per network, buffer, dataflow and plan: the plan's whole-network DRAM, MBU,
            cycles and energy (for a readable diff of two fingerprints).
        seconds: How long the figures took to compute.
    """

    digest: str
    scopes: dict[str, str]
    parts: dict[str, str]
    version: str
    totals: dict[str, dict[str, Any]] = field(repr=False)
    seconds: float = field(compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (stable keys)."""
        return {"digest": self.digest, "schema": SCHEMA, "version": self.version,
                "scopes": dict(self.scopes), "parts": dict(sorted(self.parts.items())),
                "totals": dict(sorted(self.totals.items()))}


def tool_version() -> str:
    """The installed fusion-dse's version (package metadata), ``unknown`` when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fusion-dse")
    except PackageNotFoundError:
        return "unknown"


def _real(x: float) -> float:
    return float(format(float(x), f".{SIGNIFICANT}g"))


def _group(c: Any) -> dict[str, Any]:  # noqa: ANN401 - a GroupCost
    return {"ops": list(c.ops), "scheme": str(c.scheme), "runs_alone": c.runs_alone,
            "buffer": [c.buffer_bytes, c.weight_buffer_bytes],
            "dram": [c.dram_act_read, c.dram_weight_read, c.dram_write, c.reread_act_bytes,
                     c.reread_weight_bytes],
            "fits": [c.fits, None if c.failure is None else str(c.failure), c.tiles,
                     c.weights_streamed, c.resident_weight_bytes,
                     [list(s) for s in c.weight_slices]],
            "cycles": [c.macs, c.timing.compute_cycles, c.timing.dram_cycles, c.timing.cycles],
            "energy": [_real(c.timing.energy_dram_pj), _real(c.timing.energy_buffer_pj),
                       _real(c.timing.energy_mac_pj)]}


def _plan(cost: Any) -> dict[str, Any]:  # noqa: ANN401 - a PlanCost
    return {"groups": [_group(c) for c in cost.groups],
            "totals": {"dram": [cost.dram_bytes, cost.dram_bytes_fuseable, cost.lower_bound,
                                cost.lower_bound_fuseable, cost.lbl_dram,
                                cost.lbl_dram_fuseable],
                       "buffer": [cost.mbu],
                       "fits": [cost.valid, list(cost.unfusable), len(cost.violations)],
                       "cycles": [cost.cycles], "energy": [_real(cost.energy_pj)]}}


def _fitting(graph: Any, plan: Any, cost: Any) -> Any:  # noqa: ANN401 - plans and costs
    """`plan` with every group that does not run split into single ops (a valid plan)."""
    from simulator.plan import PartitionPlan

    groups: list[tuple[int, ...]] = []
    for g, c in zip(plan.groups, cost.groups, strict=True):
        groups.extend([tuple(g.ops)] if c.fits else [(o,) for o in g.ops])
    return PartitionPlan.of(groups)


def _simulated(report: Any) -> dict[str, Any]:  # noqa: ANN401 - a SimReport
    return {"cycles": report.cycles, "dram": report.dram_bytes,
            "peak": report.peak_buffer_bytes, "macs": report.macs,
            "groups": [[g.index, list(g.ops), str(g.mode), g.end - g.start,
                        sum(g.dram_read.values()), sum(g.dram_write.values()),
                        g.peak_buffer_bytes, g.macs, g.tiles] for g in report.groups],
            "energy": [_real(report.energy_dram_pj), _real(report.energy_buffer_pj),
                       _real(report.energy_mac_pj)]}


def _figures() -> Iterator[tuple[str, dict[str, Any]]]:
    from simulator.cost import CostCache, evaluate_plan
    from simulator.engine import SimulationError, simulate
    from simulator.hw import load_hw
    from simulator.plan import layer_by_layer, segment_plan

    hws = {(b, c.name): load_hw(HW, {"buffer": b, **dict(c.overrides)})
           for b in BUFFERS for c in CASES}
    for net, (_, build) in NETWORKS.items():
        graph = build()
        plans = {"lbl": layer_by_layer(graph),
                 f"seg{SEGMENT}": segment_plan(graph, range(SEGMENT, len(graph), SEGMENT))}
        for buffer in BUFFERS:
            for case in CASES:
                hw = hws[buffer, case.name]
                cache = CostCache(graph, hw, case.scheme)
                for plan_name, plan in plans.items():
                    if case.scheme == "lbl" and plan_name != "lbl":
                        continue  # layer by layer runs one op per group
                    cost = evaluate_plan(graph, plan, hw, case.scheme, cache=cache)
                    yield f"{net}/{buffer}/{case.name}/{plan_name}", _plan(cost)
    for net, (_, build) in SIMULATED.items():
        graph = build()
        for case in CASES:
            hw = hws[BUFFERS[0], case.name]
            cache = CostCache(graph, hw, case.scheme)
            plan = (layer_by_layer(graph) if case.scheme == "lbl" else
                    segment_plan(graph, range(SEGMENT, len(graph), SEGMENT)))
            run = _fitting(graph, plan, evaluate_plan(graph, plan, hw, case.scheme, cache=cache))
            try:
                figures = _simulated(simulate(graph, run, hw, case.scheme, record=False,
                                              cache=cache))
            except SimulationError as err:  # a figure too: this plan cannot run
                figures = {"error": type(err).__name__}
            yield f"{net}/{BUFFERS[0]}/{case.name}/simulated", {"simulator": figures}


def reference_figures() -> dict[str, dict[str, Any]]:
    """Every figure the fingerprint hashes, by ``network/buffer/dataflow/plan``."""
    return dict(_figures())


def _digest(value: Any) -> str:  # noqa: ANN401 - JSON-ready
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_KINDS = ("dram", "buffer", "fits", "cycles", "energy")


def _dram_figures(figures: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The figures of `DRAM_KINDS` of the costed plans among `figures` (the ``/dram`` scopes)."""
    keep = ("ops", "scheme", "runs_alone", *DRAM_KINDS)
    return {k: {"groups": [{f: g[f] for f in keep} for g in v["groups"]],
                "totals": {f: v["totals"][f] for f in DRAM_KINDS}}
            for k, v in figures.items() if "totals" in v}


def compute(version: str | None = None) -> Fingerprint:
    """The fingerprint of the code as it is now (a few seconds; see `fingerprint`)."""
    import time

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # graphs are built with torch: one thread is faster on a busy box
    start = time.perf_counter()
    try:
        figures = reference_figures()
    finally:
        torch.set_num_threads(threads)
    seconds = time.perf_counter() - start
    kind = {**{n: k for n, (k, _) in NETWORKS.items()},
            **{n: k for n, (k, _) in SIMULATED.items()}}
    costed = {k: v for k, v in figures.items() if "totals" in v}
    parts: dict[str, str] = {}
    for net in [*NETWORKS, *SIMULATED]:
        parts[f"net:{net}"] = _digest({k: v for k, v in figures.items()
                                       if k.startswith(f"{net}/")})
    for name in _KINDS:
        parts[name] = _digest({k: [[g["ops"], g[name]] for g in v["groups"]]
                               + [v["totals"][name]] for k, v in costed.items()})
    parts["simulator"] = _digest({k: v["simulator"] for k, v in figures.items()
                                  if "simulator" in v})
    totals = {k: {"dram_bytes": v["totals"]["dram"][0], "mbu_bytes": v["totals"]["buffer"][0],
                  "cycles": v["totals"]["cycles"][0], "energy_pj": v["totals"]["energy"][0]}
              for k, v in costed.items()}
    cnn = {k: v for k, v in figures.items() if kind[k.split("/")[0]] == "cnn"}
    scopes = {"cnn": _digest({"schema": SCHEMA, "figures": cnn}),
              "all": _digest({"schema": SCHEMA, "figures": figures})}
    for name, chosen in (("cnn", cnn), ("all", figures)):
        scopes[f"{name}/dram"] = _digest({"schema": SCHEMA, "figures": _dram_figures(chosen)})
    return Fingerprint(digest=scopes["all"], scopes=scopes, parts=parts,
                       version=version or tool_version(), totals=totals, seconds=seconds)


@lru_cache(maxsize=1)
def fingerprint(version: str | None = None) -> Fingerprint:
    """`compute`, once per process (``fingerprint.cache_clear()`` to compute it again)."""
    return compute(version)


if __name__ == "__main__":
    import sys

    fp = compute()
    print(json.dumps({**fp.to_dict(), "seconds": round(fp.seconds, 2)}, indent=1)
          if "--json" in sys.argv[1:] else
          f"{fp.digest}  (tool {fp.version}, {fp.seconds:.1f} s)")
