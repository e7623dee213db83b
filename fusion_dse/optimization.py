"""The optimisation job: search a network's partition plans and write what was found.

`optimize` validates its arguments, loads the network and hardware, runs the search
(`search.run_search`) and adds the reference baselines (`search.reference_baselines`) to the
summary. `write_outputs` writes plan.json, history.csv, summary.json and budget.png, and with
two objectives pareto.csv and pareto.png (keys and columns in docs/search.md).

A network with nothing to fuse (every op unfusable on the buffer, or no two adjacent ops fit
one group, e.g. a BRR run where every pair is BRR-incompatible) is not an error: the result is
the layer-by-layer plan, the only valid one, with ``summary["status"]`` and
``summary["message"]`` saying why, so that buffer sweeps get a data point instead of a failure.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter
from tqdm import tqdm

from fusion_dse.api import resolve_hw
from search import (
    ALGORITHMS,
    PlanBudget,
    SearchProblem,
    SearchResult,
    get_splitter,
    make_algorithm,
    reference_baselines,
    run_search,
)
from search.driver import ProgressFn
from search.problem import parse_objectives
from simulator.cost import CostCache
from simulator.errors import InputError
from simulator.hw import HardwareConfig
from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load

__all__ = ["budget_figure", "optimize", "pareto_figure", "plan_document", "write_outputs"]

_MB = 1e6


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _check_search(search: str) -> str:
    name = str(search).lower()
    if name not in ALGORITHMS:
        raise InputError(f"unknown search algorithm {search!r}; choose one of "
                         f"{', '.join(ALGORITHMS)}")
    return name


@contextmanager
def _progress_bar(progress: bool | ProgressFn, total: int, label: str,
                  ) -> Iterator[ProgressFn | None]:
    """A progress callback: the caller's, a tqdm bar on stderr (True), or none (False)."""
    if callable(progress):
        yield progress
        return
    if not progress:
        yield None
        return
    with tqdm(total=total, desc=label, unit="plan", file=sys.stderr, leave=False) as bar:
        def update(done: int, best: int | None) -> None:
            bar.update(done - bar.n)
            if best is not None:
                bar.set_postfix_str(f"best {best / _MB:.3f} MB", refresh=False)
        yield update


def optimize(model: str | ComputeGraph, hw: str | HardwareConfig = "edge-npu",
             scheme: str = "lbdf", search: str = "ls", repair: str = "random",
             budget: int = 2000, seed: int = 0, objectives: str | Sequence[str] = ("dram",),
             overrides: Mapping[str, Any] | None = None,
             progress: bool | Callable[[int, int | None], None] = False,
             input_shape: str | None = None,
             explained_edges: int | None = None, keep_baseline: bool = True) -> SearchResult:
    """Find the valid partition plan of `model` with the least DRAM traffic.

    Args:
        model: Zoo name, .onnx or graph .json path, ``module:callable``, or a graph.
        hw: Hardware preset name, YAML path or configuration.
        scheme: Fusion dataflow, ``lbdf`` or ``brr``.
        search: ``rs`` (random), ``ls`` (local) or ``nsga2``.
        repair: Splitter for groups over the buffer: ``random``, or explanation-guided
            (``gnne``, ``pg``, ``rg``, or ``alledges`` without explanation).
        budget: Partition plans to propose and evaluate (exactly).
        seed: Seed of the run's generator; the same seed gives the same plan and history.
        objectives: ``dram``, ``dram,mbu`` or ``dram,cycles`` (a string or a sequence).
        overrides: Hardware overrides, e.g. ``{"buffer": "128KiB"}``.
        progress: True for a tqdm bar on stderr, or a callback (evaluated, best DRAM).
        input_shape: Input shape override for `model` (``N,C,H,W``).
        explained_edges: Explained edges the explanation-guided splitter considers per
            group (default: `explain.tree_split.GetSplitter.max_edges`).
        keep_baseline: Explanation-guided repairs keep the random repair's split of a group
            when it costs less DRAM (`explain.tree_split.GetSplitter.keep_baseline`); False
            for Algorithm 1 alone, as in the paper.

    Returns:
        The search result; ``summary["baselines"]`` holds the reference baselines.

    Raises:
        InputError: bad budget, seed, algorithm, repair, scheme, objective, model or hardware.
    """
    PlanBudget(budget)
    seed = _check_seed(seed)
    algorithm = make_algorithm(_check_search(search))
    splitter = make_splitter(repair, explained_edges, keep_baseline)
    objectives = parse_objectives(objectives)
    graph = model if isinstance(model, ComputeGraph) else load(model, input_shape)
    config = resolve_hw(hw, overrides)
    problem = SearchProblem(graph, config, scheme, objectives, splitter)
    label = f"{problem.scheme} {algorithm.name}"
    with _progress_bar(progress, budget, label) as callback:
        result = run_search(problem, algorithm, budget, np.random.default_rng(seed), callback)
    started = time.perf_counter()
    baselines = reference_baselines(graph, config, problem.scheme,
                                    CostCache(graph, config, problem.scheme))
    summary = {
        **result.summary,
        "seed": seed,
        "hardware": config.to_dict(),
        "baselines": {name: b.to_dict() for name, b in baselines.items()},
        "baseline_seconds": round(time.perf_counter() - started, 3),
    }
    if hasattr(splitter, "stats"):  # the explanation-guided splitter's Table V figures
        summary["splitter"] = {**splitter.stats.to_dict(), "max_edges": splitter.max_edges,
                               "keep_baseline": splitter.keep_baseline}
    return replace(result, summary=summary)


