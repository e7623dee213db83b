"""Concat/slice elimination and identity ops, each case checked by the executor."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.substitution.base import RuleContext
from search.substitution.rules.eliminate import ConcatOfSlices, Identity, SliceOfConcat

CTX = RuleContext()


def _names(graph):
    return [op.name for op in graph.ops]


def test_concat_of_slices_covering_the_tensor_is_the_tensor(net, check):
    n = net()
    c = n.conv("c", "x", 6)
    cat = n.concat("cat", [n.slice("s0", c, 0, 2), n.slice("s1", c, 2, 5),
                           n.slice("s2", c, 5, 6)])
    g = n.build(n.act("r", cat))
    assert [m.arg("case") for m in ConcatOfSlices().find(g, CTX)] == ["whole"]
    assert _names(check(g, ConcatOfSlices())) == ["c", "r"]


def test_slices_read_elsewhere_stay_and_the_concat_reads_the_tensor(net, check):
    n = net()
    c = n.conv("c", "x", 6)
    s0 = n.slice("s0", c, 0, 3)
    cat = n.concat("cat", [s0, n.slice("s1", c, 3, 6), "x"])
    n.act("r", s0)
    new = check(n.build(cat, "r"), ConcatOfSlices())
    assert _names(new) == ["c", "s0", "cat", "r"]
    assert new.ops[new.id_of("cat")].inputs[0] == new.id_of("c")


def test_adjacent_slices_of_part_of_a_tensor_become_one_slice(net, check):
    n = net()
    c = n.conv("c", "x", 8)
    cat = n.concat("cat", [n.slice("s0", c, 1, 3), n.slice("s1", c, 3, 6), "x"])
    new = check(n.build(cat), ConcatOfSlices())
    assert _names(new) == ["c", "s0+s1", "cat"]
    s = new.ops[1]
    assert (s.attr("start"), s.attr("end"), s.output_shape[1]) == (1, 6, 5)


def test_slices_out_of_order_or_along_another_axis_are_not_joined(net):
    n = net()
    c = n.conv("c", "x", 6)
    n.concat("cat", [n.slice("s1", c, 3, 6), n.slice("s0", c, 0, 3)])
    assert ConcatOfSlices().find(n.build("cat"), CTX) == []
    n = net()
    c = n.conv("c", "x", 6)
    n.concat("cat", [n.slice("s0", c, 0, 5, axis=2), n.slice("s1", c, 5, 10, axis=2)])
    assert ConcatOfSlices().find(n.build("cat"), CTX) == []


def test_negative_slice_bounds_are_normalised(net, check):
    n = net()
    c = n.conv("c", "x", 6)
    cat = n.concat("cat", [n.slice("s0", c, 0, -2), n.slice("s1", c, -2, 100)])
    assert _names(check(n.build(n.act("r", cat)), ConcatOfSlices())) == ["c", "r"]


def test_a_concat_joining_an_output_back_into_itself_stays(net):
    n = net()
    c = n.conv("c", "x", 6)
    n.concat("cat", [n.slice("s0", c, 0, 3), n.slice("s1", c, 3, 6)])
    assert ConcatOfSlices().find(n.build("cat", "c"), CTX) == []


@pytest.mark.parametrize("k", [0, 1, 2])
def test_slice_of_a_concat_selecting_one_input_is_that_input(net, check, k):
    n = net()
    parts = [n.conv("a", "x", 2), n.conv("b", "x", 3), n.conv("c", "x", 4)]
    cat = n.concat("cat", parts)
    bounds = [(0, 2), (2, 5), (5, 9)][k]
    n.act("r", n.slice("s", cat, *bounds))
    new = check(n.build("r"), SliceOfConcat())
    assert "s" not in _names(new) and "cat" not in _names(new)
    assert new.ops[new.id_of("r")].inputs == (new.id_of(parts[k]),)


def test_slice_of_a_concat_read_elsewhere_keeps_the_concat(net, check):
    n = net()
    cat = n.concat("cat", [n.conv("a", "x", 2), n.conv("b", "x", 3)])
    n.act("r", n.slice("s", cat, 2, 5))
    new = check(n.build("r", cat), SliceOfConcat())
    assert _names(new) == ["a", "b", "cat", "r"]


def test_slice_spanning_two_inputs_stays(net):
    n = net()
    cat = n.concat("cat", [n.conv("a", "x", 2), n.conv("b", "x", 3)])
    n.slice("s", cat, 1, 4)
    assert SliceOfConcat().find(n.build("s"), CTX) == []


@pytest.mark.parametrize("case", ["concat", "reshape", "slice", "transpose", "pad"])
def test_identity_ops_are_removed(net, check, case):
    n = net((1, 4, 6, 6))
    c = n.conv("c", "x", 4)
    op = {"concat": lambda: n.concat("i", [c]), "reshape": lambda: n.reshape("i", c, (1, 4, 6, 6)),
          "slice": lambda: n.slice("i", c, 0, 4), "transpose": lambda: n.permute("i", c,
                                                                                 (0, 1, 2, 3)),
          "pad": lambda: n.pad("i", c, (0, 0, 0, 0))}[case]()
    g = n.build(n.act("r", op))
    assert [m.arg("case") for m in Identity().find(g, CTX)] == [case]
    assert _names(check(g, Identity())) == ["c", "r"]


def test_identity_that_is_an_output_reading_an_output_or_the_input_stays(net):
    n = net((1, 4, 6, 6))
    n.reshape("i", "x", (1, 4, 6, 6))
    assert Identity().find(n.build("i"), CTX) == []
    n = net((1, 4, 6, 6))
    c = n.conv("c", "x", 4)
    n.reshape("i", c, (1, 4, 6, 6))
    assert Identity().find(n.build("i", "c"), CTX) == []


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(1, 7), min_size=1, max_size=4, unique=True),
       extra=st.booleans(), seed=st.integers(0, 3))
def test_random_splits_rejoined_vanish(net, check_all, cuts, extra, seed):
    n = net()
    c = n.conv("c", "x", 8)
    bounds = [0, *sorted(cuts), 8]
    pairs = zip(bounds[:-1], bounds[1:], strict=True)
    slices = [n.slice(f"s{k}", c, lo, hi) for k, (lo, hi) in enumerate(pairs)]
    cat = n.concat("cat", [*slices, "x"] if extra else slices)
    final = check_all(n.build(n.act("r", cat)), [Identity(), ConcatOfSlices(), SliceOfConcat()],
                      seed)
    assert not any(op.name.startswith("s") for op in final.ops)
