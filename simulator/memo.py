"""`Memo`: values computed once per key, with the count of lookups answered from it.

The one home of memoisation with hit counts: the group costs of `simulator.cost.CostCache`,
the plan scores of `search.problem.SearchContext` and the splits of `search.repair.Repairer`
are `Memo` objects, and the cache hit rates a search reports are read from them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Memo"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING = object()


class Memo(Generic[K, V]):
    """A mapping from keys to values computed on their first lookup.

    Attributes:
        hits, misses: Lookups answered from the memo / computed and added to it.
    """

    __slots__ = ("_values", "hits", "misses")

    def __init__(self) -> None:
        self._values: dict[K, V] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: K, compute: Callable[[K], V]) -> V:
        """The value of `key`: ``compute(key)`` on the first lookup, remembered after."""
        value = self._values.get(key, _MISSING)
        if value is not _MISSING:
            self.hits += 1
            return value  # type: ignore[return-value]
        self.misses += 1
        value = self._values[key] = compute(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    @property
    def hit_rate(self) -> float:
        """Fraction of lookups answered from the memo (0 without lookups)."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0