GET_REPAIRS = ("alledges", "gnne", "pg", "rg")
"""Explanation-guided repairs (`explain.tree_split.GetSplitter` with each explainer)."""


def make_splitter(name: str, max_edges: int | None = None,  # noqa: ANN201 - a Splitter
                  keep_baseline: bool = True):
    """The repair called `name`: ``random`` (search) or an explanation-guided one (explain).

    Raises:
        InputError: unknown name, or an explainer whose trained parameters are missing.
    """
    key = name.lower()
    if key not in GET_REPAIRS:
        return get_splitter(name)
    from explain.tree_split import GetSplitter

    splitter = GetSplitter(make_explainer(key), keep_baseline=keep_baseline)
    if key == "alledges":
        splitter.max_edges = None  # no explanation: every edge is a candidate
    if max_edges is not None:
        splitter.max_edges = max_edges
    return splitter


def make_explainer(name: str):  # noqa: ANN201 - an explain.tree_split.Explainer
    """The explainer called `name` (alledges, gnne, pg, rg)."""
    if name == "alledges":
        from explain.tree_split import AllEdgesExplainer

        return AllEdgesExplainer()
    if name == "gnne":
        from explain.explainers import GnnExplainerGET

        return GnnExplainerGET()
    if name == "pg":
        from explain.explainers import PgExplainerGET

        return PgExplainerGET()
    if name == "rg":
        from explain.rg_explainer import RgExplainerGET

        return RgExplainerGET()
    raise InputError(f"unknown explainer {name!r}; choose one of {', '.join(GET_REPAIRS[1:])}")


# --- outputs ---------------------------------------------------------------------------------


def plan_document(result: SearchResult) -> dict[str, Any]:
    """plan.json: the plan's groups by op name with F_beta and F_D, readable by `load_plan`."""
    unfusable = set(result.cost.unfusable)
    extra = [{
        "buffer_bytes": g.buffer_bytes,
        "dram_bytes": g.dram_bytes,
        "cycles": g.timing.cycles,
        "unfusable": len(g.ops) == 1 and g.ops[0] in unfusable,
    } for g in result.cost.groups]
    doc = result.plan.to_dict(result.graph, extra)
    doc.update(scheme=result.cost.scheme, hw=result.hw.name,
               buffer_bytes=result.hw.buffer_bytes, totals=result.cost.totals())
    return doc


