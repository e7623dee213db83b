"""Language models named by ``module:callable`` get token ids, not floats (what the CLI's
``--input-shape`` gives them), and an infinite attribute of any importer round-trips through
the graph document (`graph.freeze_attrs`)."""

from __future__ import annotations

import math
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from simulator.workload.execute import execute
from simulator.workload.export_import import from_export_with_params
from simulator.workload.graph import FLOAT32_MAX, ComputeGraph
from simulator.workload.loader import load
from simulator.workload.torch_import import from_torch

_MODULE = '''
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(32, 8)
        self.pos = nn.Embedding(64, 8)
        self.head = nn.Linear(8, 32)

    def forward(self, ids):
        return self.head(self.embed(ids) + self.pos.weight[: ids.shape[1]])
'''


class TinyLM(nn.Module):
    """An embedding, a learned position table and an LM head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, 8)
        self.head = nn.Linear(8, 32)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids))


def test_a_language_model_named_by_module_callable_gets_token_ids(tmp_path, monkeypatch):
    """``fusion-dse inspect tinylm_mod:TinyLM --input-shape 1,6`` loads: the input is 6 token
    ids (below the smallest table, 32) read by an embedding, not 6 floats."""
    (tmp_path / "tinylm_mod.py").write_text(_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        graph = load("tinylm_mod:TinyLM", "1,6")
    finally:
        sys.modules.pop("tinylm_mod", None)
    assert graph.input_shapes == ((1, 6),)
    (emb,) = [op for op in graph if op.op_type == "embedding"]
    assert emb.inputs == (-1,) and emb.weight_elems == 32 * 8 and emb.weight_reads == 6 * 8


def test_token_ids_execute_as_the_module():
    torch.manual_seed(0)
    module = TinyLM().eval()
    graph, params, _ = from_export_with_params(module, (2, 5))
    ids = torch.randint(0, 32, (2, 5))
    with torch.no_grad():
        want = module(ids)
    (got,) = execute(graph, params, ids.float())
    assert torch.allclose(got, want, atol=1e-6)


class _InfPad(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(F.pad(x, (1, 1, 1, 1), value=-math.inf), 3, 1)


@pytest.mark.parametrize("importer", ["fx", "export"])
def test_an_infinite_attribute_round_trips(importer):
    """A pad of -inf (TF-"same" max pooling) is float32's lowest finite value in the graph of
    either torch importer, so ``from_json(to_json(g)) == g``."""
    module = _InfPad().eval()
    if importer == "fx":
        graph = from_torch(module, (1, 2, 5, 5))
    else:
        graph = from_export_with_params(module, (1, 2, 5, 5))[0]
    values = [v for op in graph for _, v in op.attrs if isinstance(v, float)]
    assert -FLOAT32_MAX in values and not any(math.isinf(v) for v in values)
    assert ComputeGraph.from_json(graph.to_json()) == graph
