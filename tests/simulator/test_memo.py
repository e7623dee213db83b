"""`Memo`: computed once per key, lookups counted."""

from __future__ import annotations

import pytest

from simulator.memo import Memo


def test_a_value_is_computed_once_and_lookups_are_counted():
    calls: list[int] = []
    memo: Memo[int, int] = Memo()

    def square(k: int) -> int:
        calls.append(k)
        return k * k

    assert [memo.get(k, square) for k in (3, 3, 4, 3)] == [9, 9, 16, 9]
    assert calls == [3, 4] and (memo.hits, memo.misses) == (2, 2)
    assert memo.hit_rate == 0.5 and len(memo) == 2 and 4 in memo and 5 not in memo


def test_falsy_values_are_remembered_too():
    memo: Memo[str, int] = Memo()
    assert memo.get("a", lambda _: 0) == 0 and memo.get("a", lambda _: 1) == 0
    assert (memo.hits, memo.misses) == (1, 1)


def test_a_failed_computation_is_not_remembered():
    memo: Memo[str, int] = Memo()

    def fail(_: str) -> int:
        raise ValueError("no")

    for _ in range(2):
        with pytest.raises(ValueError, match="no"):
            memo.get("a", fail)
    assert "a" not in memo and memo.misses == 2 and Memo().hit_rate == 0.0
