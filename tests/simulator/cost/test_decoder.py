"""The Llama-style decoder's two phases through the cost models and the simulator
(docs/cost-model.md, section 9.8): the worked examples' DRAM derived by hand (the KV cache read
per decode step and written by prefill, the embedding reading the rows of its ids), token rows
through grouped-query attention, and simulated DRAM equal to the analytic F_D on random
fitting plans under LBDF, BRR, layer by layer and hybrid."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from simulator.cost import CostCache, evaluate_plan
from simulator.cost.lbl import LoopOrder, layer_tiling
from simulator.cost.rows import row_deps
from simulator.cost.traffic import compulsory_bytes
from simulator.engine import simulate
from simulator.plan import PartitionPlan, layer_by_layer
from simulator.workload.execute import execute
from simulator.workload.export_import import from_export, from_export_with_params
from simulator.workload.graph import ComputeGraph
from simulator.workload.zoo.llama import LlamaConfig, LlamaDecoder, example_inputs
from tests.simulator.engine.test_simulate import fitting_segments, hw

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: 1 layer, D = 8, 2 query heads sharing 1 K/V head of 4, SwiGLU 8, 16 token ids
TINY = LlamaConfig(layers=1, hidden=8, heads=2, kv_heads=1, intermediate=8, vocab=16)
#: 2 layers, D = 16, 4 query heads, 2 K/V heads of 4, SwiGLU 32, 64 token ids
SMALL = LlamaConfig(layers=2, hidden=16, heads=4, kv_heads=2, intermediate=32, vocab=64)
_GRAPHS: dict[tuple[LlamaConfig, str, tuple[int, ...]], ComputeGraph] = {}


def _graph(cfg: LlamaConfig, phase: str, shape: tuple[int, ...]) -> ComputeGraph:
    key = (cfg, phase, shape)
    if key not in _GRAPHS:
        torch.manual_seed(0)
        _GRAPHS[key] = from_export(LlamaDecoder(cfg).eval(),
                                   example=example_inputs(cfg, phase, shape), name=phase)
    return _GRAPHS[key]


def _one_group(graph: ComputeGraph, scheme: str) -> tuple[int, int]:
    """(analytic, simulated) DRAM bytes of the whole graph as one group at 1 MiB, 1 B/elem."""
    config = hw(1 << 20)
    plan = PartitionPlan.of([list(range(len(graph)))])
    cost = evaluate_plan(graph, plan, config, scheme)
    assert cost.valid
    return cost.dram_bytes, simulate(graph, plan, config, scheme, record=False).dram_bytes


# weights of TINY read once (section 9.8): 3 RMSNorms 3 x 8; Q 8 x 8, K and V 8 x 4, O 8 x 8;
# gate, up, down 3 x 8 x 8; LM head 8 x 16
_WEIGHTS = 3 * 8 + (64 + 32 + 32 + 64) + 3 * 64 + 8 * 16  # 536


@pytest.mark.parametrize("scheme", ["lbdf", "brr", "hybrid"])
def test_decode_step_worked_example(scheme):
    """Decode at C = 4 as one group: reads the id (1 B), the cached K and V (1 x 1 x 4 x 4 =
    16 B each), the weights (536 B), the embedding's one row (8 B, not the 128 B table) and
    the rotary tables at the one position (q and k times cos and sin: 4 x 4 B); writes the
    logits (16 B) and the token's K and V (4 B each): 33 + 536 + 8 + 16 + 24 = 617 B, the
    compulsory traffic; the simulator moves the same bytes."""
    graph = _graph(TINY, "decode", (1, 1, 4))
    assert _one_group(graph, scheme) == (617, 617)
    assert compulsory_bytes(graph, range(len(graph)), 1) == 617
    assert graph.total_weights - sum(op.weight_reads for op in graph) == 128 - 8


def test_decode_reads_the_cache_once_per_step():
    """Each cached token costs 2 x layers x kv_heads x head_dim bytes per step (K and V):
    C = 4 -> 8 adds 2 x 1 x 1 x 4 x 4 = 32 B (617 -> 649); SMALL (2 layers, 2 K/V heads of
    4) adds 2 x 2 x 2 x 4 = 32 B per cached token."""
    assert _one_group(_graph(TINY, "decode", (1, 1, 8)), "lbdf") == (649, 649)
    short, long = (_one_group(_graph(SMALL, "decode", (1, 1, c)), "lbdf")[0] for c in (4, 12))
    assert long - short == 8 * 32


@pytest.mark.parametrize("scheme", ["lbdf", "brr", "hybrid"])
def test_prefill_worked_example(scheme):
    """Prefill at L = 4 as one group: reads the 4 ids, the weights (536 B), the embedding's 4
    rows (32 B) and the rotary tables at 4 positions (4 x 16 B); the causal mask is an op with
    no weights; writes the last token's logits (16 B) and the KV cache of 4 tokens (16 B each
    of K and V): 4 + 536 + 32 + 64 + 48 = 684 B."""
    graph = _graph(TINY, "prefill", (1, 4))
    assert _one_group(graph, scheme) == (684, 684)
    masks = [op for op in graph if op.op_type == "causal_mask"]
    assert len(masks) == 1 and masks[0].weight_elems == 0
    assert masks[0].attrs == (("group", 2), ("offset", 0))


def test_embedding_reads_the_rows_of_its_ids_in_chunks():
    """The embedding alone at L = 4 (prefill): reads 4 ids and 4 rows of 8 B, writes 32 B:
    68 B at any buffer. At 20 B it runs in chunks (each with its ids' table rows): 3 chunks
    need 11 + 2 + 11 = 24 B > 20, 4 chunks 8 + 1 + 8 = 17 B; the simulator agrees."""
    graph = _graph(TINY, "prefill", (1, 4))
    (emb,) = [op.id for op in graph if op.op_type == "embedding"]
    assert graph[emb].weight_elems == 16 * 8 and graph[emb].weight_reads == 4 * 8
    deps = row_deps(graph)
    assert deps.axes.of[-1] == 1 and deps.height_of[-1] == 4  # the ids: 4 token rows
    assert deps.height_of[emb] == 4 and deps.row_elems_of[emb] == 8
    t = layer_tiling(graph, emb, replace(hw(20), buffer_bytes=20))
    assert (t.order, t.bands, t.buffer_bytes, t.fits) == (LoopOrder.CHUNKS, 4, 17, True)
    assert (t.act_read, t.weight_read, t.weight_buffer_bytes) == (4, 32, 8)
    alone = graph.subgraph([emb])
    report = simulate(alone, layer_by_layer(alone), hw(20), "lbl", record=False)
    (group,) = report.groups
    assert group.peak_buffer_bytes == 17 and group.dram_bytes == 68
    assert group.dram_read == {alone.input_names[0]: 4, "embed_tokens.weights": 32}


def test_grouped_query_rows_follow_the_tokens():
    """Prefill, SMALL at L = 4: the query heads sharing a K/V head are stacked token-major,
    (1, 2, 4 x 2, 4): 8 rows, row r of token r // 2, read from the token rows of the
    rotated queries; the scores' rows stream, the keys are read whole."""
    graph = _graph(SMALL, "prefill", (1, 4))
    deps = row_deps(graph)
    (scores,) = [op for op in graph if op.kind.value == "matmul"
                 and op.output_shape == (1, 2, 8, 4)][:1]
    q, kt = scores.inputs
    assert deps.height_of[q] == 8 and deps.height_of[scores.id] == 8
    assert deps.lo[scores.id][0].tolist() == list(range(8))
    assert deps.lo[scores.id][1].tolist() == [0] * 8 and deps.hi[scores.id][1].tolist() == [3] * 8


def test_decoder_executes_as_the_module():
    """Both phases' graphs compute the module's outputs (the executor)."""
    torch.manual_seed(0)
    module = LlamaDecoder(SMALL).eval()
    for phase, shape in (("prefill", (1, 6)), ("decode", (2, 1, 5))):
        example = example_inputs(SMALL, phase, shape)
        graph, params, _ = from_export_with_params(module, example=example, name=phase)
        with torch.no_grad():
            want = module(*example)
        got = execute(graph, params, [t.float() for t in example])
        assert len(got) == len(want) == 1 + 2 * SMALL.layers
        for a, b in zip(got, want, strict=True):
            assert float((a - b).abs().max()) <= 1e-5 * float(b.abs().max())


def test_grouped_rows_equal_scaled_dot_product_attention():
    """The stacked grouped-query product is the attention torch computes with enable_gqa."""
    from simulator.workload.zoo.llama import Attention

    torch.manual_seed(0)
    attn = Attention(SMALL).eval()
    x = torch.randn(1, 5, 16)
    cos, sin = torch.ones(1, 5, 1, 4), torch.zeros(1, 5, 1, 4)  # no rotation
    with torch.no_grad():
        out, k, v = attn(x, cos, sin)
        q = attn.q_proj(x).reshape(1, 5, 4, 4).transpose(1, 2)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                               enable_gqa=True)
        ref = attn.o_proj(ref.transpose(1, 2).reshape(1, 5, 16))
    assert torch.allclose(out, ref, atol=1e-6)


