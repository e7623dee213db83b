"""`RunSpec`: every setting of one run, with its default and its check, in one place.

The command line (``optimize`` builds one and passes it to `fusion_dse.optimization.optimize`;
the defaults of ``evaluate``, ``simulate``, ``rewrite``, ``explain`` and ``sweep`` are its),
`optimize`'s keyword facade, sweep points (`fusion_dse.sweep.spec.Point.run_spec`) and plan
files all build or read a `RunSpec`; ``compare`` and `fusion_dse.sweep.compare` build a
`CompareSpec` (the small sweep MODEL x buffers x dataflows, whose points are `RunSpec`s). The
defaults are their field defaults (`run_defaults` and `compare_defaults` give them as the
command line shows them, read by ``cli.toml`` through ``default_from = "run.FIELD"`` or
``"compare.FIELD"`` and ``{run.FIELD}`` in help texts), and `RunSpec.checked` checks and casts
every setting once, before anything is loaded (names by their registries, the dataflow and
objectives by `search.problem.problem_settings`, the seed and the budget by `check_seed` and
`check_budget`, which the command line and sweep specs call too). Nothing is imported here
that an input check must not wait for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from search.registry import DEFAULT_EXACT_TIME_LIMIT
from search.substitution.stages import DEFAULT_STAGES
from simulator import limits
from simulator.errors import InputError
from simulator.hw import DEFAULT_PRESET
from simulator.scheme import DEFAULT_SCHEME, Scheme

if TYPE_CHECKING:
    from search.budget import Termination
    from search.exact.solver import ExactCaps
    from search.registry import Strategy
    from search.splitter import Splitter
    from simulator.hw import HardwareConfig
    from simulator.workload.graph import ComputeGraph

__all__ = ["DEFAULT_MODEL", "CheckedRun", "CompareSpec", "RecommendSpec", "RunSpec",
           "check_budget", "check_seed", "compare_defaults", "recommend_defaults",
           "run_defaults", "shown"]

DEFAULT_MODEL = "mobilenet_v2"
"""The network ``fusion-dse optimize`` runs when none is named (the paper's Table V network)."""


@dataclass(frozen=True)
class RunSpec:
    """What one run is asked to do (the arguments of `fusion_dse.optimization.optimize`).

    Attributes:
        model: Zoo name, .onnx or graph .json path, ``module:callable``, or a graph.
        hw: Hardware preset name, YAML path or configuration.
        scheme: Fusion dataflow (a searchable scheme: LBDF, BRR, hybrid, or one registered).
        search: Name in `search.registry.SEARCHES` (``auto``: exact when proven within the
            work caps, else seeded local search).
        repair: Name in `search.registry.REPAIRS`.
        budget: Plans to propose and evaluate (1..`simulator.limits.MAX_BUDGET`).
        seed: Seed of the run's generator (0..`simulator.limits.MAX_SEED`).
        objectives: Objective names (a string or a sequence).
        overrides: Hardware overrides.
        input_shape: Input shape override for `model`.
        explained_edges: Explained edges an explanation-guided repair considers per group
            (None: the repair's default).
        keep_baseline: Explanation-guided repairs keep the random split when cheaper.
        exact_time_limit: Opt-in wall-clock limit of the exact solver (``exact``, ``auto``
            and the ``optimum`` of every run), seconds; None (the default) for none: the solver
            stops on `exact_caps` alone and its answer is the same on any machine.
        compute_optimum: Compute the ``optimum`` reference (False: "not computed").
        graph_stages: Graph stages run before the search (``none``, ``all`` or a comma list
            of ``fuse``, ``fission``, ``substitute``; `search.substitution.stages`).
        substitution: The substitute stage's search (``sampling``, ``dpp``, ``pruning``,
            ``greedy``).
        exact_caps: Work caps of the exact solver (None: `search.exact.solver.DEFAULT_CAPS`).
    """

    model: str | ComputeGraph
    hw: str | HardwareConfig = DEFAULT_PRESET
    scheme: str | Scheme = DEFAULT_SCHEME
    search: str = "auto"
    repair: str = "random"
    budget: int = 2000
    seed: int = 0
    objectives: str | Sequence[str] = ("dram",)
    overrides: Mapping[str, Any] | None = None
    input_shape: str | None = None
    explained_edges: int | None = None
    keep_baseline: bool = True
    exact_time_limit: float | None = DEFAULT_EXACT_TIME_LIMIT
    compute_optimum: bool = True
    graph_stages: str | Sequence[str] | None = DEFAULT_STAGES
    substitution: str = "sampling"
    exact_caps: ExactCaps | None = None

    def repair_options(self) -> dict[str, Any]:
        """Options for the repair's factory (a repair takes those it declares)."""
        options: dict[str, Any] = {"keep_baseline": self.keep_baseline}
        if self.explained_edges is not None:
            options["max_edges"] = self.explained_edges
        return options

    def checked(self) -> CheckedRun:
        """Every setting checked and cast, in the order a user meets them, before anything is
        loaded: seed, budget, the exact solver's limit and caps, search, repair (made),
        graph stages, dataflow and objectives (the model and the hardware are checked by the
        load stage, name first).

        Raises:
            InputError: the first bad setting, quoted.
        """
        from search.budget import as_termination
        from search.problem import problem_settings
        from search.registry import REPAIRS, SEARCHES
        from search.substitution.stages import parse_stages

        seed = check_seed(self.seed)
        termination = as_termination(check_budget(self.budget))
        time_limit = _check_time_limit(self.exact_time_limit)
        caps = _check_caps(self.exact_caps)
        search = SEARCHES.get(self.search)
        splitter = REPAIRS.create(self.repair, **self.repair_options())
        parse_stages(self.graph_stages)
        scheme, objectives = problem_settings(self.scheme, self.objectives)
        return CheckedRun(seed, termination, time_limit, caps, search, splitter, scheme,
                          objectives)


@dataclass(frozen=True)
class CheckedRun:
    """A `RunSpec`'s settings as the pipeline uses them (`RunSpec.checked`)."""

    seed: int
    termination: Termination
    time_limit: float | None
    caps: ExactCaps
    search: Strategy
    splitter: Splitter
    scheme: Scheme
    objectives: tuple[str, ...]


@dataclass(frozen=True)
class CompareSpec:
    """What ``fusion-dse compare`` and `fusion_dse.sweep.compare` are asked to do: the small
    sweep of one network over buffer sizes and dataflows (searching each fused one), each of
    its points a `RunSpec` of these settings.

    Attributes:
        model: Zoo name, .onnx or graph .json path, or ``module:callable``.
        hw: Hardware preset name or YAML path (`RunSpec.hw`).
        buffers: Buffer sizes, as a sweep axis takes them (``64KiB..2MiB:x2``, a list).
        schemes: Dataflows, as a sweep axis takes them (``lbdf,brr``, a list).
        search: Search of every searched point (`RunSpec.search`).
        repair: Repair of every searched point (`RunSpec.repair`).
        budget: Plans per search, one value or an axis.
        seeds: Seeds, one value or an axis (``0..4``).
        graph_stages: Graph stages of every point, layer by layer included, as `RunSpec`
            takes them (one setting: every dataflow is costed on the same rewritten graph).
    """

    model: str
    hw: str = RunSpec.hw  # type: ignore[assignment]
    buffers: Any = "64KiB..2MiB:x2"
    schemes: Any = "lbdf,brr,lbl,hybrid"
    search: str = RunSpec.search
    repair: str = RunSpec.repair
    budget: Any = 1000
    seeds: Any = 0
    graph_stages: str = DEFAULT_STAGES

    def axes(self) -> dict[str, Any]:
        """The comparison as sweep axes (`fusion_dse.sweep.spec.SweepSpec`): one model,
        hardware, search, repair and graph-stages value (its stages joined by ``+``)."""
        return {"model": [self.model], "hw": [self.hw], "buffer": self.buffers,
                "scheme": self.schemes, "search": [self.search], "repair": [self.repair],
                "budget": self.budget, "seed": self.seeds,
                "graph_stages": [str(self.graph_stages).replace(",", "+")]}


@dataclass(frozen=True)
class RecommendSpec(CompareSpec):
    """What ``fusion-dse recommend`` is asked: a comparison (`CompareSpec`, the same points
    and store) read for the smallest buffer within `within` of the best `metric`
    (`fusion_dse.sweep.tradeoff.recommend`).

    Attributes:
        metric: ``dram``, ``cycles``, ``energy``, ``area`` or ``edp``
            (`fusion_dse.sweep.tradeoff.METRICS`).
        within: The tolerance: ``5%`` or a fraction.
    """

    metric: str = "energy"
    within: str = "5%"

    def comparison(self) -> CompareSpec:
        """The comparison it reads (its store and name are the comparison's)."""
        return CompareSpec(*(getattr(self, f.name) for f in fields(CompareSpec)))


def check_seed(seed: Any) -> int:
    """`seed` as an int in 0..`simulator.limits.MAX_SEED`.

    Raises:
        InputError: not a non-negative integer, or over the limit.
    """
    import numpy as np

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {limits.shown(seed)}")
    if seed > limits.MAX_SEED:
        raise InputError(f"seed {seed:,} is over the limit of {limits.MAX_SEED:,} (2^63 - 1)")
    return int(seed)


def check_budget(budget: Any, name: str = "budget") -> Any:
    """`budget` unless it is an integer over `simulator.limits.MAX_BUDGET` plans (`name`: how
    the caller calls it, e.g. ``--budget``); its other checks are `search.budget`'s, where it
    becomes a termination.

    Raises:
        InputError: over the limit.
    """
    if isinstance(budget, int) and not isinstance(budget, bool) and budget > limits.MAX_BUDGET:
        raise InputError(f"{name} {budget:,} is over the limit of {limits.MAX_BUDGET:,} plans")
    return budget


def run_defaults() -> dict[str, Any]:
    """The default of every setting as the command line shows it, keyed ``run.FIELD`` (what
    ``cli.toml``'s ``default_from`` names): objectives comma-joined, the scheme its name."""
    out: dict[str, Any] = {}
    for f in fields(RunSpec):
        if f.name == "model":
            continue
        value = f.default
        if isinstance(value, tuple):
            value = ",".join(value)
        elif isinstance(value, Scheme):
            value = str(value)
        out[f"run.{f.name}"] = value
    return out


def recommend_defaults() -> dict[str, Any]:
    """The defaults `RecommendSpec` adds to a comparison's, keyed ``recommend.FIELD``."""
    own = {f.name for f in fields(RecommendSpec)} - {f.name for f in fields(CompareSpec)}
    return {f"recommend.{f.name}": f.default for f in fields(RecommendSpec) if f.name in own}


def compare_defaults() -> dict[str, Any]:
    """The defaults of `CompareSpec` as the command line shows them, keyed ``compare.FIELD``."""
    return {f"compare.{f.name}": f.default for f in fields(CompareSpec) if f.name != "model"}


def shown(value: Any) -> str:
    """A default as a help text names it: None as ``none``, a sequence comma-joined."""
    if value is None:
        return "none"
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    return str(value)


def _check_time_limit(limit: Any) -> float | None:
    import numpy as np

    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, (int, float, np.integer, np.floating)) \
            or not limit > 0:
        raise InputError(f"the exact solver's time limit must be a positive number of "
                         f"seconds or None, got {limit!r}")
    return float(limit)


def _check_caps(caps: Any) -> ExactCaps:
    from search.exact.solver import DEFAULT_CAPS, ExactCaps

    caps = DEFAULT_CAPS if caps is None else caps
    if not isinstance(caps, ExactCaps):
        raise InputError(f"the exact solver's caps must be an ExactCaps or None, got "
                         f"{type(caps).__name__}")
    return caps
