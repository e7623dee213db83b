"""fuse-one-to-one: One-to-One ops folded into weights or fused as epilogues, executor-checked."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.substitution.base import Match, RewriteError, RuleContext, apply_all
from search.substitution.rules import FUSE_RULES, RULES
from search.substitution.rules.fuse import FuseOneToOne, append_epilogue
from simulator.workload.execute import execute
from simulator.workload.graph import MappingType, OpKind
from simulator.workload.loader import zoo_module
from simulator.workload.torch_import import from_torch_with_params

RULE = FuseOneToOne()


def _only(graph, name):
    return graph.ops[graph.id_of(name)]


@pytest.mark.parametrize("bias", [True, False])
def test_batchnorm_folds_into_conv_and_a_biasless_conv_gains_a_bias(net, check, bias):
    n = net()
    n.bn("bn", n.conv("c", "x", 6, bias=bias))
    g = n.build("bn")
    new = check(g, RULE)
    conv = _only(new, "c")
    assert len(new) == 1 and conv.kind is OpKind.CONV
    assert conv.weight_elems == 6 * 8 * 9 + 6
    assert conv.macs == _only(g, "c").macs and conv.output_shape == _only(g, "c").output_shape
    assert RULE.find(g, RuleContext())[0].arg("mode") == "fold"


@pytest.mark.parametrize("op_type,side", [("add", "right"), ("add", "left"), ("sub", "right"),
                                          ("sub", "left"), ("mul", "right"), ("mul", "left"),
                                          ("div", "right")])
@pytest.mark.parametrize("scalar", [None, 0.75])
def test_constant_arithmetic_folds_into_conv(net, check, op_type, side, scalar):
    n = net()
    n.const("k", n.conv("c", "x", 4), op_type, side=side, scalar=scalar)
    new = check(n.build("k"), RULE)
    assert [op.name for op in new.ops] == ["c"]


@pytest.mark.parametrize("maker", ["dwconv", "linear"])
def test_folds_into_depthwise_conv_and_linear(net, check, maker):
    n = net((1, 8, 6, 6) if maker == "dwconv" else (2, 8))
    src = n.dwconv("p", "x") if maker == "dwconv" else n.linear("p", "x", 5, bias=False)
    n.const("s", n.bn("bn", src), "mul")
    g = n.build("s")
    once = check(g, RULE)
    twice = check(once, RULE.__class__())
    assert len(twice) == 1
    assert _only(twice, "p").weight_elems == _only(g, "p").weight_elems + \
        _only(g, "p").output_shape[1 if maker == "dwconv" else -1]


def test_division_of_a_constant_by_x_is_not_folded(net):
    n = net()
    n.const("k", n.conv("c", "x", 4), "div", side="left", shape=(1, 4, 1, 1))
    assert RULE.find(n.build("k"), RuleContext()) == []


def test_a_constant_varying_along_space_is_not_folded_but_a_scalar_one_becomes_epilogue(net,
                                                                                         check):
    n = net()
    n.const("k", n.conv("c", "x", 4), "mul", shape=(1, 1, 10, 10))
    assert RULE.find(n.build("k"), RuleContext()) == []
    n = net()
    n.const("k", n.act("r", n.conv("c", "x", 4)), "mul", scalar=0.5)
    once = check(n.build("k"), RULE)
    fused = check(once, RULE)
    assert len(fused) == 1
    assert _only(fused, "c").attr("epilogue") == ("relu", "mul(const_side=right,scalar=0.5)")


@pytest.mark.parametrize("host", ["conv", "pool", "gpool", "add", "bn", "linear"])
def test_activation_becomes_the_epilogue_of_its_producer(net, check, host):
    n = net((2, 8) if host == "linear" else (1, 8, 8, 8))
    src = {"conv": lambda: n.conv("h", "x", 4), "pool": lambda: n.pool("h", "x"),
           "gpool": lambda: n.gpool("h", "x"), "add": lambda: n.binary("h", "x", "x"),
           "bn": lambda: n.bn("h", "x"), "linear": lambda: n.linear("h", "x", 3)}[host]()
    n.act("act", src, "hardtanh", min_val=-0.5, max_val=0.5)
    g = n.build("act")
    new = check(g, RULE)
    assert len(new) == 1
    assert new.ops[0].name == "h"
    assert new.ops[0].attr("epilogue") == ("hardtanh(max_val=0.5,min_val=-0.5)",)
    assert new.ops[0].mapping is g.ops[0].mapping


def test_activations_chain_into_one_epilogue_in_order(net, check):
    n = net()
    n.act("s", n.act("r", n.conv("c", "x", 4)), "sigmoid")
    g = check(n.build("s"), RULE)
    g = check(g, RULE)
    assert g.ops[0].attr("epilogue") == ("relu", "sigmoid")
    assert append_epilogue(("relu6",), ("relu",)) == ("relu6",)
    assert append_epilogue(("relu",), ("relu6",)) == ("relu6",)


def test_broadcast_multiply_keeps_one_to_many(net, check):
    n = net()
    n.act("r", n.binary("m", n.gpool("g", "x"), "x", "mul"))
    g = n.build("r")
    assert _only(g, "m").mapping is MappingType.ONE_TO_MANY
    new = check(g, RULE)
    assert _only(new, "m").mapping is MappingType.ONE_TO_MANY


def test_no_fusion_into_a_producer_with_another_reader_or_that_is_a_network_output(net):
    n = net()
    c = n.conv("c", "x", 4)
    n.act("r", c)
    n.conv("d", c, 4)
    assert RULE.find(n.build("r", "d"), RuleContext()) == []
    n = net()
    n.act("r", n.conv("c", "x", 4))
    assert RULE.find(n.build("r", "c"), RuleContext()) == []


def test_batchnorm_after_an_epilogue_is_not_fused(net):
    n = net()
    n.bn("bn", n.act("r", n.conv("c", "x", 4)))
    fused, done = apply_all(n.build("bn"), [RULE], RuleContext())
    assert [op.name for op in fused.ops] == ["c", "bn"]
    assert [d.match.arg("mode") for d in done] == ["epilogue"]


def test_activation_reading_the_network_input_and_prelu_are_left_alone(net):
    n = net()
    n.act("r", "x")
    assert RULE.find(n.build("r"), RuleContext()) == []
    n = net()
    n.b.add_op("p", OpKind.ELTWISE_UNARY, "prelu", [n.conv("c", "x", 4)], (1, 4, 10, 10),
               weight_elems=1)
    assert RULE.find(n.build("p"), RuleContext()) == []


def test_a_stale_match_is_refused(net):
    n = net()
    n.act("r", n.conv("c", "x", 4))
    g = n.build("r")
    m = RULE.find(g, RuleContext())[0]
    with pytest.raises(RewriteError):
        RULE.apply(RULE.apply(g, m), m)
    with pytest.raises(RewriteError):
        RULE.apply(g, Match(RULE.name, ("c", "r"), (("mode", "fold"),)))
    with pytest.raises(RewriteError):
        RULE.apply(g, Match(RULE.name, ("c", "nope"), (("mode", "epilogue"),)))


_ONE_TO_ONE = st.sampled_from([("bn",), ("act", "relu"), ("act", "silu"), ("act", "relu6"),
                               ("const", "add"), ("const", "mul"), ("const", "sub"),
                               ("const", "div"), ("scalar", "mul"), ("scalar", "add")])


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chain=st.lists(_ONE_TO_ONE, min_size=1, max_size=4), depthwise=st.booleans(),
       bias=st.booleans(), seed=st.integers(0, 3))
def test_random_chains_fuse_to_fixpoint_with_the_same_output(net, check_all, chain, depthwise,
                                                             bias, seed):
    n = net((1, 4, 6, 6))
    src = n.dwconv("c", "x", bias=bias) if depthwise else n.conv("c", "x", 4, bias=bias)
    for k, (what, *arg) in enumerate(chain):
        name = f"o{k}"
        if what == "bn":
            src = n.bn(name, src)
        elif what == "act":
            src = n.act(name, src, arg[0])
        elif what == "const":
            src = n.const(name, src, arg[0])
        else:
            src = n.const(name, src, arg[0], scalar=1.5)
    fused = check_all(n.build(src), [RULE], seed)
    assert [op.name for op in fused.ops][0] == "c"


@pytest.mark.parametrize("model", [pytest.param("vgg16", marks=pytest.mark.slow), "resnet18",
                                   "mobilenet_v2"])
def test_zoo_fuse_leaves_no_activation_after_a_conv_and_matches_torch(model):
    torch.manual_seed(0)
    module = zoo_module(model).eval()
    graph, params = from_torch_with_params(module, (1, 3, 64, 64), name=model)
    fused, done = apply_all(graph, list(FUSE_RULES), RuleContext())
    for op in fused.ops:
        if op.kind is OpKind.ELTWISE_UNARY:
            producer = fused.ops[op.inputs[0]] if op.inputs[0] >= 0 else None
            assert producer is None or producer.kind not in (OpKind.CONV, OpKind.DWCONV)
    assert fused.count(OpKind.ELTWISE_UNARY) == 0
    g = graph
    for r in done:
        params = RULES[r.match.rule].transform(g, r.match, params)
        g = r.graph
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = module(x)
    got = execute(fused, params, x)[0]
    assert float((got - expected).abs().max()) <= 1e-4 * max(1.0, float(expected.abs().max()))
    assert len(fused) == len(graph) - len(done)
