"""The house style of every figure fusion-dse draws (docs/figures.md).

One home for what figures share: the colour-blind-safe palette (Okabe and Ito), font sizes,
the one unit system (bytes in binary prefixes, as the inputs take them: DRAM traffic in MiB,
buffer sizes and F_beta in KiB), readable names of searches and repairs, legends placed
outside the data, and titles that name the model, hardware, buffer and what was searched.
Importing this module imports matplotlib; callers import it once their inputs are checked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import matplotlib
from cycler import cycler

__all__ = ["DRAM_LABEL", "KIB", "MIB", "OKABE_ITO", "RC", "color_of", "kib", "legend_outside",
           "mib", "run_label", "search_label", "size_text", "styled", "title_of"]

KIB, MIB = 1024, 1024**2

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
             "#000000")
"""Okabe and Ito's palette (Color Universal Design, 2008): eight colours told apart under the
common colour-vision deficiencies; blue first, black last (references use grey and black)."""

RC: dict[str, Any] = {
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "figure.titlesize": 10,
    "axes.prop_cycle": cycler(color=OKABE_ITO), "axes.grid": True, "grid.alpha": 0.3,
    "legend.frameon": False, "svg.fonttype": "none",
}
"""matplotlib settings of every figure (`styled`); SVG text stays text (searchable, and the
figure's words can be checked by tests)."""

DRAM_LABEL = "DRAM traffic (MiB)"

_SEARCHES = {"rs": "random search", "ls": "local search", "nsga2": "NSGA-II",
             "exact": "exact solver", "auto": "auto search"}
_REPAIRS = {"random": "random repair", "gnne": "GNNExplainer repair",
            "pg": "PGExplainer repair", "rg": "RG-Explainer repair",
            "alledges": "all-edges repair"}

F = TypeVar("F", bound=Callable[..., Any])


def styled(draw: F) -> F:
    """`draw` run under `RC`: the palette and fonts apply to the artists it creates."""
    @functools.wraps(draw)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with matplotlib.rc_context(RC):
            return draw(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


def mib(n: Any) -> Any:
    """Bytes (a number, array or Series) in MiB."""
    return n / MIB


def kib(n: Any) -> Any:
    """Bytes (a number, array or Series) in KiB."""
    return n / KIB


def size_text(n: float) -> str:
    """A size as the inputs spell it, four digits at most: ``64 KiB``, ``2 MiB``,
    ``114.9 KiB``."""
    return f"{n / MIB:.4g} MiB" if n >= MIB else f"{n / KIB:.4g} KiB"


def search_label(search: str | None, repair: str | None = None) -> str:
    """``local search, random repair`` for ``ls`` and ``random``; layer by layer without a
    search; names the project does not know are shown as they are."""
    if search is None or search != search:  # None or NaN: a layer-by-layer point
        return "layer by layer"
    text = _SEARCHES.get(search, search)
    if search == "exact" or not repair or repair != repair:  # the exact solver repairs nothing
        return text
    return f"{text}, {_REPAIRS.get(repair, repair)}"


def run_label(scheme: str, search: str | None, repair: str | None) -> str:
    """``LBDF, local search, random repair``."""
    return f"{str(scheme).upper()}, {search_label(search, repair)}"


def title_of(model: str, hw: str | Iterable[str], buffer: str, searched: str) -> str:
    """A figure's title, two lines: the model on the hardware with its buffer, then what was
    searched (``mobilenet_v2 (1x3x224x224) on edge-npu, buffer 128 KiB`` / ``LBDF, local
    search, random repair``)."""
    hws = hw if isinstance(hw, str) else ", ".join(sorted(set(hw)))
    return f"{model} on {hws}, buffer {buffer}\n{searched}"


def color_of(key: Any, keys: Sequence[Any]) -> str:
    """The palette colour of `key` among `keys` (the same key, the same colour, in every panel
    of a figure); the palette repeats only past eight keys."""
    return OKABE_ITO[list(keys).index(key) % len(OKABE_ITO)]


def legend_outside(target: Any, handles: Sequence[Any] | None = None,
                   labels: Sequence[str] | None = None, ncols: int = 1) -> None:
    """A legend beside the data, never over it: right of an axes, or below the panels of a
    whole figure (one legend for every panel, up to three columns) when `target` is a Figure
    with constrained layout."""
    from matplotlib.figure import Figure

    if handles is None:
        handles, labels = target.get_legend_handles_labels() if not isinstance(
            target, Figure) else _figure_handles(target)
    if not handles:
        return
    if isinstance(target, Figure):
        target.legend(handles, labels, loc="outside lower center",
                      ncols=max(ncols, min(3, len(handles))))
    else:
        target.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                      borderaxespad=0.0, ncols=ncols)


def _figure_handles(fig: Any) -> tuple[list[Any], list[str]]:
    seen: dict[str, Any] = {}
    for ax in fig.axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    return list(seen.values()), list(seen)
