"""The IR: numbering, immutability, node-set helpers, JSON round trip, builder errors."""

from __future__ import annotations

import dataclasses
import pickle
import random

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import (
    ComputeGraph,
    GraphError,
    MappingType,
    OpFields,
    OpKind,
    input_ref,
)

SHAPE = (1, 4, 8, 8)


def residual_graph() -> ComputeGraph:
    """conv0 -> relu -> conv1 -> add(conv1, conv0) -> pool, declared out of order."""
    b = GraphBuilder("res")
    b.add_input("x", SHAPE)
    b.add_op("add", OpKind.ELTWISE_BINARY, "add", ["conv1", "conv0"], SHAPE)
    b.add_op("conv0", OpKind.CONV, "conv", ["x"], SHAPE, kernel=(3, 3), weight_elems=148,
             macs=9216)
    b.add_op("pool", OpKind.GLOBAL_POOL, "avg", ["add"], (1, 4, 1, 1), kernel=(8, 8))
    b.add_op("relu", OpKind.ELTWISE_UNARY, "relu", ["conv0"], SHAPE)
    b.add_op("conv1", OpKind.CONV, "conv", ["relu"], SHAPE, kernel=(3, 3), weight_elems=148,
             macs=9216)
    return b.build(["pool"])


def test_builder_numbers_ops_topologically_and_keeps_declaration_order_for_ties():
    g = residual_graph()
    assert [op.name for op in g] == ["conv0", "relu", "conv1", "add", "pool"]
    assert all(i < j for i, j in g.edges())
    assert g[3].inputs == (2, 0)
    assert g[0].inputs == (input_ref(0),)


def test_predecessors_successors_and_node_set_helpers():
    g = residual_graph()
    assert g.successors(0) == (1, 3)
    assert g.predecessors(3) == (0, 2)
    assert g.inputs_of({1, 2, 3}) == (0,)
    assert g.inputs_of({0}) == (input_ref(0),)
    assert g.outputs_of({0, 1}) == (0, 1)  # conv0 feeds add outside; relu feeds conv1 outside
    assert g.outputs_of({4}) == (4,)  # a network output leaves every set
    assert g.internal_edges({0, 1, 2, 3}) == [(0, 1), (1, 2), (0, 3), (2, 3)]
    assert g.is_weakly_connected({0, 3})
    assert not g.is_weakly_connected({1, 4})


def test_subgraph_turns_entering_tensors_into_inputs_and_leaving_ones_into_outputs():
    g = residual_graph()
    sg = g.subgraph({1, 2, 3})
    assert [op.name for op in sg] == ["relu", "conv1", "add"]
    assert sg.input_names == ("conv0",)
    assert sg.input_shapes == (SHAPE,)
    assert sg[2].inputs == (1, input_ref(0))
    assert sg.outputs == (2,)


def test_mapping_types_follow_dnnfusion_and_broadcast_is_one_to_many():
    b = GraphBuilder("se")
    b.add_input("x", SHAPE)
    b.add_op("gap", OpKind.GLOBAL_POOL, "avg", ["x"], (1, 4, 1, 1))
    b.add_op("sig", OpKind.ELTWISE_UNARY, "sigmoid", ["gap"], (1, 4, 1, 1))
    b.add_op("mul", OpKind.ELTWISE_BINARY, "mul", ["x", "sig"], SHAPE)
    b.add_op("flat", OpKind.RESHAPE, "flatten", ["mul"], (1, 256))
    g = b.build(["flat"])
    assert [op.mapping for op in g] == [MappingType.MANY_TO_MANY, MappingType.ONE_TO_ONE,
                                        MappingType.ONE_TO_MANY, MappingType.REORGANIZE]


def test_graph_is_immutable():
    g = residual_graph()
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        g[0].macs = 0  # type: ignore[misc]
    with pytest.raises(nx.NetworkXError):
        g.nx.add_node(99)  # the networkx view is frozen


def test_json_round_trip_is_exact():
    g = residual_graph()
    assert ComputeGraph.from_json(g.to_json()) == g
    assert ComputeGraph.from_json(g.to_json(indent=2)).to_dict() == g.to_dict()


def test_equal_graphs_built_twice_compare_once_and_pickle_without_their_caches(monkeypatch):
    """Graphs key the cost models' caches: an equal graph built again (a sweep's next point)
    is equal and hashes alike, its ops are compared once (later comparisons reuse the answer;
    comparing them at every lookup made a second solve of one network 3x slower),
    a graph differing in one op is not equal, and a pickle carries the fields alone (a
    cached string hash is wrong in another process)."""
    g, again = residual_graph(), residual_graph()
    assert g is not again and g == again and hash(g) == hash(again)
    compared = []
    monkeypatch.setattr(ComputeGraph, "_key", property(
        lambda self: compared.append(1) or (self.name, self.ops, self.input_shapes,
                                            self.outputs, self.input_names)))
    third = residual_graph()
    hash(third)
    assert third == g
    assert compared  # the ops compared once
    compared.clear()
    assert g == third and third == g and again == g and g == again
    assert not compared  # every later comparison shares the answer
    monkeypatch.undo()
    other = dataclasses.replace(g, ops=(dataclasses.replace(g[0], macs=g[0].macs + 1),
                                        *g.ops[1:]))
    assert other != g and g != other and g != "res"
    g.predecessors(1)  # fills a cache
    state = pickle.loads(pickle.dumps(g)).__dict__
    assert set(state) == {"name", "ops", "input_shapes", "outputs", "input_names"}
    assert pickle.loads(pickle.dumps(g)) == g


