"""Hardware sweeps: specs, the Dask engine, the resumable SQLite store, plots and the CLI.

`spec` expands axes into points, `point.run_point` runs one (a pure function, on a worker),
`engine.run_sweep` runs the points a store lacks on Dask, `store.SweepStore` is the SQLite
store (the client its only writer), `plots` draws figures from a store and `cli` adds the
``sweep``, ``plot`` and ``compare`` subcommands. See docs/sweeps.md.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from fusion_dse.sweep.tradeoff import Recommendation

__all__ = ["OPTIMUM_COLUMNS", "compare", "load_sweep", "recommend", "sweep"]

OPTIMUM_COLUMNS = ("optimum_dram_bytes", "optimal", "gap_to_optimum")
"""Columns `load_sweep` adds from each point's summary: the optimum's DRAM (the proven optimum,
or the best plan a capped exact solve knows), whether it is proven, and the point's gap to it
((DRAM / optimum) - 1); missing (NA) where no optimum was computed."""


def load_sweep(path: str | Path, blobs: bool = False, parse: bool = False) -> pd.DataFrame:
    """The points of a sweep store as a DataFrame, one row per point, with
    `OPTIMUM_COLUMNS` added.

    Args:
        path: The SQLite store.
        blobs: Also the JSON columns (``config``, ``summary``, ``plan``, ``history``,
            ``pareto``), as JSON text.
        parse: The JSON columns parsed (implies `blobs`): ``config``, ``summary`` and
            ``plan`` as dicts, ``history`` and ``pareto`` as DataFrames (None where a point
            has none).

    Raises:
        InputError: the file does not exist or is not a sweep store this version reads (it
            is read without being changed, `store.inspect_store`).
    """
    from fusion_dse.sweep.store import SweepStore

    if not Path(path).exists():
        raise InputError(f"no sweep store at {str(path)!r}")
    with SweepStore(path, read_only=True) as store:
        frame = store.frame(blobs or parse, summary=True)
    frame = _with_optimum(frame)
    if not (blobs or parse):
        frame = frame.drop(columns="summary")
    return _parsed(frame) if parse else frame


def _with_optimum(frame: pd.DataFrame) -> pd.DataFrame:
    import json

    import pandas as pd

    values: dict[str, list] = {c: [] for c in OPTIMUM_COLUMNS}
    for text in frame["summary"]:
        doc = json.loads(text) if isinstance(text, str) else {}
        optimum = doc.get("optimum") or {}
        known = optimum.get("status") in ("optimal", "capped")
        values["optimum_dram_bytes"].append(optimum.get("dram_bytes") if known else None)
        values["optimal"].append(bool(optimum.get("optimal")) if known else None)
        values["gap_to_optimum"].append((doc.get("best") or {}).get("gap_to_optimum"))
    return frame.assign(
        optimum_dram_bytes=pd.array(values["optimum_dram_bytes"], dtype="Int64"),
        optimal=pd.array(values["optimal"], dtype="boolean"),
        gap_to_optimum=pd.array(values["gap_to_optimum"], dtype="Float64"))


def _parsed(frame: pd.DataFrame) -> pd.DataFrame:
    import io
    import json

    import pandas as pd

    def table(text: object) -> pd.DataFrame | None:
        return pd.read_json(io.StringIO(text), orient="split") if isinstance(text, str) \
            else None

    def doc(text: object) -> object:
        return json.loads(text) if isinstance(text, str) else None

    return frame.assign(**{c: frame[c].map(doc) for c in ("config", "summary", "plan")},
                        **{c: frame[c].map(table) for c in ("history", "pareto")})


def sweep(*args: Any, **kwargs: Any) -> pd.DataFrame:
    """Run a sweep and return its points (`fusion_dse.sweep.api.sweep`)."""
    from fusion_dse.sweep.api import sweep as run

    return run(*args, **kwargs)


def compare(*args: Any, **kwargs: Any) -> pd.DataFrame:
    """Compare dataflows over buffer sizes (`fusion_dse.sweep.api.compare`)."""
    from fusion_dse.sweep.api import compare as run

    return run(*args, **kwargs)


def recommend(*args: Any, **kwargs: Any) -> Recommendation:
    """The smallest buffer within a tolerance of the best (`fusion_dse.sweep.api.recommend`)."""
    from fusion_dse.sweep.api import recommend as run

    return run(*args, **kwargs)


class _CallablePackage(types.ModuleType):
    """``fusion_dse.sweep`` is this package and the call that runs a sweep: once the package
    is imported, Python binds its name on ``fusion_dse`` to the package, so the package itself
    must answer ``fusion_dse.sweep(...)``."""

    def __call__(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
