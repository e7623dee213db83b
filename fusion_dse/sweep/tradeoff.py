"""Trade-offs an architect reads from a sweep: each point's figures by metric (DRAM, latency,
energy, SRAM area, energy-delay product) and the smallest buffer within a tolerance of the best
(`recommend`; docs/hardware.md).

A point's area and clock are its hardware's (the summary's ``hardware``, a
`simulator.hw.HardwareConfig` as written): area is `HardwareConfig.area_mm2` (the SRAM model at
the point's buffer capacities), latency its cycles over the clock.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from fusion_dse.runspec import RecommendSpec
from simulator.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_METRIC", "DEFAULT_WITHIN", "METRICS", "PLOT_METRIC", "Metric",
           "Recommendation", "check_metric", "parse_metrics", "parse_within", "recommend",
           "with_figures"]


@dataclass(frozen=True)
class Metric:
    """A figure of a point, lower is better.

    Attributes:
        name: As the command line spells it.
        column: Its column in `with_figures`'s frame.
        label: What it is, for an axis or a table.
        unit: The unit it is shown in.
        scale: Column value / scale = the value in `unit`.
    """

    name: str
    column: str
    label: str
    unit: str
    scale: float

    @property
    def axis(self) -> str:
        """``label (unit)``."""
        return f"{self.label} ({self.unit})"


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("dram", "dram_bytes", "DRAM traffic", "MiB", 2**20),
    Metric("cycles", "latency_ms", "latency", "ms", 1.0),
    Metric("energy", "energy_pj", "energy", "mJ", 1e9),
    Metric("area", "area_mm2", "SRAM area", "mm²", 1.0),
    Metric("edp", "edp_mj_ms", "energy-delay product", "mJ·ms", 1.0),
)}
"""The metrics of ``plot tradeoff --metric``, ``compare`` and ``recommend``."""
DEFAULT_METRIC = RecommendSpec.metric
DEFAULT_WITHIN = RecommendSpec.within
PLOT_METRIC = "dram"
"""The metric of ``plot tradeoff`` without ``--metric`` (the figure it always drew)."""
MAX_WITHIN = 10.0
"""Largest tolerance (1000 %): beyond it every buffer is within."""


def parse_metrics(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Metric names from ``dram,energy`` (or a list of such texts), in order, once each.

    Raises:
        InputError: an unknown name (the known ones listed) or none.
    """
    parts = [text] if isinstance(text, str) else list(text)
    names = [n.strip().lower() for part in parts for n in str(part).split(",") if n.strip()]
    for name in names:
        if name not in METRICS:
            raise InputError(f"--metric {name[:30]!r}: unknown metric (metrics: "
                             f"{', '.join(METRICS)})")
    if not names:
        raise InputError(f"--metric: no metric given (metrics: {', '.join(METRICS)})")
    return tuple(dict.fromkeys(names))


def parse_within(text: str | float) -> float:
    """A tolerance as a fraction: ``5%`` or ``0.05`` -> 0.05.

    Raises:
        InputError: not a number, negative or over `MAX_WITHIN` (1000 %).
    """
    raw = str(text).strip()
    percent = raw.endswith("%")
    try:
        value = float(raw.rstrip("%").strip()) / (100 if percent else 1)
    except ValueError:
        raise InputError(f"--within {raw[:30]!r}: not a tolerance (use e.g. 5% or 0.05)") \
            from None
    if not math.isfinite(value) or not 0 <= value <= MAX_WITHIN:
        raise InputError(f"--within {raw[:30]!r}: must be between 0 and "
                         f"{MAX_WITHIN * 100:g} %")
    return value


@lru_cache(maxsize=1024)
def _hardware(doc: str) -> tuple[float, float]:
    """(area mm², clock Hz) of a summary's ``hardware`` (JSON text)."""
    from simulator.hw import HardwareConfig

    config = HardwareConfig(**json.loads(doc))
    return config.area_mm2, config.clock_hz


def _hardware_of(summary: Any) -> tuple[float, float]:
    try:
        doc = json.loads(summary) if isinstance(summary, str) else None
        hw = doc.get("hardware") if isinstance(doc, dict) else None
        return _hardware(json.dumps(hw, sort_keys=True)) if isinstance(hw, dict) else \
            (math.nan, math.nan)
    except (TypeError, ValueError):  # a summary written by another version
        return math.nan, math.nan


def with_figures(frame: pd.DataFrame) -> pd.DataFrame:
    """The finished points of `frame` (`fusion_dse.load_sweep` with its summaries) with every
    metric's column: ``area_mm2``, ``latency_ms`` (cycles / clock) and ``edp_mj_ms`` (energy
    in mJ x latency in ms) added.

    Raises:
        InputError: the frame has no summaries (load the store with ``blobs=True``).
    """
    if "summary" not in frame:
        raise InputError("the points' summaries are needed for area and latency")
    done = frame[frame["status"] == "done"]
    figures = [_hardware_of(s) for s in done["summary"]]
    area = [a for a, _ in figures]
    clock = [c for _, c in figures]
    latency = done["cycles"].astype(float) / clock * 1e3
    return done.assign(area_mm2=area, latency_ms=latency,
                       edp_mj_ms=done["energy_pj"].astype(float) / 1e9 * latency)


