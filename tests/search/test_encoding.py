"""Edge-cut encoding and the convexity repair: every decoded plan is structurally valid."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.encoding import (
    EdgeEncoding,
    components,
    is_acyclic,
    make_acyclic,
    plan_of,
    structure_problem,
)
from simulator.plan import PartitionPlan, layer_by_layer, segment_plan, structural_violations
from simulator.workload.loader import load_zoo

NETWORKS = ("resnet18", "mobilenet_v2", "squeezenet1_0", "efficientnet_b0")


def test_a_cycle_of_groups_is_split_by_level(nets):
    g = nets["residual"]()  # c1 r1 c2 r2 c3 add(c3, r1) r3 c4 r4
    bad = [(0, 1, 5), (2, 3, 4), (6,), (7,), (8,)]  # r1 -> c2 .. c3 -> add closes a cycle
    assert not is_acyclic(g, bad)
    fixed = make_acyclic(g, bad)
    assert is_acyclic(g, fixed) and structure_problem(g, fixed) == ""
    assert fixed == [(0, 1), (2, 3, 4), (5,), (6,), (7,), (8,)]


def test_acyclic_plans_are_left_alone(small_net):
    groups = [g.ops for g in segment_plan(small_net, [3, 6]).groups]
    assert make_acyclic(small_net, groups) == sorted(groups)


def test_components_split_a_disconnected_set(small_net):
    comps = components(small_net, range(len(small_net)))
    assert comps == [tuple(range(len(small_net)))]
    assert components(small_net, []) == []


@pytest.mark.parametrize("name", NETWORKS)
def test_encode_inverts_decode_on_valid_plans(name):
    g = load_zoo(name)
    enc = EdgeEncoding.of(g)
    rng = np.random.default_rng(0)
    for _ in range(20):
        plan = enc.decode(rng.random(enc.n_vars) < rng.random())
        assert enc.decode(enc.encode(plan)) == plan
    assert enc.decode(np.ones(enc.n_vars, dtype=bool)) == layer_by_layer(g)
    assert len(enc.decode(np.zeros(enc.n_vars, dtype=bool))) == 1


def test_unfusable_ops_have_no_variables_and_stay_alone():
    g = load_zoo("resnet18")
    unfusable = {5, 12, 30}
    enc = EdgeEncoding.of(g, unfusable)
    assert all(i not in unfusable and j not in unfusable for i, j in enc.edges)
    plan = enc.decode(np.zeros(enc.n_vars, dtype=bool))
    for o in unfusable:
        assert (o,) in [grp.ops for grp in plan.groups]


def test_decode_rejects_a_vector_of_the_wrong_length():
    enc = EdgeEncoding.of(load_zoo("resnet18"))
    with pytest.raises(ValueError, match="cut bits"):
        enc.decode(np.zeros(enc.n_vars + 1, dtype=bool))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(NETWORKS), st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_every_decoded_plan_is_structurally_valid(name, seed, p):
    g = load_zoo(name)
    enc = EdgeEncoding.of(g)
    plan = enc.decode(np.random.default_rng(seed).random(enc.n_vars) < p)
    assert structural_violations(g, plan) == []
    assert structure_problem(g, [grp.ops for grp in plan.groups]) == ""


def test_structure_problem_agrees_with_the_reference(small_net):
    n = len(small_net)
    cases = [
        [tuple(range(n))],
        [(0,), tuple(range(2, n))],          # op 1 missing
        [(0, 1), (1, *range(2, n))],         # op 1 twice
    ]
    for groups in cases:
        ref = structural_violations(small_net, PartitionPlan.of(groups))
        assert bool(structure_problem(small_net, groups)) == bool(ref)


def test_plan_of_matches_partition_plan_of(small_net):
    groups = [(2, 3), (0, 1), tuple(range(4, len(small_net)))]
    assert plan_of(groups) == PartitionPlan.of(groups)