@pytest.mark.parametrize("doc, msg", [
    ("{", "not valid JSON"),
    ('{"format": "other"}', "not a fusion-dse graph"),
    ('{"format": "fusion-dse.graph", "version": 1}', "malformed graph document"),
])
def test_bad_graph_documents_are_refused(doc, msg):
    with pytest.raises(GraphError, match=msg):
        ComputeGraph.from_json(doc)


def test_cycle_is_refused_naming_the_ops_on_it():
    b = GraphBuilder("loop")
    b.add_input("x", SHAPE)
    b.add_op("a", OpKind.ELTWISE_BINARY, "add", ["x", "c"], SHAPE)
    b.add_op("b", OpKind.ELTWISE_UNARY, "relu", ["a"], SHAPE)
    b.add_op("c", OpKind.ELTWISE_UNARY, "relu", ["b"], SHAPE)
    with pytest.raises(GraphError, match=r"cycle: .*a.*b.*c|cycle: .*b.*c.*a|cycle: .*c.*a.*b"):
        b.build(["c"])


def test_dangling_reference_and_duplicate_names_are_refused():
    b = GraphBuilder("bad")
    b.add_input("x", SHAPE)
    b.add_op("a", OpKind.ELTWISE_UNARY, "relu", ["nowhere"], SHAPE)
    with pytest.raises(GraphError, match="'nowhere'"):
        b.build(["a"])
    with pytest.raises(GraphError, match="duplicate"):
        b.add_op("a", OpKind.ELTWISE_UNARY, "relu", ["x"], SHAPE)


def test_direct_construction_checks_numbering_and_shapes():
    g = residual_graph()
    backwards = dataclasses.replace(g[1], inputs=(2,), input_shapes=(SHAPE,))
    with pytest.raises(GraphError, match="lower to a higher id"):
        dataclasses.replace(g, ops=(g[0], backwards, *g.ops[2:]))
    wrong = dataclasses.replace(g[1], input_shapes=((1, 2, 3, 4),))
    with pytest.raises(GraphError, match="does not match"):
        dataclasses.replace(g, ops=(g[0], wrong, *g.ops[2:]))


@st.composite
def random_dags(draw):
    n = draw(st.integers(2, 30))
    edges = {(i, j) for j in range(1, n) for i in
             draw(st.sets(st.integers(0, j - 1), min_size=1, max_size=min(3, j)))}
    order = draw(st.permutations(range(n)))
    return n, edges, order


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_any_declaration_order_yields_topological_numbering(dag):
    n, edges, order = dag
    b = GraphBuilder("random")
    b.add_input("x", SHAPE)
    for k in order:
        preds = sorted(i for i, j in edges if j == k) or None
        inputs = [f"op{i}" for i in preds] if preds else ["x"]
        kind = OpKind.ELTWISE_BINARY if len(inputs) > 1 else OpKind.ELTWISE_UNARY
        b.add_op(f"op{k}", kind, "add", inputs, SHAPE)
    g = b.build([f"op{n - 1}"])
    assert len(g) == n
    assert all(i < j for i, j in g.edges())
    renamed = {(g.id_of(f"op{i}"), g.id_of(f"op{j}")) for i, j in edges}
    assert renamed == set(g.edges())
    assert ComputeGraph.from_json(g.to_json()) == g
    nodes = random.Random(n).sample(range(n), k=max(1, n // 2))
    sub = g.subgraph(nodes)
    assert len(sub) == len(nodes)
    assert all(i < j for i, j in sub.edges())


def test_the_builder_hands_every_shared_field_to_the_op_and_ops_pickle():
    given_fields = {"kernel": (3, 1), "stride": (2, 1), "padding": (1, 0, 1, 0),
                    "dilation": (1, 2), "groups": 2, "weight_elems": 20, "macs": 640,
                    "attrs": (("mode", "x"),)}
    assert set(given_fields) == {f.name for f in dataclasses.fields(OpFields)}
    b = GraphBuilder("fields")
    b.add_input("x", SHAPE)
    b.add_op("conv", OpKind.CONV, "conv", ["x"], (1, 4, 4, 8), attrs={"mode": "x"},
             mapping=MappingType.MANY_TO_MANY,
             **{k: v for k, v in given_fields.items() if k != "attrs"})
    op = b.build(["conv"])[0]
    assert {k: getattr(op, k) for k in given_fields} == given_fields
    assert op.mapping is MappingType.MANY_TO_MANY and op.input_shapes == (SHAPE,)
    assert pickle.loads(pickle.dumps(op)) == op
