"""GNNExplainer in batches (`explain.gnne`) and explained ahead (`GetSplitter.prepare`): the same
masks as PyG's GNNExplainer, the same split decisions batched or one group at a time, masks
computed once per encoding, and deterministic."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from torch_geometric.explain import Explainer
from torch_geometric.explain.algorithm import GNNExplainer

from explain.explainers import GnnExplainerGET, group_tensors
from explain.gnne import edge_masks
from explain.predict import load_predictor
from explain.train import threads
from explain.tree_split import GetSplitter
from search.repair import Repairer
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.partition import components
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import OpKind
from simulator.workload.loader import load_zoo


@pytest.fixture(scope="module")
def mobilenet():
    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, load_hw("edge-npu", {"buffer": "128KiB"}), "lbdf")
    unfusable = set(cache.unfusable)
    fuseable = [o for o in range(len(graph)) if o not in unfusable]
    invalid = []
    for start in range(0, 120, 9):
        for group in components(graph, [o for o in fuseable if start <= o < start + 24]):
            if len(group) > 2 and not cache.group(group).fits:
                invalid.append(tuple(group))
    assert len(invalid) >= 6
    return graph, cache, invalid


def _ranking(mask: torch.Tensor) -> list[int]:
    w = mask.tolist()
    return sorted(range(len(w)), key=lambda k: (-w[k], k))


def test_edge_masks_are_pyg_gnnexplainer_masks_batched_or_alone(mobilenet):
    graph, cache, invalid = mobilenet
    groups = invalid[:5]
    data = [group_tensors(graph, g, cache.hw.buffer_bytes, cache.hw.dtype_bytes)[:2]
            for g in groups]
    seeds = [11 * k + 3 for k in range(len(groups))]
    model = load_predictor("lbdf").model
    pyg = Explainer(model=model, algorithm=GNNExplainer(epochs=50, lr=0.01),
                    explanation_type="model", edge_mask_type="object", node_mask_type=None,
                    model_config={"mode": "binary_classification", "task_level": "graph",
                                  "return_type": "raw"})
    with torch.random.fork_rng(), threads(1):
        want = []
        for (x, e), seed in zip(data, seeds, strict=True):
            torch.manual_seed(seed)
            want.append(pyg(x, e).edge_mask)
        alone = [edge_masks(model, [d], [s], epochs=50)[0] for d, s in zip(data, seeds,
                                                                         strict=True)]
        batched = edge_masks(model, data, seeds, epochs=50)
    for w, a, b in zip(want, alone, batched, strict=True):
        assert torch.allclose(w, a, atol=1e-5) and torch.allclose(w, b, atol=1e-5)
        assert _ranking(w) == _ranking(a) == _ranking(b)


def test_batched_and_one_at_a_time_splits_are_the_same(mobilenet):
    graph, cache, invalid = mobilenet
    groups = invalid[:6]
    batched = GetSplitter(GnnExplainerGET(epochs=50))
    batched.prepare(graph, groups, cache)  # all of them, a level of the recursion at a time
    alone = GetSplitter(GnnExplainerGET(epochs=50, batch_groups=1))
    for g in groups:
        rng = np.random.default_rng(len(g))
        got = batched.split_outcome(graph, g, cache, rng)
        want = alone.split_outcome(graph, g, cache, np.random.default_rng(len(g)))
        assert got == want
    assert ({**batched.stats.to_dict(), "explain_seconds": 0}
            == {**alone.stats.to_dict(), "explain_seconds": 0})
    b, a = batched.explainer.report(), alone.explainer.report()
    assert b["masks_optimised"] >= a["masks_optimised"] > len(groups)  # the recursion's too
    assert b["mask_batches"] < b["masks_optimised"]
    assert a["mask_batches"] == a["masks_optimised"]


def test_masks_are_deterministic_and_seeded_by_the_group(mobilenet):
    graph, cache, invalid = mobilenet
    g = invalid[0]
    first, second = GnnExplainerGET(epochs=30), GnnExplainerGET(epochs=30)
    # the search's generator does not enter: the mask is a function of the group's encoding
    a = first.explain(graph, g, cache, np.random.default_rng(1))
    b = second.explain(graph, g, cache, np.random.default_rng(2))
    assert a == b and sorted(a) == sorted(graph.internal_edges(g))
    assert torch.equal(next(iter(first._masks.values())), next(iter(second._masks.values())))
    salted = GnnExplainerGET(epochs=30, seed=1)
    salted.explain(graph, g, cache, np.random.default_rng(1))
    assert not torch.equal(next(iter(salted._masks.values())),
                           next(iter(first._masks.values())))
    torch_state = torch.get_rng_state()
    first.explain_many(graph, invalid[1:3], cache)
    assert torch.equal(torch.get_rng_state(), torch_state)  # global torch RNG untouched


def test_equal_encodings_share_one_mask():
    """A chain of identical convs: groups at different places encode the same."""
    shape = (1, 8, 16, 16)
    b = GraphBuilder("same")
    b.add_input("x", shape)
    prev = "x"
    for k in range(9):
        b.add_op(f"c{k}", OpKind.CONV, "conv", [prev], shape, kernel=(3, 3),
                 padding=(1, 1, 1, 1), weight_elems=8 * 8 * 9, macs=16 * 16 * 8 * 8 * 9)
        prev = f"c{k}"
    graph = b.build([prev])
    cache = CostCache(graph, load_hw("edge-npu"), "lbdf")
    get = GnnExplainerGET(epochs=10)
    first, second, other = get.explain_many(graph, [(1, 2, 3), (4, 5, 6), (2, 3, 4, 5)],
                                            cache)
    assert get.report() == {"masks_optimised": 2, "mask_batches": 1, "masks_reused": 1}
    assert [(i + 3, j + 3) for i, j in first] == second  # the same ranking, own edges
    assert sorted(other) == [(2, 3), (3, 4), (4, 5)]


class HashRankedAlone:
    """A deterministic explainer: edges ranked by a hash of (group, edge). It records what it
    was asked to explain that no batch had explained."""

    name = "hashed"

    def __init__(self) -> None:
        self.batched: set[tuple] = set()
        self.late: list[tuple] = []
        self.calls = 0

    def supports(self, scheme):
        return True

    def _rank(self, graph, ops):
        def h(e):
            return hashlib.blake2b(repr((tuple(ops), e)).encode(), digest_size=4).digest()
        return sorted(graph.internal_edges(ops), key=h)

    def explain(self, graph, ops, cache, rng):
        if tuple(ops) not in self.batched:
            self.late.append(tuple(ops))
        return self._rank(graph, ops)


class HashRanked(HashRankedAlone):
    """The same, explaining in batches too."""

    def explain_many(self, graph, groups, cache):
        self.calls += 1
        self.batched.update(tuple(g) for g in groups)
        return [self._rank(graph, g) for g in groups]


def test_prepare_explains_ahead_everything_algorithm_1_asks_and_changes_nothing(mobilenet):
    graph, cache, invalid = mobilenet
    ahead, alone = HashRanked(), HashRankedAlone()
    prepared = Repairer(graph, cache, GetSplitter(ahead, max_edges=2), key=5)
    plain = Repairer(graph, cache, GetSplitter(alone, max_edges=2), key=5)
    plans = [[g] + [(o,) for o in range(len(graph)) if o not in g] for g in invalid]
    prepared.prepare(plans)
    assert ahead.calls >= 2 and not ahead.late  # levels of the recursion, in batches
    assert [prepared.repair(p) for p in plans] == [plain.repair(p) for p in plans]
    assert not ahead.late  # every explanation Algorithm 1 asked for was ready
    s, t = prepared.splitter.stats.to_dict(), plain.splitter.stats.to_dict()
    assert {**s, "explain_seconds": 0} == {**t, "explain_seconds": 0}


@pytest.mark.parametrize("make", ["pg", "rg"])
def test_pg_and_rg_reuse_a_groups_ranking_and_draw_as_before(mobilenet, make):
    from explain.explainers import PgExplainerGET
    from explain.rg_explainer import RgExplainerGET

    def new():
        return PgExplainerGET() if make == "pg" else RgExplainerGET()

    graph, cache, invalid = mobilenet
    g = invalid[0]
    get, rng = new(), np.random.default_rng(7)
    first = get.explain(graph, g, cache, rng)
    again = get.explain(graph, g, cache, rng)  # from the cache
    rng2 = np.random.default_rng(7)
    new().explain(graph, g, cache, rng2)
    computed = new().explain(graph, g, cache, rng2)  # computed again, by another instance
    assert again == first == computed
    assert rng.bit_generator.state == rng2.bit_generator.state  # the same draws
