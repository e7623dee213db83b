"""`fusion-dse explain`: the group is explained once, the printed edges are the ones Algorithm 1
cut by, and the report says which split was kept."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pytest

from explain.tree_split import GetSplitter, SplitChoice
from fusion_dse.explanation import explain_group, explanation_text
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo

GROUP = "20:43"  # 24 ops of MobileNetV2, over a 64 KiB buffer
OVERRIDES = {"buffer": "64KiB"}


@dataclass
class Shuffled:
    """Ranks the group's edges in an order drawn from the generator, and records every call:
    explaining twice with an advanced generator would give another ranking."""

    name: str = "shuffled"
    calls: list[tuple[tuple[int, ...], list[tuple[int, int]]]] = field(default_factory=list)

    def supports(self, scheme: str) -> bool:
        return True

    def explain(self, graph, ops, cache, rng: np.random.Generator) -> list[tuple[int, int]]:
        edges = sorted(graph.internal_edges(ops))
        ranked = [edges[k] for k in rng.permutation(len(edges))]
        self.calls.append((tuple(ops), ranked))
        return ranked


def explained(seed: int, top: int = 1) -> tuple[object, Shuffled]:
    explainer = Shuffled()
    result = explain_group("mobilenet_v2", GROUP, "edge-npu", "lbdf", explainer, OVERRIDES,
                           seed, top)
    return result, explainer


@pytest.mark.parametrize("seed, choice", [(7, SplitChoice.ALGORITHM_1),
                                          (4, SplitChoice.BASELINE)])
def test_the_group_is_explained_once_and_the_printed_edges_are_those_cut_by(seed, choice):
    result, explainer = explained(seed)
    assert result.choice is choice
    whole = [ranked for ops, ranked in explainer.calls if ops == result.group]
    assert len(whole) == 1 and explainer.calls[0][0] == result.group
    assert result.edges == tuple(whole[0][:1])
    text = explanation_text(result)
    a, b = (result.graph[o].name for o in result.edges[0])
    assert f"  1. {a} -> {b}" in text


def test_the_same_pieces_as_the_splitter_the_search_uses():
    result, _ = explained(0)
    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, load_hw("edge-npu", OVERRIDES), "lbdf")
    pieces = GetSplitter(Shuffled(), max_edges=1).split(graph, result.group, cache,
                                                        np.random.default_rng(0))
    assert tuple(pieces) == result.pieces


def test_algorithm_1_kept_cuts_an_explained_edge_and_says_so():
    result, _ = explained(7)
    assert set(result.edges) & set(result.cut)
    text = explanation_text(result)
    assert "split kept: Algorithm 1" in text and "baseline" not in text
    assert "(explained 1)" in text
    assert sum(c.dram_bytes for c in result.piece_costs) == result.algorithm_1_dram


def test_baseline_kept_says_so_with_both_costs():
    result, _ = explained(4)
    kept = sum(c.dram_bytes for c in result.piece_costs)
    assert kept < result.algorithm_1_dram
    text = explanation_text(result)
    assert "split kept: the baseline random split" in text and "Algorithm 1 (" not in text
    assert f"{kept:,} B, less than Algorithm 1's {result.algorithm_1_dram:,} B" in text
    doc = result.to_dict()
    assert doc["split"] == "baseline" and doc["algorithm_1_dram_bytes"] == result.algorithm_1_dram


def test_a_fitting_group_is_neither_explained_nor_split():
    explainer = Shuffled()
    result = explain_group("mobilenet_v2", "20:22", "edge-npu", "lbdf", explainer,
                           {"buffer": "1MiB"})
    assert result.choice is SplitChoice.FITS and not explainer.calls
    assert result.pieces == (result.group,) and result.edges == ()
    assert explanation_text(result).endswith("nothing to explain or split")


def test_the_command_prints_which_split_was_kept(cli):
    code, out, err = cli("explain", "mobilenet_v2", "--group", GROUP, "--buffer", "64KiB",
                         "--explainer", "alledges", "--top", "5")
    assert code == 0, err
    assert "split kept: " in out and "split (Algorithm 1)" not in out
    code, out, err = cli("explain", "mobilenet_v2", "--group", GROUP, "--buffer", "64KiB",
                         "--explainer", "alledges", "--top", "5", "--format", "json")
    doc = json.loads(out)
    assert doc["split"] in {"algorithm-1", "baseline", "fallback"}
    assert len(doc["explained_edges"]) == 5


def test_a_memoised_request_reports_the_explanation_its_split_was_cut_by():
    graph = load_zoo("mobilenet_v2")
    cache = CostCache(graph, load_hw("edge-npu", OVERRIDES), "lbdf")
    group = tuple(range(20, 44))
    explainer = Shuffled()
    splitter = GetSplitter(explainer, max_edges=1)
    first = splitter.split_outcome(graph, group, cache, np.random.default_rng(0))
    calls = len(explainer.calls)
    second = splitter.split_outcome(graph, group, cache, np.random.default_rng(1))
    assert len(explainer.calls) == calls  # memoised: not explained again
    assert second.explained == first.explained == (explainer.calls[0][1][0],)
    assert second.algorithm_1 == first.algorithm_1