CASES = [(phase, shape, scheme, granularity)
         for phase, shape in (("prefill", (1, 8)), ("decode", (1, 1, 8)))
         for scheme, granularity in (("lbdf", "pixel"), ("lbdf", "row"), ("brr", "pixel"),
                                     ("lbl", "pixel"), ("hybrid", "pixel"))]


@pytest.mark.parametrize(("phase", "shape", "scheme", "granularity"), CASES,
                         ids=["-".join((c[0], c[2], c[3])) for c in CASES])
@pytest.mark.parametrize("buffer", [2048, 64 * 1024])
def test_simulation_moves_the_analytic_dram_bytes(phase, shape, scheme, granularity, buffer):
    """DRAM per group and in all equal in the analytic model and the simulator; each group's
    peak equals its F_beta, except the prefill's last-token select, whose F_beta counts the
    rows before the last token (cost-model.md, section 10): never below the simulated peak."""
    graph = _graph(SMALL, phase, shape)
    config = hw(buffer, lbdf_buffer=granularity)
    cache = CostCache(graph, config, scheme)
    plan = layer_by_layer(graph) if scheme == "lbl" else \
        fitting_segments(graph, cache, random.Random(0), 10)
    analytic = evaluate_plan(graph, plan, config, scheme, cache)
    assert analytic.valid
    report = simulate(graph, plan, config, scheme, record=False)
    assert [g.dram_bytes for g in report.groups] == \
        [analytic.groups[g.index].dram_bytes for g in report.groups]
    assert report.dram_bytes == analytic.dram_bytes
    for g in report.groups:
        want = analytic.groups[g.index].buffer_bytes
        if any(graph[o].op_type == "slice" and graph[o].name == "select" for o in g.ops):
            assert g.peak_buffer_bytes <= want
        else:
            assert g.peak_buffer_bytes == want