def check_metric(frame: pd.DataFrame, metric: Metric) -> None:
    """Refuse a metric the points of `frame` (`with_figures`) do not have."""
    values = frame[metric.column]
    if values.isna().all() or (metric.name == "area" and not (values > 0).any()):
        raise InputError(f"the store's points have no {metric.label} (computed before the "
                         "SRAM model, docs/hardware.md); run them again")


@dataclass(frozen=True)
class Recommendation:
    """The smallest buffer whose best point is within `within` of the best over all buffers.

    Attributes:
        model: The network.
        metric: The metric's name (`METRICS`).
        within: The tolerance, a fraction of the best.
        buffer_bytes, scheme, value: The recommended buffer, its best dataflow and its value
            (in the metric's unit).
        best_buffer, best_scheme, best_value: The best point over all buffers.
        curve: Per buffer (ascending): ``buffer_bytes``, ``scheme`` (the best at it),
            ``value`` (in the metric's unit), ``ratio`` (value / best), ``within`` (bool).
    """

    model: str
    metric: str
    within: float
    buffer_bytes: int
    scheme: str
    value: float
    best_buffer: int
    best_scheme: str
    best_value: float
    curve: pd.DataFrame

    def text(self) -> str:
        """The curve and the recommendation, as ``fusion-dse recommend`` prints them."""
        from fusion_dse.figure_style import size_text

        m = METRICS[self.metric]
        rows = [f"{self.model}: {m.label} ({m.unit}) by buffer, the best dataflow at each",
                f"  {'buffer':>10s}  {'dataflow':8s} {m.unit:>12s} {'x best':>8s}"]
        for r in self.curve.itertuples(index=False):
            mark = " <- recommended" if r.buffer_bytes == self.buffer_bytes else (
                " (best)" if r.buffer_bytes == self.best_buffer else "")
            rows.append(f"  {size_text(r.buffer_bytes):>10s}  {str(r.scheme).upper():8s} "
                        f"{r.value:12.4g} {r.ratio:8.3f}{' *' if r.within else '  '}{mark}")
        rows.append(
            f"recommended: {size_text(self.buffer_bytes)} {self.scheme.upper()} "
            f"({m.label} {self.value:.4g} {m.unit}, {self.value / self.best_value - 1:+.1%} "
            f"of the best, {self.best_value:.4g} {m.unit} at {size_text(self.best_buffer)} "
            f"{self.best_scheme.upper()}; * within {self.within:.1%})")
        return "\n".join(rows)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the recommendation and its curve."""
        return {"model": self.model, "metric": self.metric, "within": self.within,
                "buffer_bytes": self.buffer_bytes, "scheme": self.scheme, "value": self.value,
                "best_buffer": self.best_buffer, "best_scheme": self.best_scheme,
                "best_value": self.best_value,
                "curve": json.loads(self.curve.to_json(orient="records"))}


def recommend(frame: pd.DataFrame, metric: str = DEFAULT_METRIC,
              within: float | str = DEFAULT_WITHIN, model: str | None = None
              ) -> Recommendation:
    """The smallest buffer within `within` of the best `metric` (and its best dataflow).

    Each (buffer, dataflow) counts its best point (the least value over its seeds and
    searches); each buffer its best dataflow; the best is the least over the buffers.

    Args:
        frame: `with_figures` of a sweep's points (one model, or name it).
        metric: A name of `METRICS`.
        within: The tolerance, a fraction or a percentage text (``5%``).
        model: The network when the frame holds several.

    Raises:
        InputError: an unknown metric, a bad tolerance, no finished point of the model, a
            metric the points lack, or several models and none named.
    """
    m = METRICS[parse_metrics(metric)[0]]
    tolerance = within if isinstance(within, float) else parse_within(within)
    models = sorted(set(frame["model"].astype(str)))
    if model is None and len(models) > 1:
        raise InputError(f"the store holds {len(models)} models; name one of "
                         f"{', '.join(models[:8])}")
    model = model if model is not None else (models[0] if models else "")
    points = frame[frame["model"].astype(str) == model]
    if points.empty:
        raise InputError(f"no finished point of model {model[:60]!r}")
    check_metric(points, m)
    per = (points.assign(value=points[m.column].astype(float) / m.scale)
           .groupby(["buffer_bytes", "scheme"])["value"].min().reset_index())
    curve = per.loc[per.groupby("buffer_bytes")["value"].idxmin()].sort_values("buffer_bytes")
    best = curve.loc[curve["value"].idxmin()]
    curve = curve.assign(ratio=curve["value"] / best["value"] if best["value"] else 1.0,
                         within=curve["value"] <= best["value"] * (1 + tolerance))
    chosen = curve[curve["within"]].iloc[0]
    return Recommendation(
        model=model, metric=m.name, within=tolerance,
        buffer_bytes=int(chosen["buffer_bytes"]), scheme=str(chosen["scheme"]),
        value=float(chosen["value"]), best_buffer=int(best["buffer_bytes"]),
        best_scheme=str(best["scheme"]), best_value=float(best["value"]),
        curve=curve.reset_index(drop=True).astype({"buffer_bytes": "int64"}))
