"""Random partition-plan proposals and the distinct groups drawn from them."""

from __future__ import annotations

import numpy as np
import pytest

from explain.sampling import merge_adjacent, propose_plan, random_segment_plan, sample_groups
from simulator.partition import is_convex, violations
from simulator.plan import PartitionPlan
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import OpKind
from simulator.workload.loader import load_zoo


@pytest.fixture(scope="module")
def squeezenet():
    return load_zoo("squeezenet1_1")


def test_convexity(residual):
    assert is_convex(residual, [0, 1, 2, 3])
    assert is_convex(residual, [3, 4])
    assert not is_convex(residual, [0, 3])  # 0 -> 1 -> 2 -> 3 leaves and re-enters
    assert is_convex(residual, [1])


def test_segment_plans_partition_the_graph(squeezenet):
    rng = np.random.default_rng(1)
    for _ in range(20):
        groups = random_segment_plan(squeezenet, rng, max_len=12)
        assert violations(squeezenet, PartitionPlan.of(groups)) == []
        assert max(len(g) for g in groups) <= 12


def test_merges_keep_a_valid_partition(squeezenet):
    rng = np.random.default_rng(2)
    groups = random_segment_plan(squeezenet, rng, max_len=5)
    merged = merge_adjacent(squeezenet, groups, rng, attempts=15, max_ops=30)
    assert len(merged) < len(groups)
    assert all(is_convex(squeezenet, g) and squeezenet.is_weakly_connected(g) for g in merged)
    assert sorted(o for g in merged for o in g) == list(range(len(squeezenet)))


def test_proposals_are_partitions(squeezenet):
    rng = np.random.default_rng(3)
    for _ in range(20):
        groups = propose_plan(squeezenet, rng)
        assert sorted(o for g in groups for o in g) == list(range(len(squeezenet)))
        assert all(is_convex(squeezenet, g) for g in groups)


def test_sampled_groups_are_distinct_connected_convex_and_sized(squeezenet):
    groups = sample_groups(squeezenet, 300, np.random.default_rng(4), min_ops=2, max_ops=20)
    assert len(groups) == len(set(groups)) == 300
    assert all(2 <= len(g) <= 20 for g in groups)
    assert all(squeezenet.is_weakly_connected(g) and is_convex(squeezenet, g) for g in groups)
    assert len({len(g) for g in groups}) >= 15  # a mix of sizes


def test_sampling_is_deterministic_and_prefix_stable(squeezenet):
    a = sample_groups(squeezenet, 200, np.random.default_rng(5))
    b = sample_groups(squeezenet, 200, np.random.default_rng(5))
    small = sample_groups(squeezenet, 50, np.random.default_rng(5))
    assert a == b
    assert small == a[:50]
    assert sample_groups(squeezenet, 200, np.random.default_rng(6)) != a


def test_a_small_graph_is_exhausted_not_looped_forever():
    b = GraphBuilder("chain")
    b.add_input("x", (1, 4, 8, 8))
    prev = "x"
    for k in range(5):
        b.add_op(f"r{k}", OpKind.ELTWISE_UNARY, "relu", [prev], (1, 4, 8, 8))
        prev = f"r{k}"
    chain = b.build([prev])
    groups = sample_groups(chain, 1000, np.random.default_rng(0), patience=200)
    assert sorted(groups) == sorted((i, *range(i + 1, j)) for i in range(5)
                                    for j in range(i + 2, 6))  # all 10 runs of 2..5 ops


def test_key_collapses_equal_groups(squeezenet):
    by_size = sample_groups(squeezenet, 100, np.random.default_rng(7), key=len)
    assert len(by_size) == len({len(g) for g in by_size})
