"""Edge-cut encoding: every decoded plan is structurally valid, and encode inverts decode."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.encoding import EdgeEncoding
from simulator.partition import violations
from simulator.plan import layer_by_layer
from simulator.workload.loader import load_zoo

NETWORKS = ("resnet18", "mobilenet_v2", "squeezenet1_0", "efficientnet_b0")


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
    assert violations(g, plan) == []
