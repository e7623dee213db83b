"""The optimisation job: search a network's partition plans and write what was found.

`optimize` is the public facade of one run: it hands its arguments to the staged pipeline
(`fusion_dse.pipeline`: load, graph stages, search and repair, optimum, baselines, report) and
returns the search result, whose summary holds the optimum and the reference baselines.
`write_outputs` writes plan.json, history.csv, summary.json and budget.png, and with two
objectives pareto.csv and pareto.png (keys and columns in docs/search.md; figures from
`fusion_dse.plots`).

A network with nothing to fuse (every op unfusable on the buffer, or no two adjacent ops fit
one group, e.g. a BRR run where every pair is BRR-incompatible) is not an error: the result is
the layer-by-layer plan, the only valid one, with ``summary.status`` and ``summary.message``
saying why, so that buffer sweeps get a data point instead of a failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fusion_dse.outputs import atomic_dir
from fusion_dse.pipeline import RunSpec, exact_caps, run_pipeline
from fusion_dse.planfile import plan_document  # the writer; re-exported
from search.exact.solver import DEFAULT_CAPS
from search.result import SearchResult
from simulator.errors import InputError
from simulator.hw import HardwareConfig
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["optimize", "plan_document", "write_outputs"]


def optimize(model: str | ComputeGraph | RunSpec, hw: str | HardwareConfig = RunSpec.hw,
             scheme: str | Scheme = RunSpec.scheme, search: str = RunSpec.search,
             repair: str = RunSpec.repair, budget: int = RunSpec.budget,
             seed: int = RunSpec.seed, objectives: str | Sequence[str] = RunSpec.objectives,
             overrides: Mapping[str, Any] | None = None,
             progress: bool | Callable[[int, int | None], None] = False,
             input_shape: str | None = None,
             explained_edges: int | None = None, keep_baseline: bool = RunSpec.keep_baseline,
             exact_time_limit: float | None = RunSpec.exact_time_limit,
             compute_optimum: bool = RunSpec.compute_optimum,
             graph_stages: str | Sequence[str] | None = RunSpec.graph_stages,
             substitution: str = RunSpec.substitution,
             exact_max_costed: int | None = DEFAULT_CAPS.max_costed) -> SearchResult:
    """Find the valid partition plan of `model` with the least DRAM traffic.

    The keywords are the fields of `fusion_dse.runspec.RunSpec` (their defaults its), made
    into one; a caller that has built a `RunSpec` (the command line, sweep points) passes it
    as `model`, with no other setting but `progress`.

    Args:
        model: Zoo name, .onnx or graph .json path, ``module:callable``, or a graph; or the
            whole request, a `RunSpec`.
        hw: Hardware preset name, YAML path or configuration.
        scheme: Fusion dataflow, LBDF, BRR or hybrid (`Scheme` or its name).
        search: Name in `search.registry.SEARCHES`: ``auto`` (the exact optimum where the
            solver proves it within its work caps, else local search seeded with the best plan
            the capped solver found), ``exact``, ``rs`` (random), ``ls`` (local) or ``nsga2``.
        repair: Name in `search.registry.REPAIRS`, the splitter for groups over the buffer:
            ``random``, or explanation-guided (``gnne``, ``pg``, ``rg``, or ``alledges``
            without explanation).
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
        exact_time_limit: Opt-in wall-clock limit of the exact solver (``exact``, ``auto``
            and the optimum reference), seconds; None (the default) for none. An answer it cut
            depends on the machine and its load (``reproducible`` false in the summary).
        exact_max_costed: Sets the exact solver may cost (its main work cap; None: no cap).
            Capped, its answer is the best of the sets costed and the baselines (``optimal``
            false unless its lower bound proves it, said in the summary); the same on any
            machine.
        compute_optimum: Compute the optimum reference every summary carries (False: it is
            "not computed" and the run saves the solver's time; ``exact`` and ``auto`` reuse
            their own solve, at no cost).
        graph_stages: Graph stages before the search: ``none``, ``all`` or a comma list of
            ``fuse`` (DNNFusion fusion of One-to-One ops), ``fission`` (operator fission of ops
            that fit no group) and ``substitute`` (OCGGS substitution search); plans then name
            ops of the rewritten graph and record its rewrites (docs/graph-stages.md).
        substitution: The substitute stage's search: ``sampling`` (OCGGS Alg. 3), ``dpp``,
            ``pruning`` or ``greedy`` (TASO-style baseline).

    Returns:
        The search result: its plan is the best of every plan the run computed (the
        search's, the optimum, the baselines; ``summary.best_source`` says which, and
        ``summary.search_best`` keeps the search's own when another won);
        ``summary.baselines`` holds the reference baselines and ``summary.optimum`` the
        optimum with the gap to it.

    Raises:
        InputError: bad budget, seed, algorithm, repair, scheme, objective, model or hardware.
        TypeError: a `RunSpec` with another setting given besides it.
    """
    given = RunSpec(model, hw, scheme, search, repair, budget, seed, objectives,  # type: ignore[arg-type]
                    overrides, input_shape, explained_edges, keep_baseline, exact_time_limit,
                    compute_optimum, graph_stages, substitution, exact_caps(exact_max_costed))
    if not isinstance(model, RunSpec):
        return run_pipeline(given, progress)
    others = [f.name for f in fields(RunSpec)
              if f.name != "model" and getattr(given, f.name) != f.default
              and not (f.name == "exact_caps" and exact_max_costed == DEFAULT_CAPS.max_costed)]
    if others:
        raise TypeError(f"optimize(RunSpec, ...) takes its settings from the RunSpec; got "
                        f"{', '.join(others)} besides it")
    return run_pipeline(model, progress)


# --- outputs ---------------------------------------------------------------------------------


OUTPUT_FILES = ("plan.json", "search_plan.json", "history.csv", "summary.json", "budget.png",
                "pareto.csv", "pareto.png", "graph.json", "plan.svg", "search_plan.svg")
"""Every file `write_outputs` may write, and the drawings ``fusion-dse show`` writes beside
its plans by default (a result folder holding them is still a result folder)."""


def write_outputs(result: SearchResult, out_dir: str | Path,
                  force: bool = False) -> dict[str, Path]:
    """Write plan.json (the best plan the run computed), history.csv, summary.json,
    budget.png (+ search_plan.json, the search's own best, when another plan was better; +
    pareto.csv, pareto.png; + graph.json, the rewritten network, when graph stages ran).

    The files are written into a temporary folder beside `out_dir`, which then replaces
    `out_dir` whole (`fusion_dse.outputs.atomic_dir`): a failed or interrupted write leaves
    `out_dir` as it was, and no file of an earlier run survives next to the new ones.

    Args:
        result: The search result.
        out_dir: The result folder.
        force: Replace `out_dir` even when it holds files a run does not write.

    Returns:
        The written files by name (their final paths).

    Raises:
        InputError: the directory cannot be created or written, or holds other files.
    """
    out = Path(out_dir)
    try:
        with atomic_dir(out, OUTPUT_FILES, force) as tmp:
            files = _write_all(result, tmp)
    except OSError as err:
        raise InputError(f"cannot write the outputs to {str(out)!r}: "
                         f"{err.strerror or err}") from err
    return {name: out / name for name in files}


def _write_all(result: SearchResult, out: Path) -> dict[str, Path]:
    from fusion_dse.plots import budget_figure, pareto_figure  # matplotlib: once there is a plan

    files = {
        "plan.json": _write_text(out / "plan.json",
                                 json.dumps(plan_document(result), indent=2)),
        "history.csv": _write_text(out / "history.csv",
                                   result.history.to_csv(index=False)),
        "summary.json": _write_text(out / "summary.json",
                                    json.dumps(result.summary.to_dict(), indent=2)),
        "budget.png": _save(budget_figure(result), out / "budget.png"),
    }
    if result.search_plan is not None:
        files["search_plan.json"] = _write_text(out / "search_plan.json", json.dumps(
            plan_document(result, own=True), indent=2))
    if result.pareto is not None:
        files["pareto.csv"] = _write_text(out / "pareto.csv",
                                          result.pareto.to_csv(index=False))
        files["pareto.png"] = _save(pareto_figure(result), out / "pareto.png")
    if result.summary.graph_stages:
        files["graph.json"] = _write_text(out / "graph.json", result.graph.to_json(indent=1))
    return files


def _write_text(path: Path, text: str) -> Path:
    path.write_text(text if text.endswith("\n") else text + "\n")
    return path


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=120)
    return path
