"""The rule registry and the shared rebuilding helpers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from search.substitution.base import Match, RewriteError, Rule, RuleContext, apply_all, replay
from search.substitution.rules import FUSE_RULES, RULES
from search.substitution.rules._build import (
    can_bypass,
    copy_spec,
    rebuild,
    unique_name,
    updated_params,
)
from search.substitution.stages import STAGES

CTX = RuleContext()


def test_registry_names_stages_and_citations():
    for name, rule in RULES.items():
        assert isinstance(rule, Rule) and rule.name == name
        assert rule.stage in STAGES
        assert any(src in rule.citation for src in ("dnnfusion", "ocggs", "operator-fission")), \
            rule.citation
    assert {r.name for r in FUSE_RULES} <= set(RULES)
    assert all(r.stage == "fuse" for r in FUSE_RULES)
    for name in ("fuse-one-to-one", "decompose-silu", "decompose-hardswish",
                 "decompose-softmax", "horizontal", "eliminate-concat-slices",
                 "eliminate-slice-concat", "eliminate-identity", "algebraic-affine-chain"):
        assert name in RULES


def test_rule_modules_import_no_torch():
    code = "import sys, search.substitution.rules; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_rebuild_replaces_aliases_and_prunes(net):
    n = net()
    c = n.conv("c", "x", 4)
    s = n.slice("s", c, 0, 2)
    g = n.build(n.act("r", c), s)
    new = rebuild(g, {"r": (copy_spec(g, g.ops[g.id_of("r")], op_type="sigmoid"),)})
    assert new.ops[new.id_of("r")].op_type == "sigmoid" and len(new) == 3
    dropped = rebuild(g, {"r": ()}, {"r": "c"}, prune=["s"])
    assert [op.name for op in dropped.ops] == ["c", "s"]  # s is a network output: kept
    assert dropped.outputs == (dropped.id_of("c"), dropped.id_of("s"))


def test_rebuild_refuses_invalid_graphs(net):
    n = net()
    c = n.conv("c", "x", 4)
    g = n.build(n.act("r", c), c)
    with pytest.raises(RewriteError, match="two network outputs"):
        rebuild(g, {"r": ()}, {"r": "c"})
    with pytest.raises(RewriteError, match="invalid graph"):
        rebuild(g, {"r": ()}, {"r": "nowhere"})
    with pytest.raises(RewriteError, match="cycle"):
        rebuild(g, {"r": ()}, {"r": "q", "q": "r"})


def test_helpers(net):
    n = net()
    c = n.conv("c", "x", 4)
    g = n.build(n.act("r", c), c)
    assert unique_name(g, "c") == "c#1" and unique_name(g, "d") == "d"
    assert unique_name(g, "x") == "x#1" and unique_name(g, "d", ["d"]) == "d#1"
    r = g.ops[g.id_of("r")]
    assert not can_bypass(g, r, g.id_of("c")) and not can_bypass(g, r, -1)
    params = {"a": {"w": 1}, "b": {"w": 2}}
    out = updated_params(params, drop=["a"], put={"c": {"w": 3}, "b": {}})
    assert out == {"c": {"w": 3}} and params == {"a": {"w": 1}, "b": {"w": 2}}


def test_replay_refuses_unknown_rules_and_stale_matches(net):
    n = net()
    n.act("r", n.conv("c", "x", 4))
    g = n.build("r")
    with pytest.raises(RewriteError, match="unknown rule"):
        replay(g, [Match("nope", ("c",))], RULES)
    for rule in RULES.values():
        with pytest.raises(RewriteError):
            rule.apply(g, Match(rule.name, ("missing", "c"), (("case", "x"),)))


@pytest.mark.parametrize("model", ["resnet18", "mobilenet_v3_small", "squeezenet1_1",
                                   pytest.param("efficientnet_b0", marks=pytest.mark.slow)])
def test_fuse_stage_on_zoo_graphs_matches_the_executor(check_all, model):
    from simulator.workload.loader import load_zoo

    g = load_zoo(model, (1, 3, 48, 48))
    final = check_all(g, FUSE_RULES)
    assert len(final) < len(g)
    again, done = apply_all(final, list(FUSE_RULES), CTX)
    assert done == [] and again == final
