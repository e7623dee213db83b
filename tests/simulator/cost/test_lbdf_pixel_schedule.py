"""The one-pass pixel schedule of LBDF (`simulator.cost.lbdf._PixelSchedule`): what its shortcuts
take for granted holds, so F_beta is the same as evaluating every rule in full.

The schedule reuses its input's key, pace, step, phase and order arrays for an op that reads one
input row for row and column for column, skips the running maximum of the phases of an op of
several inputs, shares the arrays of the tensors entering a group between groups (cached per
graph, never written), and computes the steps of rows released together in closed form. The
brute-force pixel simulation of `test_lbdf_pixel.py` checks the rule itself;
`benchmarks/lbdf_pixel_speed.py --check` checks F_beta and F_D of thousands of zoo groups
against a recorded run.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost.lbdf import (
    _column_deps,
    _ColumnDeps,
    _PixelSchedule,
    _wavefront_steps,
    line_buffer_elems,
    row_order,
)
from simulator.cost.rows import RowDeps, row_deps
from simulator.partition import components
from tests.simulator.cost.test_lbdf_pixel import GRAPHS, small_groups


@settings(max_examples=120, deadline=None)
@given(small_groups())
def test_phases_rise_and_paces_and_orders_cover_their_own_fractions(case):
    # phases and keys never fall along a tensor's row (the maximum of several inputs' phases
    # needs no running maximum), orders never fall within a run of one phase, and an op's
    # paces and orders are at least its own rows' and columns' fractions (a one-to-one reader
    # inherits them unchanged)
    graph, ops = case
    px = _PixelSchedule(graph, ops, row_deps(graph))
    n_in, frac, own = len(px.entering), row_deps(graph).frac, _column_deps(graph).own
    for t, ref in enumerate(px.refs):
        x, p = px.phase[t], px.order[t]
        assert (np.diff(x) >= 0).all() and (np.diff(px.keys[t]) >= 0).all()
        assert (p[1:][x[1:] == x[:-1]] >= p[:-1][x[1:] == x[:-1]]).all()
        assert ((0 <= p) & (p < 1)).all() and ((0 <= px.paces[t]) & (px.paces[t] < 1)).all()
        if t >= n_in:
            assert (px.paces[t] >= frac[ref]).all() and (p >= own[ref]).all()


def _sub_groups(graph) -> list[tuple[int, ...]]:
    n = len(graph)
    return [tuple(sorted(c)) for i in range(n) for j in range(i + 1, n + 1)
            for c in components(graph, range(i, j))]


def _arrays(tables) -> list[np.ndarray]:
    """Every array of the per-graph tables the pixel schedule reads."""
    if isinstance(tables, RowDeps):
        return [*tables.frac.values(), *(a for los in tables.lo for a in los),
                *(a for his in tables.hi for a in his)]
    out = [a for entering in tables._entering.values() for a in entering]
    for slots, frac, own, _, _ in tables.info:
        out += [frac, own, *(a for slot in slots for a in slot if isinstance(a, np.ndarray))]
    return out


def test_a_group_costs_the_same_whatever_was_costed_before():
    # the per-graph tables and the rows of entering tensors are shared between groups (and
    # never written): costing every sub-group in one order, in the reverse order, or each with
    # fresh tables agrees
    for graph in GRAPHS.values():
        groups = _sub_groups(graph)
        _column_deps.cache_clear()
        first = [(line_buffer_elems(graph, g), row_order(graph, g, "pixel")) for g in groups]
        cols, fresh = _column_deps(graph), _ColumnDeps(graph)
        for key in cols._entering:
            fresh.entering(*key)
        for used, new in ((cols, fresh), (row_deps(graph), RowDeps(graph))):
            for a, b in zip(_arrays(used), _arrays(new), strict=True):
                assert np.array_equal(a, b)
        _column_deps.cache_clear()
        last = [(line_buffer_elems(graph, g), row_order(graph, g, "pixel"))
                for g in reversed(groups)][::-1]
        for g, (elems, order), (elems2, order2) in zip(groups, first, last, strict=True):
            _column_deps.cache_clear()
            assert elems == elems2 == line_buffer_elems(graph, g)
            for field in ("tensor", "row", "block", "levels"):
                a, b = getattr(order, field), getattr(order2, field)
                assert (a is None and b is None) or np.array_equal(a, b)


def _steps_by_definition(key: np.ndarray, floor: np.ndarray) -> list[int]:
    step: list[int] = []
    for r, (k, f) in enumerate(zip(key.tolist(), floor.tolist(), strict=True)):
        step.append(max(f, step[-1] + 1) if r and key[r - 1] == k else f)
    return step


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=40),
       st.booleans())
def test_rows_released_together_follow_one_another(rows, one_key):
    # a row sharing its key with the previous row comes one step after it, at least: the
    # closed forms (one key throughout, many repeats) agree with the definition
    key = np.array([0.0 if one_key else float(k) for k, _ in rows])
    key = np.sort(key)
    floor = np.array([f for _, f in rows], dtype=np.int64)
    assert _wavefront_steps(key, floor).tolist() == _steps_by_definition(key, floor)
