"""Pareto dominance for minimised objectives: ranks and the archive of non-dominated plans.

Deb et al., "A fast and elitist multiobjective genetic algorithm: NSGA-II", IEEE TEVC 6(2),
2002: a point dominates another when it is no worse in every objective and better in one; the
rank of a point is the index of the non-dominated front it belongs to (0 = the Pareto front).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["ArchiveEntry", "ParetoArchive", "dominates", "pareto_ranks"]

T = TypeVar("T")


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """True if `a` is no worse than `b` everywhere and better somewhere (minimisation)."""
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(
        x < y for x, y in zip(a, b, strict=True))


def pareto_ranks(points: Sequence[Sequence[float]]) -> list[int]:
    """Non-dominated sorting rank of each point (0 for the Pareto front); O(n^2) per front."""
    ranks = [-1] * len(points)
    left = list(range(len(points)))
    rank = 0
    while left:
        front = [i for i in left if not any(dominates(points[j], points[i]) for j in left)]
        for i in front:
            ranks[i] = rank
        left = [i for i in left if ranks[i] < 0]
        rank += 1
    return ranks


@dataclass(frozen=True, slots=True)
class ArchiveEntry(Generic[T]):
    """A non-dominated point: its objective values, evaluation index and item (a plan)."""

    values: tuple[float, ...]
    evaluation: int
    item: T


class ParetoArchive(Generic[T]):
    """The non-dominated points seen so far; among equal points the earliest is kept."""

    def __init__(self) -> None:
        self._entries: list[ArchiveEntry[T]] = []

    def add(self, values: Sequence[float], evaluation: int, item: T) -> bool:
        """Offer a point; True if it entered the archive."""
        v = tuple(values)
        if any(e.values == v or dominates(e.values, v) for e in self._entries):
            return False
        self._entries = [e for e in self._entries if not dominates(v, e.values)]
        self._entries.append(ArchiveEntry(v, evaluation, item))
        return True

    @property
    def entries(self) -> list[ArchiveEntry[T]]:
        """The archive sorted by objective values."""
        return sorted(self._entries, key=lambda e: (e.values, e.evaluation))

    def __len__(self) -> int:
        return len(self._entries)
