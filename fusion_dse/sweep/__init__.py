"""Hardware sweeps: specs, the Dask engine, the resumable SQLite store, plots and the CLI.

`spec` expands axes into points, `point.run_point` runs one (a pure function, on a worker),
`engine.run_sweep` runs the points a store lacks on Dask, `store.SweepStore` is the SQLite
store (the client its only writer), `plots` draws figures from a store and `cli` adds the
``sweep``, ``plot`` and ``compare`` subcommands. See docs/sweeps.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from simulator.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["load_sweep"]


def load_sweep(path: str | Path, blobs: bool = False) -> pd.DataFrame:
    """The points of a sweep store as a DataFrame, one row per point.

    Args:
        path: The SQLite store.
        blobs: Also the JSON columns (``config``, ``summary``, ``plan``, ``history``,
            ``pareto``).

    Raises:
        InputError: the file does not exist or is not a sweep store this version reads (it
            is read without being changed, `store.inspect_store`).
    """
    from fusion_dse.sweep.store import SweepStore

    if not Path(path).exists():
        raise InputError(f"no sweep store at {str(path)!r}")
    with SweepStore(path, read_only=True) as store:
        return store.frame(blobs)
