"""`fusion_dse.pipeline`: graph stages flow into the search, one cost cache serves search and
baselines, names and numbers are refused before the network is loaded, and the report adds
the application's figures to a typed summary whose document keeps its key order."""

from __future__ import annotations

import pytest

import fusion_dse.pipeline as pipeline
from fusion_dse.pipeline import RunSpec, run_pipeline
from search.result import SearchSummary
from simulator.errors import InputError
from simulator.workload.loader import load_zoo

FAST = {"overrides": {"buffer": "128KiB"}, "budget": 12, "search": "rs"}
KEYS = ["format", "version", "model", "hw", "buffer_bytes", "scheme", "search", "repair",
        "objectives", "budget", "budget_used", "distinct_plans", "diversified_repairs", "best",
        "search_space", "caches", "status", "message", "notes", "seconds", "seed", "hardware",
        "baselines", "baseline_seconds", "optimum", "graph_stages", "search_best", "model_spec",
        "input_shapes"]


def test_graph_stages_run_in_order_and_their_graph_is_searched():
    seen, other = [], load_zoo("squeezenet1_0")

    def first(graph):
        seen.append(graph.name)
        return other

    def second(graph):
        seen.append(graph.name)
        return graph

    result = run_pipeline(RunSpec("resnet18", **FAST), stages=(first, second))
    assert seen == ["resnet18", "squeezenet1_0"]
    assert result.graph is other and result.summary.model == "squeezenet1_0"


def test_search_and_baselines_share_one_cost_cache(monkeypatch):
    caches = []
    run_search, reference_baselines = pipeline.run_search, pipeline.reference_baselines

    def spy_search(*args):
        caches.append(args[-1])
        return run_search(*args)

    def spy_baselines(graph, hw, scheme, cache):
        caches.append(cache)
        hits = cache.hits
        found = reference_baselines(graph, hw, scheme, cache)
        assert cache.hits > hits  # groups the search costed are not costed again
        return found

    monkeypatch.setattr(pipeline, "run_search", spy_search)
    monkeypatch.setattr(pipeline, "reference_baselines", spy_baselines)
    run_pipeline(RunSpec("resnet18", **FAST))
    assert len(caches) == 2 and caches[0] is caches[1]


@pytest.mark.parametrize("bad,match", [
    ({"seed": -1}, "seed must be a non-negative integer"),
    ({"budget": 0}, "budget must be a positive number of plans"),
    ({"search": "sa"}, "unknown search algorithm 'sa'"),
    ({"repair": "get"}, "unknown repair 'get'; choose one of random, alledges"),
    ({"exact_time_limit": 0}, "time limit must be a positive number of seconds or None"),
    ({"exact_time_limit": "10"}, "time limit must be a positive number"),
    ({"exact_caps": 500}, "caps must be an ExactCaps or None"),
])
def test_names_and_numbers_are_refused_before_the_network_is_loaded(bad, match):
    spec = {**FAST, **bad}
    with pytest.raises(InputError, match=match):
        run_pipeline(RunSpec("no_such_network", **spec))


def test_report_adds_the_run_figures_and_keeps_the_document_order():
    result = run_pipeline(RunSpec("resnet18", seed=5, **FAST))
    s = result.summary
    assert isinstance(s, SearchSummary) and s.seed == 5 and s.splitter is None
    assert s.hardware == result.hw.to_dict() and set(s.baselines) >= {"lbl", "segment_dp"}
    doc = s.to_dict()
    assert list(doc) == KEYS  # 12 random plans end above the optimum the run computes
    assert doc["best"]["source"] == "optimum" and doc["best"]["found_at"] is None
    assert doc["search_best"]["found_at"] == s.found_at
    assert doc["search_best"]["dram_bytes"] > doc["best"]["dram_bytes"]
    assert doc["caches"]["plan"]["misses"] == s.distinct_plans
