"""DNNFusion §4.2 algebraic rewrites, each case checked by the executor."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.substitution.base import RuleContext
from search.substitution.rules.algebraic import (
    AffineChain,
    IdempotentActivation,
    IdentityArithmetic,
    ReshapeChain,
    TransposeChain,
    absorbs,
)
from simulator.workload.graph import OpKind

CTX = RuleContext()


def _names(graph):
    return [op.name for op in graph.ops]


# --- affine chains -----------------------------------------------------------------------------


@pytest.mark.parametrize("first,second,case,kind", [
    (("mul", "right", None), ("div", "right", None), "scale", "mul"),
    (("mul", "left", 2.0), ("mul", "right", None), "scale", "mul"),
    (("add", "right", None), ("sub", "right", 0.5), "shift", "add"),
    (("mul", "right", None), ("add", "right", None), "affine", "batchnorm"),
    (("sub", "left", None), ("mul", "right", 3.0), "affine", "batchnorm"),
])
def test_two_constant_ops_become_one(net, check, first, second, case, kind):
    n = net()
    a = n.const("a", n.conv("c", "x", 4), first[0], side=first[1], scalar=first[2])
    n.act("r", n.const("b", a, second[0], side=second[1], scalar=second[2]))
    g = n.build("r")
    rule = AffineChain()
    assert [m.arg("case") for m in rule.find(g, CTX)] == [case]
    new = check(g, rule)
    assert _names(new) == ["c", "a", "r"]
    assert new.ops[1].op_type == kind
    if kind == "batchnorm":
        assert new.ops[1].kind is OpKind.BATCHNORM and new.ops[1].weight_elems == 8
        assert new.ops[1].macs == math.prod(new.ops[1].output_shape)


def test_two_scalar_scales_multiply_in_the_graph(net, check):
    n = net()
    n.const("b", n.const("a", "x", "mul", scalar=2.0), "div", scalar=4.0)
    new = check(n.build("b"), AffineChain())
    assert new.ops[0].attr("scalar") == 0.5 and new.ops[0].weight_elems == 0


def test_batchnorms_and_full_shape_constants(net, check):
    n = net()
    n.bn("b2", n.bn("b1", "x"))
    assert _names(check(n.build("b2"), AffineChain())) == ["b1"]
    n = net()
    n.const("b", n.const("a", "x", "mul", shape=(1, 8, 10, 10)), "mul", shape=(1, 8, 1, 1))
    new = check(n.build("b"), AffineChain())
    assert new.ops[0].weight_elems == 800 and new.ops[0].attr("const_shape") == (1, 8, 10, 10)
    n = net()
    n.const("b", n.const("a", "x", "mul", shape=(1, 1, 10, 10)), "add", shape=(1, 8, 1, 1))
    assert AffineChain().find(n.build("b"), CTX) == []


def test_affine_chain_keeps_the_second_epilogue_and_needs_the_first_alone(net, check):
    n = net()
    a = n.const("a", "x", "mul")
    n.b.add_op("b", OpKind.BATCHNORM, "batchnorm", [a], n.shape(a), weight_elems=16,
               macs=800, attrs={"epilogue": ("relu",)})
    new = check(n.build("b"), AffineChain())
    assert _names(new) == ["a"] and new.ops[0].op_type == "batchnorm"
    assert new.ops[0].attr("epilogue") == ("relu",)
    n = net()
    a = n.const("a", "x", "mul")
    n.bn("b", a)
    assert AffineChain().find(n.build("b", "a"), CTX) == []


# --- identities, idempotent activations ----------------------------------------------------------


@pytest.mark.parametrize("op_type,side,value", [("mul", "right", 1.0), ("mul", "left", 1.0),
                                                ("div", "right", 1.0), ("add", "left", 0.0),
                                                ("add", "right", 0.0), ("sub", "right", 0.0),
                                                ("pow", "right", 1.0)])
def test_neutral_constants_are_removed(net, check, op_type, side, value):
    n = net()
    n.act("r", n.const("k", n.conv("c", "x", 4), op_type, side=side, scalar=value))
    assert _names(check(n.build("r"), IdentityArithmetic())) == ["c", "r"]


def test_non_neutral_constants_and_x_minus_nothing_on_the_left_stay(net):
    n = net()
    n.const("k2", n.const("k1", n.conv("c", "x", 4), "sub", side="left", scalar=0.0), "mul",
            scalar=2.0)
    assert IdentityArithmetic().find(n.build("k2"), CTX) == []


def test_identity_on_a_network_input_that_is_the_output_stays(net):
    n = net()
    n.const("k", "x", "mul", scalar=1.0)
    assert IdentityArithmetic().find(n.build("k"), CTX) == []


@pytest.mark.parametrize("first,second,case,kept", [
    ("relu", "relu", "drop-second", "a"),
    ("relu6", "relu", "drop-second", "a"),
    ("sigmoid", "relu", "drop-second", "a"),
    ("relu", "relu6", "drop-first", "b"),
    ("abs", "abs", "drop-second", "a"),
])
def test_absorbed_activation_is_removed(net, check, first, second, case, kept):
    n = net()
    n.conv("d", n.act("b", n.act("a", n.conv("c", "x", 4), first), second), 4)
    g = n.build("d")
    rule = IdempotentActivation()
    assert [m.arg("case") for m in rule.find(g, CTX)] == [case]
    assert _names(check(g, rule)) == ["c", kept, "d"]


def test_clamp_absorption_follows_ranges():
    assert absorbs("hardtanh(max_val=1.0,min_val=0.0)", "relu6") == "second"
    assert absorbs("relu6", "hardtanh(max_val=1.0,min_val=0.0)") == "first"
    assert absorbs("hardtanh(max_val=1.0,min_val=-1.0)", "relu") is None
    assert absorbs("tanh", "relu") is None
    assert absorbs("tanh", "hardtanh") == "second"
    assert absorbs("silu", "relu") is None


def test_drop_first_needs_the_first_read_by_the_second_alone(net):
    n = net()
    a = n.act("a", "x", "relu")
    n.binary("s", n.act("b", a, "relu6"), a)
    assert IdempotentActivation().find(n.build("s"), CTX) == []


# --- reshapes, transposes -------------------------------------------------------------------------


def test_reshape_chain_becomes_one_reshape(net, check):
    n = net((2, 4, 3, 5))
    n.linear("fc", n.reshape("r2", n.reshape("r1", "x", (2, 60), "flatten"), (2, 12, 5)), 3)
    new = check(n.build("fc"), ReshapeChain())
    assert _names(new) == ["r1", "fc"] and new.ops[0].output_shape == (2, 12, 5)


@pytest.mark.parametrize("p1,p2,case,left", [((0, 2, 3, 1), (0, 3, 1, 2), "inverse", []),
                                             ((0, 2, 3, 1), (0, 2, 3, 1), "compose", ["t1"]),
                                             ((1, 0, 2, 3), (0, 1, 3, 2), "compose", ["t1"])])
def test_transpose_chains(net, check, p1, p2, case, left):
    n = net((1, 2, 3, 4))
    n.act("r", n.permute("t2", n.permute("t1", "x", p1), p2))
    g = n.build("r")
    rule = TransposeChain()
    assert [m.arg("case") for m in rule.find(g, CTX)] == [case]
    assert _names(check(g, rule)) == [*left, "r"]


@pytest.mark.parametrize("first,second", [
    (("pixel_shuffle", {"upscale_factor": 2}), ("pixel_unshuffle", {"downscale_factor": 2})),
    (("pixel_unshuffle", {"downscale_factor": 2}), ("pixel_shuffle", {"upscale_factor": 2})),
    (("channel_shuffle", {"groups": 2}), ("channel_shuffle", {"groups": 4})),
])
def test_shuffles_that_undo_each_other_are_removed(net, check, first, second):
    n = net((1, 8, 4, 4))
    a = n.shuffle("a", n.conv("c", "x", 8), first[0], **first[1])
    n.act("r", n.shuffle("b", a, second[0], **second[1]))
    assert _names(check(n.build("r"), TransposeChain())) == ["c", "r"]


def test_channel_shuffles_that_do_not_undo_each_other_stay(net):
    n = net((1, 8, 4, 4))
    n.shuffle("b", n.shuffle("a", "x", "channel_shuffle", groups=2), "channel_shuffle",
              groups=2)
    assert TransposeChain().find(n.build("b"), CTX) == []


_CONST = st.tuples(st.sampled_from(["add", "sub", "mul", "div"]),
                   st.sampled_from(["left", "right"]), st.sampled_from([None, 0.5, 2.0]),
                   st.sampled_from([(1, 4, 1, 1), (4, 1, 1), (1, 4, 6, 6), (1, 1, 1, 1)]))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.one_of(_CONST, st.just("bn"), st.just("relu"), st.just("relu6")),
                    min_size=2, max_size=5), seed=st.integers(0, 3))
def test_random_one_to_one_chains_simplify_with_the_same_output(net, check_all, ops, seed):
    n = net((1, 4, 6, 6))
    src = "x"
    for k, spec in enumerate(ops):
        name = f"o{k}"
        if spec == "bn":
            src = n.bn(name, src)
        elif isinstance(spec, str):
            src = n.act(name, src, spec)
        else:
            op_type, side, scalar, shape = spec
            side = "right" if (op_type, side) == ("div", "left") else side
            src = n.const(name, src, op_type, side=side, scalar=scalar, shape=shape)
    graph = n.build(n.conv("c", src, 4))
    check_all(graph, [AffineChain(), IdentityArithmetic(), IdempotentActivation()], seed)
