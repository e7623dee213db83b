"""Budgets and terminations: when a search stops, as objects (STYLE.md #5).

The paper's budget counts *partition plans proposed and evaluated* (Mills et al. §IV-B): every
plan an algorithm hands to the driver costs one unit, whether or not the same plan was seen
before (its cost then comes from the plan memo). `PlanBudget` is exact: the driver truncates the
last batch an algorithm asks for, so a run evaluates exactly N plans, never a generation more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from simulator.errors import InputError

__all__ = ["AnyOf", "PlanBudget", "SearchState", "Stagnation", "Termination", "as_termination"]


@dataclass(frozen=True, slots=True)
class SearchState:
    """What a termination may look at.

    Attributes:
        evaluated: Plans proposed and evaluated so far.
        last_improvement: Evaluation index (1-based) of the last new best plan, 0 if none.
    """

    evaluated: int
    last_improvement: int


@runtime_checkable
class Termination(Protocol):
    """Decides when a search stops and how many more plans it may evaluate."""

    def done(self, state: SearchState) -> bool:
        """True when the search must stop."""
        ...

    def remaining(self, state: SearchState) -> int | None:
        """Most plans that may still be evaluated (None: no cap)."""
        ...


@dataclass(frozen=True, slots=True)
class PlanBudget:
    """Stop after exactly `plans` proposed-and-evaluated plans."""

    plans: int

    def __post_init__(self) -> None:
        if isinstance(self.plans, bool) or not isinstance(self.plans, int) or self.plans <= 0:
            raise InputError(f"budget must be a positive number of plans, got {self.plans!r}")

    def done(self, state: SearchState) -> bool:
        """True once the budget is spent."""
        return state.evaluated >= self.plans

    def remaining(self, state: SearchState) -> int:
        """Plans left in the budget."""
        return max(self.plans - state.evaluated, 0)


@dataclass(frozen=True, slots=True)
class Stagnation:
    """Stop when `patience` evaluations have passed without a new best plan."""

    patience: int

    def __post_init__(self) -> None:
        if isinstance(self.patience, bool) or not isinstance(self.patience, int) \
                or self.patience <= 0:
            raise InputError(f"patience must be a positive number of plans, "
                             f"got {self.patience!r}")

    def done(self, state: SearchState) -> bool:
        """True after `patience` evaluations without improvement."""
        return state.evaluated - state.last_improvement >= self.patience

    def remaining(self, state: SearchState) -> None:
        """No cap: the criterion is checked between batches."""
        return None


@dataclass(frozen=True)
class AnyOf:
    """Stop as soon as any of the terminations says so."""

    terminations: tuple[Termination, ...]

    def done(self, state: SearchState) -> bool:
        """True if any member is done."""
        return any(t.done(state) for t in self.terminations)

    def remaining(self, state: SearchState) -> int | None:
        """The tightest cap of the members."""
        caps = [c for c in (t.remaining(state) for t in self.terminations) if c is not None]
        return min(caps) if caps else None


def as_termination(budget: int | Termination) -> Termination:
    """A termination from a plan count or a termination object.

    Raises:
        InputError: a count that is not a positive integer.
    """
    if isinstance(budget, Termination) and not isinstance(budget, int):
        return budget
    return PlanBudget(budget)  # type: ignore[arg-type]
