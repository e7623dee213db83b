"""Sweeps and comparisons from Python: ``fusion_dse.sweep(...)``, ``fusion_dse.compare(...)``
and ``fusion_dse.recommend(...)`` run what ``fusion-dse sweep``, ``compare`` and ``recommend``
run (the same points, the same store, resumed the same way) and return DataFrames (a
`fusion_dse.sweep.tradeoff.Recommendation`) instead of printing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fusion_dse.runspec import CompareSpec, RecommendSpec
from simulator.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from fusion_dse.sweep.tradeoff import Recommendation

__all__ = ["best_per_scheme", "compare", "recommend", "sweep"]

Axis = str | int | Sequence[Any] | None


def _axis(value: Axis) -> Any:
    """An axis as the spec takes it: a comma list or range text, a number, or a list."""
    return list(value) if isinstance(value, tuple | list) else value


def _run(axes: dict[str, Axis], name: str, store: str | Path | None, workers: int | None,
         quiet: bool) -> pd.DataFrame:
    from fusion_dse.outputs import check_out_file
    from fusion_dse.sweep import load_sweep
    from fusion_dse.sweep.cli import default_store
    from fusion_dse.sweep.engine import run_sweep
    from fusion_dse.sweep.spec import SweepSpec, check_name, expand
    from fusion_dse.sweep.store import point_key

    check_name(name, path_free=store is None)
    spec = SweepSpec(name=name, axes={k: _axis(v) for k, v in axes.items() if v is not None})
    points = expand(spec)
    path = Path(store) if store is not None else default_store(name)
    check_out_file(path, "store", create_parent=True)
    run_sweep(points, path, name, workers, None, quiet=quiet)
    keys = {point_key(p) for p in points}
    frame = load_sweep(path)
    return frame[frame["key"].isin(keys)].reset_index(drop=True)


def sweep(models: Axis, buffers: Axis = None, schemes: Axis = None, searches: Axis = None,
          repairs: Axis = None, budget: Axis = None, seeds: Axis = None, hw: Axis = None,
          objectives: Axis = None, graph_stages: Axis = None, input_shapes: Axis = None,
          name: str | None = None, store: str | Path | None = None,
          workers: int | None = None,
          quiet: bool = True) -> pd.DataFrame:
    """Run the sweep of every combination of the axes and return its points.

    Each axis takes what the CLI's flag takes (``"64KiB..2MiB:x2"``, ``"lbdf,brr"``,
    ``"0..4"``) or a list; None leaves the axis at its default (docs/sweeps.md). The store
    (default ``fusion-dse-out/sweeps/NAME.sqlite``, NAME ``sweep-HASH`` of the axes unless
    given) is resumed: points already in it are not run again.

    Returns:
        The sweep's points (`fusion_dse.load_sweep` columns, optimum and gap included), one
        row per point of these axes.

    Raises:
        InputError: a bad axis value, name or store, as ``fusion-dse sweep`` refuses them.
    """
    axes = {"model": models, "buffer": buffers, "scheme": schemes, "search": searches,
            "repair": repairs, "budget": budget, "seed": seeds, "hw": hw,
            "objectives": objectives, "graph_stages": graph_stages,
            "input_shape": input_shapes}
    if name is None:
        from fusion_dse.sweep.cli import default_name

        name = default_name({k: _axis(v) for k, v in axes.items() if v is not None})
    return _run(axes, name, store, workers, quiet)


def best_per_scheme(frame: pd.DataFrame) -> pd.DataFrame:
    """Per buffer and scheme, the finished point with the least DRAM: ``buffer_bytes``,
    ``scheme``, ``dram_bytes``, ``mbu_bytes``, ``cycles``, ``energy_pj``, ``key``, and
    ``best`` (the least DRAM at its buffer), sorted by buffer and scheme.

    Raises:
        InputError: no point finished.
    """
    done = frame[frame["status"] == "done"]
    if done.empty:
        raise InputError("no point of the comparison finished")
    best = done.loc[done.groupby(["buffer_bytes", "scheme"])["dram_bytes"].idxmin()]
    best = best.sort_values(["buffer_bytes", "scheme"]).reset_index(drop=True)
    least = best.groupby("buffer_bytes")["dram_bytes"].transform("min")
    columns = ["buffer_bytes", "scheme", "dram_bytes", "mbu_bytes", "cycles", "energy_pj",
               "key"]
    return best[columns].assign(best=best["dram_bytes"] == least)


def compare(model: str, hw: str = CompareSpec.hw, buffers: Axis = CompareSpec.buffers,
            schemes: Axis = CompareSpec.schemes, search: str = CompareSpec.search,
            repair: str = CompareSpec.repair, budget: Axis = CompareSpec.budget,
            seeds: Axis = CompareSpec.seeds, graph_stages: str = CompareSpec.graph_stages,
            store: str | Path | None = None, workers: int | None = None,
            quiet: bool = True) -> pd.DataFrame:
    """Compare dataflows on one network over buffer sizes, as ``fusion-dse compare``: the
    same `fusion_dse.runspec.CompareSpec` (its fields are the settings here), the same points
    in the same store (default ``fusion-dse-out/sweeps/compare-MODEL-HW-HASH``).

    Returns:
        `best_per_scheme` of the comparison's points: one row per buffer and scheme.

    Raises:
        InputError: bad settings, or no point finished.
    """
    from fusion_dse.sweep.cli import compare_name

    spec = CompareSpec(model, hw, buffers, schemes, search, repair, budget, seeds,
                       graph_stages)
    axes, name = spec.axes(), compare_name(spec)
    return best_per_scheme(_run(axes, name, store, workers, quiet))


def recommend(model: str, metric: str = RecommendSpec.metric,
              within: str | float = RecommendSpec.within, hw: str = CompareSpec.hw,
              buffers: Axis = CompareSpec.buffers, schemes: Axis = CompareSpec.schemes,
              search: str = CompareSpec.search, repair: str = CompareSpec.repair,
              budget: Axis = CompareSpec.budget, seeds: Axis = CompareSpec.seeds,
              graph_stages: str = CompareSpec.graph_stages, store: str | Path | None = None,
              workers: int | None = None, quiet: bool = True) -> Recommendation:
    """The smallest buffer within `within` of the best `metric` and its dataflow, as
    ``fusion-dse recommend``: `compare`'s points in its store, read by
    `fusion_dse.sweep.tradeoff.recommend` (its ``curve`` is what it read).

    Raises:
        InputError: bad settings, an unknown metric or tolerance, or no point finished.
    """
    from fusion_dse.sweep import load_sweep
    from fusion_dse.sweep.cli import compare_name, default_store
    from fusion_dse.sweep.tradeoff import parse_metrics, parse_within, with_figures
    from fusion_dse.sweep.tradeoff import recommend as read

    name, tolerance = parse_metrics(metric), parse_within(within)
    if len(name) != 1:
        raise InputError(f"metric {metric!r}: recommend reads one metric")
    spec = CompareSpec(model, hw, buffers, schemes, search, repair, budget, seeds,
                       graph_stages)
    keys = set(_run(spec.axes(), compare_name(spec), store, workers, quiet)["key"])
    path = Path(store) if store is not None else default_store(compare_name(spec))
    frame = load_sweep(path, blobs=True)
    done = frame[frame["key"].isin(keys) & (frame["status"] == "done")]
    if done.empty:
        raise InputError("no point of the comparison finished")
    return read(with_figures(done), name[0], tolerance)
