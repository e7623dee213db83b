"""An embedding run on its own under split buffers (docs/cost-model.md, sections 4.5 and
9.8): the table rows each chunk reads are weights, in the fit check, in F_beta's weight part
and in the simulator's weight buffer, so the simulated peaks of each buffer stay within the
analytic parts and the DRAM bytes are the model's."""

from __future__ import annotations

import pytest

from simulator.cost import CostCache, evaluate_plan
from simulator.cost.lbl import LoopOrder, layer_tiling
from simulator.engine import simulate
from simulator.plan import layer_by_layer
from tests.simulator.cost.test_decoder import TINY, _graph
from tests.simulator.cost.test_split_buffers import split
from tests.simulator.cost.test_tiled_layers import hw

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _embedding(tokens: int = 4):
    """TINY's embedding alone at L = `tokens` (prefill): L ids, L table rows of 8 B."""
    graph = _graph(TINY, "prefill", (1, tokens))
    (emb,) = [op.id for op in graph if op.op_type == "embedding"]
    return graph.subgraph([emb])


@pytest.mark.parametrize("tokens, caps, bands, weights, acts", [
    # L = 4: rows counted as activations, 3 chunks (11 + 2 + 11 = 24 B of activations) looked
    # like the fewest and the simulator held 24 B of activations against F_beta's 13; as
    # weights 2 chunks fit: 16 B of rows, 16 + 2 = 18 B of activations
    (4, (24, 24), 2, 16, 18),
    # L = 8: rows as activations, 1 chunk (64 + 8 + 64 = 136 B) fit the activations but its
    # 64 B of rows exceed the 16 B weight buffer: the op could not run; as weights 4 chunks
    # fit (16 B of rows, 16 + 2 B of activations)
    (8, (16, 256), 4, 16, 18),
])
def test_the_table_rows_are_weights_in_the_fit_and_the_simulator(tokens, caps, bands, weights,
                                                                  acts):
    graph = _embedding(tokens)
    machine = split(*caps)
    t = layer_tiling(graph, 0, machine)
    assert (t.order, t.fits, t.bands) == (LoopOrder.CHUNKS, True, bands)
    assert (t.weight_buffer_bytes, t.buffer_bytes - t.weight_buffer_bytes) == (weights, acts)
    assert t.weight_buffer_bytes <= caps[0] and t.buffer_bytes - t.weight_buffer_bytes <= caps[1]
    cache = CostCache(graph, machine, "lbl")
    plan = layer_by_layer(graph)
    cost = evaluate_plan(graph, plan, machine, "lbl", cache)
    assert cost.valid and cost.dram_bytes == 17 * tokens  # L ids, 8L B of rows, 8L B written
    report = simulate(graph, plan, machine, "lbl", record=False, cache=cache)
    assert report.dram_bytes == cost.dram_bytes
    (group,) = report.groups
    assert dict(group.peak_by_buffer) == {"weights": weights, "activations": acts}
    assert group.dram_read == {graph.input_names[0]: tokens, "embed_tokens.weights": 8 * tokens}


def test_a_shared_buffer_is_unchanged():
    """Shared 20 B: 4 chunks of 8 + 1 + 8 = 17 B, as before (test_decoder)."""
    graph = _embedding()
    t = layer_tiling(graph, 0, hw(20))
    assert (t.bands, t.buffer_bytes, t.weight_buffer_bytes, t.fits) == (4, 17, 8, True)
    (group,) = simulate(graph, layer_by_layer(graph), hw(20), "lbl", record=False).groups
    assert group.peak_buffer_bytes == 17 and group.peak_by_buffer == ()
