"""Composite ops decomposed into primitives (operator fission §2), checked by the executor."""

from __future__ import annotations

import pytest

from search.substitution.base import RuleContext
from search.substitution.rules import RULES
from search.substitution.rules.decompose import DecomposeSoftmax
from simulator.workload.graph import MappingType, OpKind

CTX = RuleContext()


@pytest.mark.parametrize("activation,gate", [("silu", "sigmoid"), ("hardswish", "hardsigmoid")])
def test_gated_activation_becomes_gate_times_input(net, check, activation, gate):
    n = net()
    n.conv("d", n.act("a", n.conv("c", "x", 4), activation), 4)
    g = n.build("d")
    rule = RULES[f"decompose-{activation}"]
    new = check(g, rule)
    a, gate_op = new.ops[new.id_of("a")], new.ops[new.id_of(f"a/{gate}")]
    assert (gate_op.kind, gate_op.op_type, gate_op.inputs) == (OpKind.ELTWISE_UNARY, gate,
                                                               (new.id_of("c"),))
    assert (a.kind, a.op_type) == (OpKind.ELTWISE_BINARY, "mul")
    assert a.inputs == (new.id_of("c"), gate_op.id)
    assert len(new) == len(g) + 1 and new.total_macs == g.total_macs


def test_gate_on_the_network_input_and_an_epilogue_moved_to_the_product(net, check):
    n = net()
    n.b.add_op("a", OpKind.ELTWISE_UNARY, "silu", ["x"], (1, 8, 10, 10),
               attrs={"epilogue": ("relu",)})
    new = check(n.build("a"), RULES["decompose-silu"])
    assert new.ops[new.id_of("a")].attr("epilogue") == ("relu",)
    assert new.ops[new.id_of("a/sigmoid")].attr("epilogue") is None


@pytest.mark.parametrize("shape,axis,kind", [((2, 7), -1, OpKind.LINEAR),
                                             ((2, 7), 1, OpKind.LINEAR),
                                             ((1, 3, 4, 5), 3, OpKind.LINEAR),
                                             ((1, 6, 4, 5), 1, OpKind.CONV)])
def test_softmax_becomes_exp_sum_div(net, check, shape, axis, kind):
    n = net(shape)
    n.softmax("sm", "x", axis)
    g = n.build("sm")
    new = check(g, DecomposeSoftmax())
    exp, total, div = (new.ops[new.id_of(k)] for k in ("sm/exp", "sm/sum", "sm"))
    assert exp.op_type == "exp" and total.kind is kind
    assert div.kind is OpKind.ELTWISE_BINARY and div.op_type == "div"
    assert div.mapping is MappingType.ONE_TO_MANY
    summed = shape[axis]
    assert total.weight_elems == summed and total.macs == total.output_elems * summed


@pytest.mark.parametrize("axis,attrs", [(2, {}), (-1, {"log": True})])
def test_softmax_over_another_axis_or_log_softmax_is_not_decomposed(net, axis, attrs):
    n = net((1, 3, 4, 5))
    n.softmax("sm", "x", axis, **attrs)
    assert DecomposeSoftmax().find(n.build("sm"), CTX) == []


def test_decomposition_names_stay_unique(net, check):
    n = net((2, 7))
    n.softmax("sm", n.act("sm/exp", "x", "relu"), -1)
    new = check(n.build("sm"), DecomposeSoftmax())
    assert {"sm/exp", "sm/exp#1", "sm/sum", "sm"} <= {op.name for op in new.ops}
