"""Graph JSON round trip (issue [workloads-2], Deliver 2): ``from_json(to_json(g)) == g`` for
every zoo network, its graph after the graph stages and imported models, and every command
loads the graph files that ``inspect --format json``, ``rewrite --out`` and ``optimize --out``
write.

The default tier checks a CNN with squeeze-and-excitation, both transformers' kinds and the
rewritten graphs of two of them; the slow tier every zoo network. Graphs are built once per
module (`load_zoo` caches them per shape)."""

from __future__ import annotations

import json

import pytest

from simulator.workload.graph import ComputeGraph
from simulator.workload.loader import load_zoo
from simulator.workload.zoo import zoo_names

pytestmark = pytest.mark.xdist_group(name="graph_roundtrip")

FAST = ("mobilenet_v3_small", "deit_s", "bert_base", "llama_tiny_prefill", "llama_tiny_decode")
SMALL_SHAPES = {"bert_base": (1, 32, 768),  # the same ops as at 128 tokens, a quarter the work
                "llama_tiny_prefill": (1, 16), "llama_tiny_decode": (1, 1, 16)}


def _zoo(name: str) -> ComputeGraph:
    return load_zoo(name, SMALL_SHAPES.get(name))


def _assert_round_trip(g: ComputeGraph) -> None:
    back = ComputeGraph.from_json(g.to_json())
    assert back == g
    assert hash(back) == hash(g)
    assert ComputeGraph.from_json(g.to_json(indent=1)) == g
    assert ComputeGraph.from_dict(json.loads(g.to_json())) == g


@pytest.mark.parametrize("name", FAST)
def test_zoo_round_trip(name):
    _assert_round_trip(_zoo(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in zoo_names() if n not in FAST])
def test_zoo_round_trip_every_network(name):
    _assert_round_trip(_zoo(name))


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "deit_s", "llama_tiny_prefill"])
def test_rewritten_graphs_round_trip(name):
    from search.substitution.stages import run_stages

    staged = run_stages(_zoo(name), "fuse")
    assert staged.graph != _zoo(name)  # epilogues, composed transposes: tuple attributes
    _assert_round_trip(staged.graph)


def test_nested_and_special_attributes_round_trip():
    from simulator.workload.builder import GraphBuilder
    from simulator.workload.graph import OpKind

    b = GraphBuilder("attrs")
    b.add_input("x", (1, 4, 8, 8))
    b.add_op("s", OpKind.SLICE, "slice", ["x"], (1, 2, 8, 8),
             attrs={"axis": [1], "start": (0,), "end": [2], "step": 1,
                    "epilogue": ["relu", "mul(const_side=right,scalar=0.5)"],
                    "perm": ((0, 1), (2, 3)), "flag": True, "none": None, "eps": 1e-6})
    _assert_round_trip(b.build(["s"]))


def test_commands_load_what_they_write(cli, tmp_path):
    """inspect --format json, rewrite --out and optimize --out (graph.json) write graphs that
    evaluate loads back, equal to the graph written."""
    code, out, err = cli("inspect", "deit_s", "--format", "json")
    assert code == 0, err
    inspected = tmp_path / "deit_s.json"
    inspected.write_text(out)
    assert ComputeGraph.from_json(out) == load_zoo("deit_s")

    rewritten = tmp_path / "rewritten.json"
    code, _, err = cli("rewrite", str(inspected), "--stages", "fuse", "--out", str(rewritten))
    assert code == 0, err
    g = ComputeGraph.from_json(rewritten.read_text())
    _assert_round_trip(g)

    code, _, err = cli("evaluate", str(rewritten), "--buffer", "2MiB")
    assert code == 0, err

    out_dir = tmp_path / "opt"
    code, _, err = cli("optimize", "mobilenet_v3_small@96", "--buffer", "256KiB",
                       "--graph-stages", "fuse", "--search", "rs", "--budget", "20",
                       "--out", str(out_dir))
    assert code == 0, err
    graph_json = out_dir / "graph.json"
    assert graph_json.is_file()
    _assert_round_trip(ComputeGraph.from_json(graph_json.read_text()))
    code, _, err = cli("evaluate", str(graph_json), "--buffer", "256KiB")
    assert code == 0, err
