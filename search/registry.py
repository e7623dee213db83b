"""The strategy registries: every search algorithm, repair and explainer by name, in one place.

`SEARCHES`, `REPAIRS` and `EXPLAINERS` are read by the command-line `choices`, by
`fusion_dse.optimization.optimize`, by explanation pre-training and by the experiments; a
strategy added here is offered everywhere. A name is cast to its `Strategy` once, where it
enters (`Registry.get`), and a bad name is quoted with the choices.

Entries are lazy: each names its factory as a ``"module:callable"`` reference, imported on
first use, so building the CLI parser loads neither pymoo nor torch. Repairs and explainers
guided by graph explanation live in `explain`, a higher layer: they are referenced here by
string only and never imported by this module, so `search` keeps importing nothing above it
while holding the one list of names (``search -> explain`` happens only when such a strategy is
created, by the caller's request).

A strategy's declared capabilities are the dataflows it can take (`Strategy.schemes`) and,
for explainers, the function that pre-trains its parameters (`Strategy.trainer`). Whether a
built splitter supports a scheme (a parameterised explainer needs its shipped parameters) is
asked once, where the splitter is attached to a problem (`search.problem.SearchProblem`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from simulator.errors import InputError
from simulator.scheme import FUSED_SCHEMES, Scheme, searchable_schemes

__all__ = ["DEFAULT_EXACT_MAX_COSTED", "DEFAULT_EXACT_TIME_LIMIT", "EXPLAINERS", "REPAIRS",
           "SEARCHES", "Registry", "Strategy", "resolve"]

T = TypeVar("T")

DEFAULT_EXACT_MAX_COSTED = 20_000
"""Sets the exact solver may cost by default (its main work cap,
`search.exact.solver.DEFAULT_CAPS`; ``--exact-max-costed``)."""

DEFAULT_EXACT_TIME_LIMIT: float | None = None
"""No wall-clock limit on the exact solver by default (``exact``, ``auto`` and the optimum every
run reports): it stops on counted work (`search.exact.solver.DEFAULT_CAPS`: sets found, down-sets
listed, sets costed), so an answer never depends on the machine or its load. A time limit is
an explicit opt-in safety (``--exact-time-limit``); an answer it cut is marked not
reproducible."""


def resolve(target: str) -> Callable[..., Any]:
    """The callable a ``"module:callable"`` reference names (the module is imported now)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Strategy:
    """One registered strategy.

    Attributes:
        name: Registry key, lower case (``"ls"``, ``"rg"``).
        target: Its factory, ``"module:callable"``.
        help: One line for people.
        schemes: Dataflows it can take (None: every scheme a search takes, those registered
            later included).
        defaults: Keyword arguments always given to the factory (overridable by `options`).
        options: Keyword options the factory takes from callers; others are not passed (the
            random repair has no explained edges).
        trainer: For explainers with parameters, ``"module:callable"`` of their pre-training.
    """

    name: str
    target: str
    help: str
    schemes: tuple[Scheme, ...] | None = None
    defaults: tuple[tuple[str, Any], ...] = ()
    options: tuple[str, ...] = ()
    trainer: str | None = None

    def supports(self, scheme: str | Scheme) -> bool:
        """True if the strategy is declared for dataflow `scheme`."""
        if self.schemes is None:
            return scheme in searchable_schemes()
        return scheme in self.schemes

    def create(self, **options: Any) -> Any:
        """A fresh instance: the factory called with `defaults` and the accepted `options`."""
        kwargs = dict(self.defaults)
        kwargs.update((k, v) for k, v in options.items() if k in self.options)
        return resolve(self.target)(**kwargs)


