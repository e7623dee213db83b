"""The OCGGS substitution searches (Pruning, DPP, Sampling, TASO) and the graph cost.

Toy rules on hand-built graphs keep the search spaces small enough to enumerate: Pruning and
DPP must reach the brute-force optimum over every rewrite sequence, Sampling must be
deterministic per seed, TASO must never return a costlier graph, every returned sequence must
replay to the returned graph, and the limit must end a search and be reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from search.baselines import segment_dp
from search.substitution.base import Match, RewriteError, RuleContext, replay
from search.substitution.cost import GraphCost, group_key
from search.substitution.rules import RULES as REAL_RULES
from search.substitution.search import ALGORITHMS, substitute
from simulator.cost import CostCache
from simulator.errors import InputError
from simulator.workload.builder import GraphBuilder
from simulator.workload.graph import ComputeGraph, Op, OpKind
from tests.search.conftest import Net, fire_net, residual_net

# --- toy rules -------------------------------------------------------------------------------

_FIELDS = ("kernel", "stride", "padding", "dilation", "groups", "weight_elems", "macs")


def _name(graph: ComputeGraph, ref: int) -> str:
    return graph.input_names[-ref - 1] if ref < 0 else graph[ref].name


def _rebuild(graph: ComputeGraph, changed: dict[str, list[dict]],
             alias: dict[str, str] | None = None) -> ComputeGraph:
    """`graph` with each op named in `changed` replaced by the op specs given (none: removed),
    inputs renamed through `alias`."""
    alias = alias or {}
    b = GraphBuilder(graph.name)
    for n, s in zip(graph.input_names, graph.input_shapes, strict=True):
        b.add_input(n, s)
    for op in graph:
        specs = changed.get(op.name)
        if specs is None:
            specs = [{"name": op.name, "kind": op.kind, "op_type": op.op_type,
                      "inputs": [_name(graph, r) for r in op.inputs],
                      "output_shape": op.output_shape, "attrs": dict(op.attrs),
                      **{f: getattr(op, f) for f in _FIELDS}}]
        for spec in specs:
            spec = dict(spec)
            spec["inputs"] = [alias.get(i, i) for i in spec["inputs"]]
            b.add_op(**spec)
    return b.build([alias.get(_name(graph, o), _name(graph, o)) for o in graph.outputs])


def _spec(op: Op, graph: ComputeGraph, **changes) -> dict:
    spec = {"name": op.name, "kind": op.kind, "op_type": op.op_type,
            "inputs": [_name(graph, r) for r in op.inputs], "output_shape": op.output_shape,
            "attrs": dict(op.attrs), **{f: getattr(op, f) for f in _FIELDS}}
    spec.update(changes)
    return spec


def _op(graph: ComputeGraph, name: str, match: Match) -> Op:
    try:
        return graph[graph.id_of(name)]
    except KeyError:
        raise RewriteError(f"{match} does not hold: no op {name!r}") from None


class FoldRelu:
    """A ReLU whose producer is a conv read by nothing else becomes the conv's epilogue."""

    name, stage, citation = "fold-relu", "substitute", "toy"

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        out = []
        for op in graph:
            if op.op_type == "relu" and len(op.inputs) == 1 and op.inputs[0] >= 0:
                conv = graph[op.inputs[0]]
                if conv.kind is OpKind.CONV and graph.successors(conv.id) == (op.id,) \
                        and conv.id not in graph.output_set:
                    out.append(Match(self.name, (conv.name, op.name)))
        return out

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        conv, relu = (_op(graph, n, match) for n in match.ops)
        if relu.inputs != (conv.id,) or graph.successors(conv.id) != (relu.id,):
            raise RewriteError(f"{match} does not hold")
        epi = (*conv.attr("epilogue", ()), "relu")
        return _rebuild(graph, {conv.name: [_spec(conv, graph, attrs={"epilogue": epi})],
                                relu.name: []}, {relu.name: conv.name})


def _siblings(graph: ComputeGraph, a: Op, b: Op) -> bool:
    return (a.kind is b.kind is OpKind.CONV and a.inputs == b.inputs and len(a.inputs) == 1
            and a.groups == b.groups == 1 and a.stride == b.stride)


class MergeConvs:
    """Two sibling convs with the same window and epilogue become one conv and two slices
    (TASO's merge of convolutions: the slices keep the convs' names)."""

    name, stage, citation = "merge-convs", "substitute", "toy"

    @staticmethod
    def holds(graph: ComputeGraph, a: Op, b: Op) -> bool:
        return (_siblings(graph, a, b) and a.kernel == b.kernel and a.padding == b.padding
                and a.attrs == b.attrs)

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        return [Match(self.name, (a.name, b.name)) for a in graph for b in graph
                if a.id < b.id and self.holds(graph, a, b)]

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        a, b = (_op(graph, n, match) for n in match.ops)
        if not self.holds(graph, a, b):
            raise RewriteError(f"{match} does not hold")
        n, ca, h, w = a.output_shape
        cb = b.output_shape[1]
        fused = a.name + "+" + b.name
        conv = _spec(a, graph, name=fused, output_shape=(n, ca + cb, h, w),
                     weight_elems=a.weight_elems + b.weight_elems, macs=a.macs + b.macs)
        cut = [{"name": op.name, "kind": OpKind.SLICE, "op_type": "slice", "inputs": [fused],
                "output_shape": op.output_shape, "attrs": {"axis": 1, "start": lo, "end": hi}}
               for op, lo, hi in ((a, 0, ca), (b, ca, ca + cb))]
        return _rebuild(graph, {a.name: [conv, cut[0]], b.name: [cut[1]]})


class EnlargeKernel:
    """A 1x1 conv with a sibling k x k conv gets a k x k kernel (zero-padded; OCGGS Fig. 1's
    first step: it costs more, and enables the merge)."""

    name, stage, citation = "enlarge-kernel", "substitute", "toy"

    @staticmethod
    def holds(graph: ComputeGraph, a: Op, b: Op) -> bool:
        return (_siblings(graph, a, b) and a.kernel == (1, 1) and a.padding == (0,) * 4
                and b.kernel[0] == b.kernel[1] > 1 and b.padding[0] == b.kernel[0] // 2)

    def find(self, graph: ComputeGraph, ctx: RuleContext) -> list[Match]:
        return [Match(self.name, (a.name, b.name)) for a in graph for b in graph
                if a is not b and self.holds(graph, a, b)]

    def apply(self, graph: ComputeGraph, match: Match) -> ComputeGraph:
        a, b = (_op(graph, n, match) for n in match.ops)
        if not self.holds(graph, a, b):
            raise RewriteError(f"{match} does not hold")
        k = b.kernel[0]
        c_out, c_in = a.output_shape[1], a.input_shapes[0][1]
        return _rebuild(graph, {a.name: [_spec(
            a, graph, kernel=b.kernel, padding=b.padding,
            weight_elems=c_out * c_in * k * k + c_out, macs=a.macs * k * k)]})


RULES = [FoldRelu(), MergeConvs(), EnlargeKernel()]
BY_NAME = {r.name: r for r in RULES}


def toy_cost(graph: ComputeGraph) -> float:
    """100 per op that is not a slice (a launch), plus one per 100 weights."""
    return 100.0 * sum(op.kind is not OpKind.SLICE for op in graph) \
        + sum(op.weight_elems for op in graph) / 100


def brute_force(graph: ComputeGraph, rules: Sequence, cost: Callable, k: int,
                context: Callable[[ComputeGraph], RuleContext] = lambda g: RuleContext()) -> float:
    """Least cost over every sequence of at most `k` rewrites (memoised by graph); `context`
    gives the rules' context on a graph."""
    memo: dict[tuple[ComputeGraph, int], float] = {}

    def best(g: ComputeGraph, left: int) -> float:
        if (g, left) not in memo:
            value = cost(g)
            if left:
                for rule in rules:
                    for m in rule.find(g, context(g)):
                        value = min(value, best(rule.apply(g, m), left - 1))
            memo[(g, left)] = value
        return memo[(g, left)]

    return best(graph, k)


# --- graphs ----------------------------------------------------------------------------------


def two_fires() -> ComputeGraph:
    """Two SqueezeNet fire modules in a row (relus, a 1x1 and a 3x3 expand each)."""
    n = Net("two_fires")
    x = n.unary("r0", n.conv("c0", "x", 8))
    for f in ("f1", "f2"):
        s = n.unary(f"{f}.rs", n.conv(f"{f}.squeeze", x, 4, k=1))
        e1 = n.unary(f"{f}.re1", n.conv(f"{f}.e1", s, 8, k=1))
        e3 = n.unary(f"{f}.re3", n.conv(f"{f}.e3", s, 8, k=3))
        x = n.concat(f"{f}.cat", e1, e3)
    return n.build(x)


def parallel_net(branches: int = 4) -> ComputeGraph:
    """`branches` conv-relu branches (1x1 and 3x3 in turn) from one input, added up: their
    relu folds are equal choices."""
    n = Net("parallel")
    outs = [n.unary(f"r{i}", n.conv(f"c{i}", "x", 8, k=3 if i % 2 else 1))
            for i in range(branches)]
    acc = outs[0]
    for i, o in enumerate(outs[1:]):
        acc = n.add(f"add{i}", acc, o)
    return n.build(acc)


GRAPHS = {"fire": fire_net, "two_fires": two_fires, "parallel": parallel_net}


def run(graph: ComputeGraph, algorithm: str, cost: Callable = toy_cost, **opts):
    return substitute(graph, RULES, RuleContext(), cost, algorithm=algorithm, **opts)


# --- the exact searches ----------------------------------------------------------------------


@pytest.mark.parametrize("name, k", [("fire", 1), ("fire", 4), ("parallel", 2),
                                     ("parallel", 3), ("two_fires", 3)])
def test_pruning_and_dpp_reach_the_brute_force_optimum(name: str, k: int) -> None:
    graph = GRAPHS[name]()
    optimum = brute_force(graph, RULES, toy_cost, k)
    for algorithm in ("pruning", "dpp"):
        result = run(graph, algorithm, max_length=k)
        assert not result.limited
        assert result.cost_after == optimum, (algorithm, k)
        assert len(result.matches) <= k
        assert replay(graph, result.matches, BY_NAME) == result.graph
        assert toy_cost(result.graph) == result.cost_after


def test_the_optimum_needs_a_cost_increasing_step() -> None:
    # fire: enlarging e1 to 3x3 costs more, and enables merging e1 with e3 (OCGGS Fig. 1),
    # after folding every relu (merged convs share their epilogue): six rewrites
    graph = fire_net()
    result = run(graph, "dpp", max_length=6)
    assert result.cost_after == brute_force(graph, RULES, toy_cost, 6)
    rules = [m.rule for m in result.matches]
    assert rules.index("enlarge-kernel") < rules.index("merge-convs")
    assert brute_force(graph, [FoldRelu(), MergeConvs()], toy_cost, 6) > result.cost_after


def test_pruning_examines_fewer_sequences_than_there_are() -> None:
    graph = two_fires()
    pruning, dpp = run(graph, "pruning", max_length=3), run(graph, "dpp", max_length=3)
    # of all sequences of <= 3 rewrites only the ordered ones are examined
    assert pruning.sequences == dpp.sequences < _all_sequences(graph, 3)
    assert dpp.stats["reused"] > 0
    assert dpp.stats["applies"] < pruning.stats["applies"]
    assert dpp.stats["locality_violations"] == 0


def _all_sequences(graph: ComputeGraph, k: int, memo: dict | None = None) -> int:
    """Sequences of at most `k` rewrites (the empty one included)."""
    memo = {} if memo is None else memo
    if (graph, k) not in memo:
        memo[(graph, k)] = 1 if k == 0 else 1 + sum(
            _all_sequences(r.apply(graph, m), k - 1, memo)
            for r in RULES for m in r.find(graph, RuleContext()))
    return memo[(graph, k)]


# --- sampling and TASO -----------------------------------------------------------------------


def test_sampling_is_deterministic_per_seed() -> None:
    graph = two_fires()
    a, b = (run(graph, "sampling", seed=3, max_length=4) for _ in range(2))
    assert (a.matches, a.cost_after, a.graphs_costed) == (b.matches, b.cost_after,
                                                         b.graphs_costed)


def test_sampling_seeds_choose_among_equal_choices() -> None:
    graph = parallel_net(4)  # four relu folds of equal effect: which one first is a tie
    results = [substitute(graph, [FoldRelu()], RuleContext(), toy_cost, seed=s, sample_size=2)
               for s in range(6)]
    assert len({r.matches for r in results}) > 1
    assert {r.cost_after for r in results} == {brute_force(graph, [FoldRelu()], toy_cost, 4)}


@pytest.mark.parametrize("name, k", [("fire", 10), ("parallel", 6), ("two_fires", 3)])
def test_sampling_reaches_the_optimum_through_a_cost_increase(name: str, k: int) -> None:
    graph = GRAPHS[name]()
    result = run(graph, "sampling", max_length=k)
    assert result.cost_after == brute_force(graph, RULES, toy_cost, k)
    assert replay(graph, result.matches, BY_NAME) == result.graph


def test_taso_without_relaxation_misses_what_sampling_finds() -> None:
    graph = fire_net()
    plain = run(graph, "greedy", alpha=1.0)
    relaxed = run(graph, "greedy")  # alpha = 1.05 admits the enlarging step
    sampling = run(graph, "sampling")
    assert sampling.cost_after == relaxed.cost_after < plain.cost_after
    assert "enlarge-kernel" not in {m.rule for m in plain.matches}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_no_search_returns_a_costlier_graph(algorithm: str) -> None:
    graph = two_fires()

    def fewer_is_worse(g: ComputeGraph) -> float:  # every toy rewrite costs more here
        return (1e4 / len(g) + sum(op.kind is OpKind.SLICE for op in g) * 1e3
                + sum(op.weight_elems for op in g) / 1e3)

    result = run(graph, algorithm, cost=fewer_is_worse, max_length=3, max_graphs=200)
    assert result.cost_after == result.cost_before == fewer_is_worse(graph)
    assert result.matches == () and result.graph == graph
    assert result.graphs_costed > 1


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_search_returns_a_replayable_improvement(algorithm: str) -> None:
    graph = two_fires()
    result = run(graph, algorithm, max_length=3)
    assert result.cost_after < result.cost_before
    assert replay(graph, result.matches, BY_NAME) == result.graph
    assert result.report()["rewrites"] == len(result.matches)


# --- limits and options ----------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_limit_on_graphs_ends_the_search_and_is_reported(algorithm: str) -> None:
    graph = two_fires()
    result = run(graph, algorithm, max_graphs=4)
    assert result.limited and result.report()["limited"]
    assert result.graphs_costed == 4
    assert result.cost_after <= result.cost_before
    assert replay(graph, result.matches, BY_NAME) == result.graph
    assert not run(fire_net(), algorithm, max_length=2).limited


def test_a_time_limit_ends_the_search() -> None:
    @dataclass
    class Slow:
        calls: int = 0

        def __call__(self, g: ComputeGraph) -> float:
            self.calls += 1
            time.sleep(0.02)
            return toy_cost(g)

    result = run(two_fires(), "pruning", cost=Slow(), max_length=6, time_limit=0.1)
    assert result.limited and result.seconds < 1.0


@pytest.mark.parametrize("bad, message", [
    ({"algorithm": "annealing"}, "unknown substitution search"),
    ({"beam": 3}, "unknown substitution search option"),
    ({"max_length": -1}, "max_length"),
    ({"sample_size": 1}, "sample_size"),
    ({"alpha": 0.5}, "alpha"),
    ({"max_graphs": 0}, "max_graphs"),
    ({"time_limit": 0}, "time_limit"),
])
def test_bad_options_are_input_errors(bad: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        substitute(fire_net(), RULES, RuleContext(), toy_cost, **bad)


def test_without_a_cost_the_machine_is_needed() -> None:
    with pytest.raises(InputError, match="needs a cost"):
        substitute(fire_net(), RULES)


# --- the graph cost --------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["lbdf", "brr"])
def test_graph_cost_is_the_segment_dp_dram_across_rewritten_graphs(hw, scheme: str) -> None:
    machine = hw(32 * 1024)
    cost = GraphCost(machine, scheme)
    graphs = [fire_net(), residual_net()]
    graphs += [r.apply(graphs[0], m) for r in RULES for m in r.find(graphs[0], RuleContext())]
    for g in graphs:
        assert cost(g) == segment_dp(g, CostCache(g, machine, scheme)).dram_bytes
    assert cost.graphs.misses == len(set(graphs))
    if scheme == "lbdf":  # a graph costs fewer groups after one that differs in a few ops
        cold = GraphCost(machine, scheme)
        cold(graphs[-1])
        assert 0 < cost.groups.hits and cold.groups.misses > 0
        warm = GraphCost(machine, scheme)
        warm(graphs[0])
        before = warm.groups.misses
        warm(graphs[-1])
        assert warm.groups.misses - before < cold.groups.misses
    else:
        assert cost.groups is None


@pytest.mark.parametrize("buffer", [2048, 32 * 1024])
def test_shared_cache_has_what_a_cost_cache_has(hw, buffer: int) -> None:
    machine, cost = hw(buffer), GraphCost(hw(buffer), "lbdf")
    for graph in (oversized_net(), fire_net(), two_fires()):
        shared, plain = cost.cache(graph), CostCache(graph, machine, "lbdf")
        assert shared.unfusable == plain.unfusable
        assert shared.references == plain.references
        for o in range(len(graph)):
            assert shared.run((o,)) == plain.run((o,))
    assert bool(cost.cache(oversized_net()).unfusable) == (buffer < 4640)  # c1's weights


def test_group_keys_ignore_ids_and_names_but_not_the_boundary() -> None:
    g = fire_net()
    folded = FoldRelu().apply(g, Match("fold-relu", ("e3", "re3")))  # renumbers later ops
    out = g.id_of("out")
    assert group_key(g, (g.id_of("cat"), out)) == \
        group_key(folded, (folded.id_of("cat"), folded.id_of("out")))
    # the same op, but its tensor leaves the group in one case and not in the other
    alone = group_key(g, (g.id_of("e1"),))
    assert group_key(g, (g.id_of("e1"), g.id_of("re1")))[0] != alone[0]


def test_the_default_cost_reaches_segment_dp_gains(hw) -> None:
    machine = hw(32 * 1024)
    graph = fire_net()
    result = substitute(graph, RULES, RuleContext(machine, "lbdf"), algorithm="dpp",
                        max_length=2)
    fresh = segment_dp(result.graph, CostCache(result.graph, machine, "lbdf")).dram_bytes
    assert result.cost_after == fresh <= result.cost_before


# --- the real rules --------------------------------------------------------------------------


def oversized_net() -> ComputeGraph:
    """conv 16->32 3x3 + relu, conv 32->16 1x1 + relu: the first conv's weights (4,640) fit
    no buffer of 4 KiB or less, so operator fission has something to split."""
    n = Net("oversized", (1, 16, 16, 16))
    return n.build(n.unary("r2", n.conv("c2", n.unary("r1", n.conv("c1", "x", 32)), 16, k=1)))


@pytest.mark.parametrize("buffer", [2048, 4096])
def test_real_rules_exact_searches_agree_with_brute_force(hw, buffer: int) -> None:
    machine, graph = hw(buffer), oversized_net()
    rules = list(REAL_RULES.values())
    cost = GraphCost(machine, "lbdf")
    found = [m for r in rules for m in r.find(graph, RuleContext(machine, "lbdf"))]
    assert {"fuse-one-to-one", "fission-out-channels"} <= {m.rule for m in found}
    optimum = brute_force(graph, rules, cost, 3,
                          lambda g: RuleContext(machine, "lbdf", cost.cache(g)))
    for algorithm in ALGORITHMS:
        result = substitute(graph, rules, RuleContext(machine, "lbdf"), cost,
                            algorithm=algorithm, max_length=3)
        if algorithm != "greedy":  # TASO has no length bound: it may do better
            assert result.cost_after >= optimum
        if algorithm in ("pruning", "dpp"):
            assert result.cost_after == optimum
            assert result.stats["locality_violations"] == 0
        assert replay(graph, result.matches, REAL_RULES) == result.graph