def write_outputs(result: SearchResult, out_dir: str | Path) -> dict[str, Path]:
    """Write plan.json, history.csv, summary.json, budget.png (+ pareto.csv, pareto.png).

    Returns:
        The written files by name.

    Raises:
        InputError: the directory cannot be created or written.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = {
            "plan.json": _write_text(out / "plan.json",
                                     json.dumps(plan_document(result), indent=2)),
            "history.csv": _write_text(out / "history.csv",
                                       result.history.to_csv(index=False)),
            "summary.json": _write_text(out / "summary.json",
                                        json.dumps(result.summary, indent=2)),
            "budget.png": _save(budget_figure(result), out / "budget.png"),
        }
        if result.pareto is not None:
            files["pareto.csv"] = _write_text(out / "pareto.csv",
                                              result.pareto.to_csv(index=False))
            files["pareto.png"] = _save(pareto_figure(result), out / "pareto.png")
    except OSError as err:
        raise InputError(f"cannot write the outputs to {str(out)!r}: "
                         f"{err.strerror or err}") from err
    return files


def _write_text(path: Path, text: str) -> Path:
    path.write_text(text if text.endswith("\n") else text + "\n")
    return path


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=120)
    return path


_BASELINE_STYLE = {
    "lbl": ("layer by layer", "tab:gray", ":"),
    "greedy": ("DNNFusion greedy", "tab:orange", "--"),
    "greedy_fit": ("greedy, no mapping rules", "tab:purple", "--"),
    "segment_dp": ("segment DP (optimal segments)", "tab:green", "-."),
    "lower_bound": ("compulsory lower bound", "black", ":"),
}


def budget_figure(result: SearchResult) -> Figure:
    """Budget vs best DRAM over the fuseable ops (Mills et al. Fig. 5), baselines as lines."""
    s = result.summary
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    h = result.history
    values = []
    if len(h):
        best = h["best_dram_bytes_fuseable"].astype(float) / _MB
        values += list(best)
        ax.step(h["evaluation"], best, where="post", color="tab:blue", lw=2,
                label=f"{s['search']} best so far")
    else:
        ax.text(0.5, 0.5, f"no search ({s.get('status', '')})", transform=ax.transAxes,
                ha="center")
    for name, b in s.get("baselines", {}).items():
        text, color, style = _BASELINE_STYLE.get(name, (name, "tab:red", "--"))
        mb = b["dram_bytes_fuseable"] / _MB
        values.append(mb)
        ax.axhline(mb, color=color, ls=style, lw=1.2, label=f"{text} ({mb:.3f} MB)")
    if values and min(values) > 0:
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel("partition plans evaluated (budget)")
    ax.set_ylabel("best DRAM access, fuseable ops (MB)")
    ax.set_title(f"{s['model']}, {s['scheme'].upper()}, {s['buffer_bytes'] / 1024:g} KiB "
                 f"buffer, {s['search']} + {s['repair']} repair")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def pareto_figure(result: SearchResult) -> Figure:
    """DRAM against the second objective: every evaluated plan, and the Pareto front."""
    s, front, h = result.summary, result.pareto, result.history
    assert front is not None, "pareto_figure needs a multi-objective result"
    column = front.columns[2]
    scale, unit = (1024, "KiB") if column == "fused_mbu_bytes" else (1e6, "M cycles")
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.scatter(h[column] / scale, h["dram_bytes"] / _MB, s=6, color="lightgray",
               label="evaluated plans")
    line = front.sort_values(column)
    ax.step(line[column] / scale, line["dram_bytes"] / _MB, where="post", color="tab:blue",
            marker="o", label=f"Pareto front ({len(front)} plans)")
    if column == "fused_mbu_bytes":
        ax.axvline(s["buffer_bytes"] / scale, color="black", ls=":", label="buffer size")
        ax.set_xlabel("buffer the fused groups need (largest F_beta of a multi-op group, KiB)")
    else:
        ax.set_xlabel(f"cycles ({unit})")
    ax.set_ylabel("DRAM access, whole network (MB)")
    ax.set_title(f"{s['model']}, {s['scheme'].upper()}, {s['search']}: DRAM vs "
                 f"{'buffer' if column == 'fused_mbu_bytes' else 'cycles'}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig
