"""Horizontal fusion with kernel enlarging (OCGGS Fig. 1), checked by the executor."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.substitution.base import RuleContext, apply_all
from search.substitution.rules import FUSE_RULES
from search.substitution.rules.eliminate import ConcatOfSlices
from search.substitution.rules.horizontal import HorizontalFusion, merged_window
from simulator.workload.graph import OpKind
from simulator.workload.loader import load_zoo
from simulator.workload.ops import conv_macs

CTX = RuleContext()
RULE = HorizontalFusion()


def _names(graph):
    return [op.name for op in graph.ops]


def _fire(net, activations: bool = True):
    n = net((1, 8, 9, 9))
    s = n.conv("squeeze", "x", 4, k=1)
    e1, e3 = n.conv("e1", s, 5, k=1), n.conv("e3", s, 6, k=3)
    if activations:
        e1, e3 = n.act("r1", e1), n.act("r3", e3)
    return n.build(n.conv("out", n.concat("cat", [e1, e3]), 4, k=1))


@pytest.mark.parametrize("activations", [True, False])
def test_fire_module_expands_merge_into_one_3x3_conv(net, check, activations):
    g = _fire(net, activations)
    assert [(m.ops, m.arg("case")) for m in RULE.find(g, CTX) if m.arg("case") == "concat"] == [
        (("cat", "e1", "e3"), "concat")]
    new = check(g, RULE)
    merged = new.ops[new.id_of("e1+e3")]
    assert (merged.kernel, merged.padding, merged.output_shape) == ((3, 3), (1, 1, 1, 1),
                                                                    (1, 11, 9, 9))
    assert merged.weight_elems == 11 * 4 * 9 + 11
    assert merged.macs == conv_macs((1, 11, 9, 9), 4, 1, (3, 3))
    assert "cat" not in _names(new)
    if activations:
        assert _names(new) == ["squeeze", "e1+e3", "r1+r3", "out"]


def test_fused_fire_module_merges_with_equal_epilogues(net, check):
    fused, _ = apply_all(_fire(net), list(FUSE_RULES), CTX)
    new = check(fused, RULE)
    assert new.ops[new.id_of("e1+e3")].attr("epilogue") == ("relu",)


def test_different_epilogues_or_activations_do_not_merge(net):
    n = net((1, 8, 9, 9))
    e1, e3 = n.conv("e1", "x", 5, k=1), n.conv("e3", "x", 6, k=3)
    n.concat("cat", [n.act("r1", e1), n.act("r3", e3, "relu6")])
    assert [m for m in RULE.find(n.build("cat"), CTX) if m.arg("case") == "concat"] == []


def test_inception_branches_merge_within_a_larger_concat(net, check):
    n = net((1, 6, 8, 8))
    other = n.pool("pool", "x", 1)
    b1, b3, b5 = (n.conv("b1", "x", 3, k=1), n.conv("b3", "x", 4, k=3, bias=False),
                  n.conv("b5", "x", 2, k=5))
    g = n.build(n.concat("cat", [other, b1, b3, b5]))
    new = check(g, RULE)
    merged = new.ops[new.id_of("b1+b3+b5")]
    assert (merged.kernel, merged.padding) == ((5, 5), (2, 2, 2, 2))
    assert merged.weight_elems == 9 * 6 * 25 + 9
    cat = new.ops[new.id_of("cat")]
    assert cat.inputs == (new.id_of("pool"), merged.id)


def test_siblings_without_a_concat_merge_then_slice(net, check):
    n = net((1, 8, 12, 12))
    down = n.conv("down", "x", 6, k=1, stride=2, bias=False)
    main = n.act("r", n.conv("main", "x", 4, k=3, stride=2))
    g = n.build(n.binary("add", n.conv("c2", main, 6, k=1), down))
    match = next(m for m in RULE.find(g, CTX) if m.arg("case") == "slice")
    assert match.ops == ("down", "main")
    new = check(g, RULE, match)
    merged = new.ops[new.id_of("down+main")]
    assert merged.kernel == (3, 3) and merged.output_shape == (1, 10, 6, 6)
    for name, (start, end) in (("down", (0, 6)), ("main", (6, 10))):
        s = new.ops[new.id_of(name)]
        assert s.kind is OpKind.SLICE and (s.attr("start"), s.attr("end")) == (start, end)


def test_sliced_siblings_joined_again_by_a_concat_lose_their_slices(net, check):
    n = net((1, 8, 9, 9))
    a, b = n.conv("a", "x", 3, k=1), n.conv("b", "x", 5, k=3)
    g = n.build(n.act("r", n.concat("cat", [a, b])), n.act("other", a))
    assert [m.arg("case") for m in RULE.find(g, CTX)] == ["slice"]
    sliced = check(g, RULE)
    joined = check(sliced, ConcatOfSlices())
    assert sorted(_names(joined)) == ["a", "a+b", "other", "r"]
    assert joined.ops[joined.id_of("r")].inputs == (joined.id_of("a+b"),)


@pytest.mark.parametrize("k1,k2,pads,dilation,stride", [
    ((1, 3), (3, 1), ((0, 1, 0, 1), (1, 0, 1, 0)), 1, 1),
    (1, 3, (0, 2), 2, 1),
    (3, 5, (1, 2), 1, 2),
    (1, 3, (0, (0, 0, 1, 1)), 1, 2),
])
def test_kernel_enlarging_keeps_every_read(net, check, k1, k2, pads, dilation, stride):
    n = net((1, 4, 10, 10))
    a = n.conv("a", "x", 3, k=k1, pad=pads[0], dilation=dilation, stride=stride)
    b = n.conv("b", "x", 2, k=k2, pad=pads[1], dilation=dilation, stride=stride)
    assert n.shape(a)[2:] == n.shape(b)[2:]
    check(n.build(n.concat("cat", [a, b])), RULE)


def test_kernels_whose_reads_cannot_align_do_not_merge(net):
    n = net((1, 4, 10, 10))
    a = n.conv("a", "x", 3, k=3, pad=(0, 0, 2, 2))
    b = n.conv("b", "x", 2, k=3, pad=1)
    g = n.build(n.concat("cat", [a, b]))
    assert merged_window([g.ops[g.id_of(a)], g.ops[g.id_of(b)]]) is None
    assert RULE.find(g, CTX) == []


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kernels=st.lists(st.sampled_from([1, 3, 5]), min_size=2, max_size=3),
       stride=st.sampled_from([1, 2]), dilation=st.sampled_from([1, 2]),
       biases=st.lists(st.booleans(), min_size=3, max_size=3), seed=st.integers(0, 3))
def test_random_siblings_merge_with_the_same_output(net, check, kernels, stride, dilation,
                                                    biases, seed):
    n = net((1, 3, 9, 8))
    convs = [n.conv(f"c{k}", "x", 2 + k, k=size, stride=stride, dilation=dilation,
                    bias=biases[k]) for k, size in enumerate(kernels)]
    g = n.build(n.act("r", n.concat("cat", convs)))
    new = check(g, RULE, seed=seed)
    assert len(new) == 2


def test_squeezenet_fire_modules_are_all_found():
    raw = load_zoo("squeezenet1_0", (1, 3, 64, 64))
    fused, _ = apply_all(raw, list(FUSE_RULES), CTX)
    for g in (raw, fused):
        concat = [m for m in RULE.find(g, CTX) if m.arg("case") == "concat"]
        assert len(concat) == 8
        assert all(m.ops[1].endswith("expand1x1") and m.ops[2].endswith("expand3x3")
                   for m in concat)


def test_squeezenet_fire_merge_keeps_the_network_output(check):
    g = load_zoo("squeezenet1_0", (1, 3, 48, 48))
    match = next(m for m in RULE.find(g, CTX) if m.arg("case") == "concat")
    new = check(g, RULE, match)
    assert len(new) == len(g) - 3  # two convs, two relus and the concat: a conv and a relu


def test_attention_projections_merge_into_one_linear_then_slice(check):
    """Q, K and V of each attention layer read one tensor: one linear layer of 3 x the width
    (their weights concatenated) and three slices along the last axis; the executor's output
    is unchanged and the MACs and weights too."""
    import torch

    from simulator.workload.torch_import import from_torch
    from simulator.workload.zoo.bert import BertEncoder

    torch.manual_seed(0)
    g = from_torch(BertEncoder(2, 8, 2, 16).eval(), (1, 8, 8), name="tiny-bert")
    linear = [m for m in RULE.find(g, CTX) if g.ops[g.id_of(m.ops[0])].kind is OpKind.LINEAR]
    assert [len(m.ops) for m in linear] == [3, 3]  # Q, K, V of each layer
    q, k, v = (g.ops[g.id_of(n)] for n in linear[0].ops)
    new = check(g, RULE, linear[0])
    merged = new.ops[new.id_of("+".join(linear[0].ops))]
    assert merged.output_shape == (1, 8, 24) and merged.kind is OpKind.LINEAR
    assert merged.weight_elems == q.weight_elems + k.weight_elems + v.weight_elems
    assert merged.macs == q.macs + k.macs + v.macs
    sliced = new.ops[new.id_of(q.name)]
    assert (sliced.kind, sliced.attr("axis"), sliced.attr("start"), sliced.attr("end")) == (
        OpKind.SLICE, 2, 0, 8)