class Registry(Generic[T]):
    """Strategies of one kind by name, in registration order.

    Args:
        kind: What they are, for messages (``"search algorithm"``).
        entries: The strategies.
    """

    def __init__(self, kind: str, entries: tuple[Strategy, ...]) -> None:
        self.kind = kind
        self._entries: dict[str, Strategy] = {}
        for entry in entries:
            self.register(entry)

    def register(self, entry: Strategy) -> None:
        """Add a strategy.

        Raises:
            ValueError: the name is taken or not lower case, or the target is not
                ``"module:callable"``.
        """
        if entry.name != entry.name.lower() or ":" not in entry.target:
            raise ValueError(f"bad {self.kind} entry {entry!r}")
        if entry.name in self._entries:
            raise ValueError(f"{self.kind} {entry.name!r} is registered already")
        self._entries[entry.name] = entry

    def names(self) -> tuple[str, ...]:
        """Every name, in registration order (what the CLI offers)."""
        return tuple(self._entries)

    def __iter__(self) -> Iterator[Strategy]:
        return iter(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._entries

    def get(self, name: str) -> Strategy:
        """The strategy called `name` (case-insensitive).

        Raises:
            InputError: unknown name (quoted, with the choices).
        """
        try:
            return self._entries[str(name).lower()]
        except KeyError:
            raise InputError(f"unknown {self.kind} {name!r}; choose one of "
                             f"{', '.join(self._entries)}") from None

    def create(self, name: str, **options: Any) -> T:
        """A fresh instance of the strategy called `name` (see `Strategy.create`).

        Raises:
            InputError: unknown name.
        """
        return self.get(name).create(**options)

    def help_text(self) -> str:
        """``name: help`` of every strategy, comma-separated (for CLI help)."""
        return ", ".join(f"{s.name}: {s.help}" for s in self)

    def by(self, predicate: Callable[[Strategy], bool]) -> tuple[str, ...]:
        """Names of the strategies `predicate` accepts, in registration order."""
        return tuple(s.name for s in self if predicate(s))


def _guided(name: str, text: str, schemes: tuple[Scheme, ...] | None = FUSED_SCHEMES,
            **defaults: Any) -> Strategy:
    """An explanation-guided repair: Algorithm 1 (`explain.tree_split`) over explainer `name`
    (on the dataflows its explainer takes: a GNN's are those it was trained on)."""
    return Strategy(name, "explain.tree_split:guided_splitter", text, schemes,
                    defaults=(("explainer", name), *defaults.items()),
                    options=("max_edges", "keep_baseline"))


SEARCHES: Registry[Any] = Registry("search algorithm", (
    Strategy("rs", "search.algorithms.random_search:RandomSearch", "random"),
    Strategy("ls", "search.algorithms.local_search:LocalSearch", "local search"),
    Strategy("nsga2", "search.algorithms.nsga2:NSGA2Search", "NSGA-II"),
    Strategy("exact", "search.exact.algorithm:ExactSearch", "provably optimal plan (capped by "
             "counted work: then the best of the sets costed and the baselines)",
             options=("time_limit", "caps"),
             defaults=(("time_limit", DEFAULT_EXACT_TIME_LIMIT),)),
    Strategy("auto", "search.algorithms.auto:AutoSearch", "exact where it proves the optimum "
             "within its work caps, else local search seeded with the best plan it found",
             options=("time_limit", "caps"),
             defaults=(("time_limit", DEFAULT_EXACT_TIME_LIMIT),)),
))
"""Ask-and-tell search algorithms (`search.algorithms.SearchAlgorithm`): the paper's settings,
the exact solver (`search.exact`) and ``auto`` (exact, else seeded local search)."""

REPAIRS: Registry[Any] = Registry("repair", (
    Strategy("random", "search.splitter:RandomSplitter", "random recursive cuts (the paper's "
             "baseline)"),
    _guided("alledges", "Algorithm 1 over every edge, no explanation", None,
            max_edges=None),
    _guided("gnne", "Algorithm 1 over GNNExplainer's edges"),
    _guided("pg", "Algorithm 1 over PGExplainer's edges"),
    _guided("rg", "Algorithm 1 over RG-Explainer's edges"),
))
"""Splitters of groups over the buffer (`search.splitter.Splitter`)."""

EXPLAINERS: Registry[Any] = Registry("explainer", (
    Strategy("gnne", "explain.explainers:GnnExplainerGET", "GNNExplainer"),
    Strategy("pg", "explain.explainers:PgExplainerGET", "PGExplainer", options=("checkpoint",),
             trainer="explain.explainers:train_pg_explainer"),
    Strategy("rg", "explain.rg_explainer:RgExplainerGET", "RG-Explainer",
             options=("checkpoint",), trainer="explain.rg_explainer:train_rg_explainer"),
    Strategy("alledges", "explain.tree_split:AllEdgesExplainer", "every edge, in order"),
))
"""Rankers of an invalid group's edges (`explain.tree_split.Explainer`)."""
