"""What the compiled LBDF schedule (`simulator.cost._lbdf_kernels`) takes for granted holds, so
F_beta is the same as evaluating every rule of docs/cost-model.md 4.1 in full.

The kernels reuse an input's keys, paces, steps, phases and orders for an op that reads one
input row for row and column for column, take no running maximum of the phases of an op of
several inputs, merge the rows of the tensors as runs already in order, and find a reader's
columns among its input's by searches that go on from the previous column's (binary searches
over columns laid end to end). All of that holds when keys and phases never fall along a
tensor's rows and columns, orders never fall within a run of one phase, and an op's paces and
orders are at least its own rows' and columns' fractions: checked here on the schedule's
arrays as the numpy reference computes them (`lbdf_reference.py`, which the compiled path
equals, `test_lbdf_fast.py`). The brute-force pixel simulation of `test_lbdf_pixel.py` checks
the rule itself; `benchmarks/lbdf_pixel_speed.py --check` checks F_beta and F_D of thousands of
zoo groups against a recorded run.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost._lbdf_kernels import wavefront_steps
from simulator.cost.rows import row_deps
from tests.simulator.cost.lbdf_reference import _column_deps, _PixelSchedule
from tests.simulator.cost.test_lbdf_fast import zoo_groups
from tests.simulator.cost.test_lbdf_pixel import small_groups


def _check_invariants(graph, ops) -> None:
    px = _PixelSchedule(graph, ops, row_deps(graph))
    n_in, frac, own = len(px.entering), row_deps(graph).frac, _column_deps(graph).own
    for t, ref in enumerate(px.refs):
        x, p = px.phase[t], px.order[t]
        assert (np.diff(x) >= 0).all() and (np.diff(px.keys[t]) >= 0).all()
        assert (p[1:][x[1:] == x[:-1]] >= p[:-1][x[1:] == x[:-1]]).all()
        assert ((0 <= p) & (p < 1)).all() and ((0 <= px.paces[t]) & (px.paces[t] < 1)).all()
        same = px.keys[t][1:] == px.keys[t][:-1]  # rows in (key, pace) order: one run each
        assert (px.paces[t][1:][same] >= px.paces[t][:-1][same]).all()
        assert (np.diff(px.row_block[px.offs[t]:px.offs[t + 1]]) >= 0).all()
        if t >= n_in:
            assert (px.paces[t] >= frac[ref]).all() and (p >= own[ref]).all()


@settings(max_examples=120, deadline=None)
@given(small_groups())
def test_phases_rise_and_paces_and_orders_cover_their_own_fractions(case):
    # phases and keys never fall along a tensor's row (the maximum of several inputs' phases
    # needs no running maximum), orders never fall within a run of one phase, and an op's
    # paces and orders are at least its own rows' and columns' fractions (a one-to-one reader
    # inherits them unchanged); each tensor's rows are in schedule order, blocks rising
    _check_invariants(*case)


@settings(max_examples=60, deadline=None)
@given(zoo_groups())
def test_the_invariants_hold_on_zoo_groups(case):
    _check_invariants(*case)


def _steps_by_definition(key: np.ndarray, floor: np.ndarray) -> list[int]:
    step: list[int] = []
    for r, (k, f) in enumerate(zip(key.tolist(), floor.tolist(), strict=True)):
        step.append(max(f, step[-1] + 1) if r and key[r - 1] == k else f)
    return step


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=40),
       st.booleans())
def test_rows_released_together_follow_one_another(rows, one_key):
    # a row sharing its key with the previous row comes one step after it, at least
    key = np.sort(np.array([0.0 if one_key else float(k) for k, _ in rows]))
    floor = np.array([f for _, f in rows], dtype=np.int64)
    step = floor.copy()
    wavefront_steps(key, step, 0, len(step))
    assert step.tolist() == _steps_by_definition(key, floor)
