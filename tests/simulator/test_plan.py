"""Partition plans: segment plans and the plan JSON format (structure: test_partition.py)."""

from __future__ import annotations

import json

import pytest

from simulator.partition import violations
from simulator.plan import (
    PartitionPlan,
    PlanError,
    load_plan,
    segment_plan,
)
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import OpKind

SHAPE = (1, 4, 8, 8)


@pytest.fixture
def diamond():
    """a -> b -> d, a -> c -> d, d -> e: a group {a, d} would be re-entered through b."""
    bld = GraphBuilder("diamond")
    bld.add_input("x", SHAPE)
    bld.add_op("a", OpKind.CONV, "conv", ["x"], SHAPE)
    bld.add_op("b", OpKind.ELTWISE_UNARY, "relu", ["a"], SHAPE)
    bld.add_op("c", OpKind.ELTWISE_UNARY, "relu", ["a"], SHAPE)
    bld.add_op("d", OpKind.ELTWISE_BINARY, "add", ["b", "c"], SHAPE)
    bld.add_op("e", OpKind.CONV, "conv", ["d"], SHAPE)
    return bld.build(["e"])


def test_segment_plans_split_segments_into_components(diamond):
    plan = segment_plan(diamond, [2, 4])
    assert [g.ops for g in plan] == [(0, 1), (2, 3), (4,)]
    assert violations(diamond, plan) == []
    assert [g.ops for g in segment_plan(diamond, [1, 3])] == [(0,), (1,), (2,), (3, 4)]


def test_plan_json_round_trip_by_names_and_ids(diamond, tmp_path):
    plan = PartitionPlan.of([[0, 1, 2, 3], [4]])
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.to_dict(diamond, extra=[{"F_D": 1}, {"F_D": 2}])))
    assert load_plan(path, diamond) == plan
    path.write_text(json.dumps({"groups": [[0, 1, 2, 3], [4]]}))
    assert load_plan(path, diamond) == plan
    path.write_text(json.dumps([["a", "b", "c", "d"], ["e"]]))
    assert load_plan(path, diamond) == plan


@pytest.mark.parametrize("content, message", [
    ("{", "not valid JSON"),
    ('{"groups": 3}', "expected a list of groups"),
    ('{"groups": [["a", "zz"]]}', "group 0 names unknown op 'zz'"),
    ('{"groups": [[0, 99]]}', "names op id 99"),
    ('{"groups": [[]]}', "group 0 is not a non-empty list"),
    ('{"groups": [["a", "a"]]}', "lists an op twice"),
    ('{"groups": [[1.5]]}', "not an op name or id"),
])
def test_bad_plan_documents_are_refused(diamond, tmp_path, content, message):
    path = tmp_path / "plan.json"
    path.write_text(content)
    with pytest.raises(PlanError, match=message):
        load_plan(path, diamond)


def test_missing_plan_file(diamond, tmp_path):
    with pytest.raises(PlanError, match="cannot read plan file"):
        load_plan(tmp_path / "none.json", diamond)
