"""Solution edge sets (§III-C) on hand-built residual and squeeze-and-excitation groups."""

from __future__ import annotations

from explain.solutions import solutions, solutions_for_edge, split_at
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import OpKind

MAP = (1, 4, 8, 8)


def residual():
    """0 conv -> 1 relu -> 2 conv -> 3 add(2, 0) -> 4 conv; 0 -> 3 is the skip."""
    b = GraphBuilder("res")
    b.add_input("x", MAP)
    b.add_op("c0", OpKind.CONV, "conv", ["x"], MAP, kernel=(3, 3))
    b.add_op("r", OpKind.ELTWISE_UNARY, "relu", ["c0"], MAP)
    b.add_op("c1", OpKind.CONV, "conv", ["r"], MAP, kernel=(3, 3))
    b.add_op("add", OpKind.ELTWISE_BINARY, "add", ["c1", "c0"], MAP)
    b.add_op("c2", OpKind.CONV, "conv", ["add"], MAP)
    return b.build(["c2"])


def se_in_residual():
    """0 expand -> 1 dw -> 2 gap -> 3 fc1 -> 4 fc2 -> 5 mul(1, 4) -> 6 proj -> 7 add(6, 0)."""
    b = GraphBuilder("se")
    b.add_input("x", MAP)
    vec = (1, 4, 1, 1)
    b.add_op("expand", OpKind.CONV, "conv", ["x"], MAP)
    b.add_op("dw", OpKind.DWCONV, "conv", ["expand"], MAP, kernel=(3, 3), groups=4)
    b.add_op("gap", OpKind.GLOBAL_POOL, "avg", ["dw"], vec, kernel=(8, 8))
    b.add_op("fc1", OpKind.CONV, "conv", ["gap"], vec)
    b.add_op("fc2", OpKind.CONV, "conv", ["fc1"], vec)
    b.add_op("mul", OpKind.ELTWISE_BINARY, "mul", ["dw", "fc2"], MAP)
    b.add_op("proj", OpKind.CONV, "conv", ["mul"], MAP)
    b.add_op("add", OpKind.ELTWISE_BINARY, "add", ["proj", "expand"], MAP)
    return b.build(["add"])


def edge_sets(found):
    return [set(s.edges) for s in found]


def test_a_plain_edge_inside_a_skip_also_cuts_the_skip():
    g = residual()
    found = solutions_for_edge(g, range(5), (1, 2))  # relu -> conv, under the 0 -> 3 skip
    assert edge_sets(found) == [{(1, 2), (0, 3)}]
    assert found[0].first == ((0, 1),) and found[0].second == ((2, 3, 4),)


def test_an_explained_skip_gives_one_solution_per_branch_edge():
    g = residual()
    found = solutions_for_edge(g, range(5), (0, 3))
    assert edge_sets(found) == [{(0, 1), (0, 3)}, {(1, 2), (0, 3)}, {(2, 3), (0, 3)}]


def test_an_edge_outside_every_skip_is_cut_alone():
    g = residual()
    assert edge_sets(solutions_for_edge(g, range(5), (3, 4))) == [{(3, 4)}]
    assert solutions_for_edge(g, range(5), (0, 2)) == []  # not an edge of the group
    assert solutions_for_edge(g, (0, 1, 2), (2, 3)) == []  # 3 is outside the group


def test_nested_skips_squeeze_excitation_inside_a_residual():
    g = se_in_residual()
    ops = range(8)
    # the SE branch edge fc1 -> fc2 lies under the SE skip (dw -> mul) and the residual skip
    assert edge_sets(solutions_for_edge(g, ops, (3, 4))) == [{(3, 4), (1, 5), (0, 7)}]
    # explaining the SE skip: one solution per edge of the pooled branch, all with the
    # residual skip
    found = solutions_for_edge(g, ops, (1, 5))
    assert edge_sets(found) == [{(1, 2), (1, 5), (0, 7)}, {(2, 3), (1, 5), (0, 7)},
                                {(3, 4), (1, 5), (0, 7)}, {(4, 5), (1, 5), (0, 7)}]
    for s in found:  # every cut separates the group into two acyclic sides
        assert {o for grp in s.groups for o in grp} == set(ops)
        assert all(u in {o for grp in s.first for o in grp} for u, _ in s.edges)


def test_overlapping_solutions_of_several_edges_are_deduplicated_in_rank_order():
    g = residual()
    found = solutions(g, range(5), [(1, 2), (0, 3), (3, 4)])
    assert edge_sets(found) == [{(1, 2), (0, 3)}, {(0, 1), (0, 3)}, {(2, 3), (0, 3)},
                                {(3, 4)}]


def test_a_cut_through_a_branch_leaves_disconnected_pieces():
    g = se_in_residual()
    s = split_at(g, [1, 2, 3, 4, 5], 2)  # dw, gap | fc1, fc2, mul: mul still reads dw
    assert s.first == ((1, 2),) and s.second == ((3, 4, 5),)
    s = split_at(g, [2, 3, 5, 6], 3)  # gap, fc1 | mul, proj
    assert s.first == ((2, 3),) and s.second == ((5, 6),) and s.edges == frozenset()
