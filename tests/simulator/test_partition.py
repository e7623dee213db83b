"""Partition structure on tiny hand-built graphs: components, the graph of groups, convexity,
`violations` (its fast path agreeing with the full check) and `make_acyclic`."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.partition import (
    components,
    group_index,
    is_acyclic,
    is_convex,
    make_acyclic,
    quotient,
    topological_order,
    violations,
)
from simulator.plan import PartitionPlan, layer_by_layer, plan_of
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import ComputeGraph, OpKind

SHAPE = (1, 4, 8, 8)


def build(name: str, ops: list[tuple[str, list[str]]], outputs: list[str]) -> ComputeGraph:
    """A graph of element-wise ops: (name, inputs) in topological order, from input ``x``."""
    bld = GraphBuilder(name)
    bld.add_input("x", SHAPE)
    for op, inputs in ops:
        kind = OpKind.ELTWISE_BINARY if len(inputs) == 2 else OpKind.ELTWISE_UNARY
        bld.add_op(op, kind, "add" if len(inputs) == 2 else "relu", inputs, SHAPE)
    return bld.build(outputs)


@pytest.fixture
def diamond() -> ComputeGraph:
    """a -> b -> d, a -> c -> d, d -> e: a group {a, d} would be re-entered through b."""
    return build("diamond", [("a", ["x"]), ("b", ["a"]), ("c", ["a"]), ("d", ["b", "c"]),
                             ("e", ["d"])], ["e"])


@pytest.fixture
def residual() -> ComputeGraph:
    """0 -> 1 -> 2 -> 3 -> 4 -> 5 <- 1, 5 -> 6 -> 7 -> 8: a skip from op 1 to the add 5."""
    chain = [("c1", ["x"]), ("r1", ["c1"]), ("c2", ["r1"]), ("r2", ["c2"]), ("c3", ["r2"]),
             ("add", ["c3", "r1"]), ("r3", ["add"]), ("c4", ["r3"]), ("r4", ["c4"])]
    return build("residual", chain, ["r4"])


def test_components_split_a_disconnected_set(diamond):
    assert components(diamond, [0, 4]) == [(0,), (4,)]
    assert components(diamond, [4, 1, 0, 3]) == [(0, 1, 3, 4)]
    assert components(diamond, [1, 2]) == [(1,), (2,)]
    assert components(diamond, []) == []


def test_group_index_and_quotient(diamond):
    groups = [(0, 1), (2,), (3, 4)]
    assert group_index(diamond, groups) == [0, 0, 1, 2, 2]
    assert group_index(6, [(5,)]) == [-1, -1, -1, -1, -1, 0]
    assert quotient(diamond, groups) == {(0, 1), (0, 2), (1, 2)}
    assert quotient(diamond, group_index(diamond, groups)) == {(0, 1), (0, 2), (1, 2)}


def test_topological_order_runs_dependencies_first_then_smallest_op(diamond):
    # group 1 = {b, d, e} has the smaller first op, but it needs group 2 = {c}
    assert topological_order(diamond, [(0,), (1, 3, 4), (2,)]) == [0, 2, 1]
    # among ready groups the one with the smallest op runs first, whatever its number
    assert topological_order(diamond, [(0,), (2,), (1,), (3, 4)]) == [0, 2, 1, 3]


def test_topological_order_leaves_out_groups_on_a_cycle(diamond):
    groups = [(0, 3, 4), (1,), (2,)]  # 0 -> 1 -> 3 leaves group 0 and re-enters it
    assert topological_order(diamond, groups) == []
    assert not is_acyclic(diamond, groups)


def test_convexity(diamond):
    assert is_convex(diamond, [0, 1, 2, 3])
    assert is_convex(diamond, [3, 4])
    assert is_convex(diamond, [1])
    assert not is_convex(diamond, [0, 3])  # 0 -> 1 -> 3 leaves and re-enters
    assert not is_convex(diamond, [0, 1, 3])  # through c


def test_is_acyclic_takes_groups_or_a_group_index(residual):
    bad = [(0, 1, 5), (2, 3, 4), (6,), (7,), (8,)]  # r1 -> c2 .. c3 -> add closes a cycle
    assert not is_acyclic(residual, bad)
    assert not is_acyclic(residual, group_index(residual, bad))
    assert is_acyclic(residual, [(o,) for o in range(len(residual))])
    assert is_acyclic(residual, list(range(len(residual))))


def test_a_cycle_of_groups_is_split_by_level(residual):
    bad = [(0, 1, 5), (2, 3, 4), (6,), (7,), (8,)]
    fixed = make_acyclic(residual, bad)
    assert fixed == [(0, 1), (2, 3, 4), (5,), (6,), (7,), (8,)]
    assert is_acyclic(residual, fixed) and violations(residual, fixed) == []


def test_acyclic_groupings_are_left_alone(residual):
    groups = [(5, 6, 7, 8), (0, 1), (2, 3, 4)]
    assert make_acyclic(residual, groups) == sorted(groups)


def test_valid_plans_have_no_violations(diamond):
    assert violations(diamond, layer_by_layer(diamond)) == []
    assert violations(diamond, PartitionPlan.of([[0, 1, 2, 3, 4]])) == []
    assert violations(diamond, [(0, 1), (2,), (3, 4)], first_only=True) == []


@pytest.mark.parametrize("groups, message", [
    ([[0, 1, 2], [3]], r"^1 op\(s\) in no group: e$"),
    ([[0, 1, 2], [2, 3, 4]], r"^op 'c' is in group 0 and group 1$"),
    ([[0, 1, 2, 3, 4], [7]], r"^group 1 names op 7, which is not in 'diamond'$"),
    ([[0, 4], [1, 2, 3]], r"^group 0 \(a, e\) is not connected$"),
    ([[0, 3, 4], [1], [2]], r"^groups form a cycle: group \d -> group \d( -> group \d)*$"),
])
def test_violations_say_why(diamond, groups, message):
    plan = PartitionPlan.of(groups)
    reasons = violations(diamond, plan)
    assert any(re.search(message, r) for r in reasons), reasons
    assert violations(diamond, plan, first_only=True) == reasons[:1]


def test_coverage_is_reported_before_structure_and_limited(diamond):
    reasons = violations(diamond, [(0, 4), (0, 4)])  # disconnected, but coverage comes first
    assert reasons == ["op 'a' is in group 0 and group 1", "op 'e' is in group 0 and group 1",
                       "3 op(s) in no group: b, c, d"]
    assert violations(diamond, [(0, 4), (0, 4)], limit=2) == reasons[:2]
    long = build("chain", [(f"o{k}", ["x" if k == 0 else f"o{k - 1}"]) for k in range(6)],
                 ["o5"])
    assert violations(long, [(0,)]) == ["5 op(s) in no group: o1, o2, o3, o4, ... (5 ops)"]


def test_plan_of_matches_partition_plan_of(residual):
    groups = [(2, 3), (0, 1), (4, 5, 6, 7, 8)]
    assert plan_of(groups) == PartitionPlan.of(groups)


def _residual() -> ComputeGraph:
    chain = [("c1", ["x"]), ("r1", ["c1"]), ("c2", ["r1"]), ("r2", ["c2"]), ("c3", ["r2"]),
             ("add", ["c3", "r1"]), ("r3", ["add"]), ("c4", ["r3"]), ("r4", ["c4"])]
    return build("residual", chain, ["r4"])


RESIDUAL = _residual()


@st.composite
def groupings(draw, edits: bool = True) -> list[tuple[int, ...]]:
    """Groups of RESIDUAL from any label per op (disconnected and cyclic groups included);
    with `edits`, sometimes an op is dropped or repeated."""
    n = len(RESIDUAL)
    labels = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    groups: dict[int, list[int]] = {}
    for op, label in enumerate(labels):
        groups.setdefault(label, []).append(op)
    grouping = [tuple(g) for g in groups.values()]
    edit = draw(st.sampled_from(["none", "none", "drop", "repeat"])) if edits else "none"
    if edit == "drop" and len(grouping[0]) > 1:
        grouping[0] = grouping[0][1:]
    elif edit == "repeat":
        grouping.append((draw(st.integers(0, n - 1)),))
    return grouping


@settings(max_examples=300, deadline=None)
@given(groupings())
def test_the_fast_check_agrees_with_the_full_one(groups):
    full = violations(RESIDUAL, groups)
    fast = violations(RESIDUAL, groups, first_only=True)
    assert bool(fast) == bool(full)
    assert fast == full[:1]


@settings(max_examples=300, deadline=None)
@given(groupings(edits=False))
def test_make_acyclic_gives_a_partition(groups):
    connected = [c for g in groups for c in components(RESIDUAL, g)]
    fixed = make_acyclic(RESIDUAL, connected)
    assert is_acyclic(RESIDUAL, fixed)
    assert violations(RESIDUAL, fixed) == []
    assert sorted(o for g in fixed for o in g) == list(range(len(RESIDUAL)))
    if is_acyclic(RESIDUAL, connected):
        assert fixed == sorted(connected)
