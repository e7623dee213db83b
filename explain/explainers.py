"""Graph-explanation techniques behind the `Explainer` protocol of `explain.tree_split`.

Each explainer receives a fusion group the cost model says does not fit, encodes it exactly as
the validity GNN was trained (`explain.features`, at the hardware's buffer size), and ranks the
group's edges by the weight the explanation gives them (most responsible for the predicted
invalidity first). Only edges of the group are returned.

* `GnnExplainerGET`: PyG's GNNExplainer (Ying et al. 2019) on the shipped GNN,
  ``explanation_type="model"``: an edge mask optimised afresh for every group.
* `PgExplainerGET`: PyG's PGExplainer (Luo et al. 2020). It only supports
  ``explanation_type="phenomenon"`` (explaining a given target, here "does not fit") and must
  be trained first: `train_pg_explainer` fits its edge-scoring MLP on invalid groups of the GNN
  dataset, and the parameters ship next to the GNN checkpoints.

Torch randomness (mask initialisation) is drawn inside `torch.random.fork_rng` from a seed taken
from the search's generator: runs are reproducible and the global torch state is untouched.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch_geometric.explain import Explainer
from torch_geometric.explain.algorithm import GNNExplainer, PGExplainer

from explain import checkpoint as _checkpoint
from explain.checkpoint import load_explainer_checkpoint, load_weights, save_explainer_checkpoint
from explain.features import encode_group, node_features
from explain.predict import load_predictor
from explain.solutions import Edge
from explain.train import threads
from simulator.cost import CostCache
from simulator.partition import Group
from simulator.scheme import FUSED_SCHEMES
from simulator.workload.graph import ComputeGraph

__all__ = ["GnnExplainerGET", "PgExplainerGET", "graph_stages_for", "group_tensors",
           "pg_checkpoint",
           "train_pg_explainer"]

_MODEL_CONFIG = {"mode": "binary_classification", "task_level": "graph", "return_type": "raw"}


def group_tensors(graph: ComputeGraph, ops: Group, buffer_bytes: int, dtype_bytes: int,
                  ) -> tuple[torch.Tensor, torch.Tensor, list[Edge]]:
    """Node features, local edge index and the global (i, j) of each edge of a group."""
    enc = encode_group(graph, ops, dtype_bytes)
    x = torch.from_numpy(node_features(enc.base, enc.sizes, float(buffer_bytes)))
    edge_index = torch.from_numpy(enc.edge_index)
    order = sorted(ops)
    edges = [(order[a], order[b]) for a, b in enc.edge_index.T.tolist()]
    return x, edge_index, edges


def _ranked(edges: list[Edge], mask: torch.Tensor) -> list[Edge]:
    weights = mask.detach().reshape(-1).tolist()
    order = sorted(range(len(edges)), key=lambda k: (-weights[k], edges[k]))
    return [edges[k] for k in order]


def _explain_with(make, graph: ComputeGraph, ops: Group, cache: CostCache,
                  rng: np.random.Generator, stages: str, **kwargs) -> list[Edge]:
    """Encode the group, run a PyG explainer on it (seeded, one thread) and rank its edges;
    `make(scheme, stages)` gives the explainer."""
    x, edge_index, edges = group_tensors(graph, ops, cache.hw.buffer_bytes,
                                         cache.hw.dtype_bytes)
    if not edges:
        return []
    with torch.random.fork_rng(), threads(1):  # model loading draws initial weights too
        explainer = make(cache.scheme, stages)
        torch.manual_seed(_seed(rng))
        explanation = explainer(x, edge_index, **kwargs)
    return _ranked(edges, explanation.edge_mask)


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31 - 1))


def graph_stages_for(given: str | None, graph: ComputeGraph) -> str:
    """The graph stage whose checkpoints explain `graph`: `given`, else the one that suits the
    graph (`explain.checkpoint.graph_stages_of`: ``fuse`` once activations are fused)."""
    return _checkpoint.checkpoint_graph_stages(given) if given is not None \
        else _checkpoint.graph_stages_of(graph)


@dataclass
class GnnExplainerGET:
    """GNNExplainer on the validity GNN (the paper's GNNE).

    Attributes:
        graph_stages: The GNN's graph stage (``none`` or ``fuse``); None: the one that suits
            each graph explained (`graph_stages_for`).
    """

    epochs: int = 100
    lr: float = 0.01
    name: str = "gnne"
    graph_stages: str | None = None
    _explainers: dict[tuple[str, str], Explainer] = field(default_factory=dict, repr=False)

    def supports(self, scheme: str) -> bool:
        """LBDF and BRR: the dataflows with a shipped GNN."""
        return scheme in FUSED_SCHEMES

    def _explainer(self, scheme: str, stages: str) -> Explainer:
        if (scheme, stages) not in self._explainers:
            model = load_predictor(scheme, graph_stages=stages).model
            self._explainers[scheme, stages] = Explainer(
                model=model, algorithm=GNNExplainer(epochs=self.epochs, lr=self.lr),
                explanation_type="model", edge_mask_type="object", node_mask_type=None,
                model_config=_MODEL_CONFIG)
        return self._explainers[scheme, stages]

    def explain(self, graph: ComputeGraph, ops: Group, cache: CostCache,
                rng: np.random.Generator) -> list[Edge]:
        """Group edges by GNNExplainer's edge mask, highest first."""
        return _explain_with(self._explainer, graph, ops, cache, rng,
                             graph_stages_for(self.graph_stages, graph))


def pg_checkpoint(scheme: str, graph_stages: str = "none") -> Path:
    """Where the trained PGExplainer parameters of `scheme` for `graph_stages` ship."""
    suffix = _checkpoint.GRAPH_STAGE_SUFFIX[_checkpoint.checkpoint_graph_stages(graph_stages)]
    return _checkpoint.CHECKPOINT_DIR / f"pg-{scheme}{suffix}.pt"


@dataclass
class PgExplainerGET:
    """PGExplainer (phenomenon: "does not fit"), with parameters trained on the GNN dataset.

    Attributes:
        checkpoint: Parameters to use instead of the shipped ones (`pg_checkpoint`); they must
            explain the GNN of the graph stage in use.
        graph_stages: The graph stage of the GNN and parameters (``none`` or ``fuse``); None:
            the one that suits each graph explained (`graph_stages_for`).
    """

    name: str = "pg"
    checkpoint: Path | None = None
    graph_stages: str | None = None
    _explainers: dict[tuple[str, str], Explainer] = field(default_factory=dict, repr=False)

    def _path(self, scheme: str, stages: str | None = None) -> Path:
        return Path(self.checkpoint) if self.checkpoint is not None \
            else pg_checkpoint(scheme, stages or self.graph_stages or "none")

    def supports(self, scheme: str) -> bool:
        """Dataflows with a shipped GNN and trained PGExplainer parameters."""
        return scheme in FUSED_SCHEMES and self._path(scheme).is_file()

    def _explainer(self, scheme: str, stages: str) -> Explainer:
        if (scheme, stages) not in self._explainers:
            path = self._path(scheme, stages)
            payload = load_explainer_checkpoint(
                path, "pg", scheme, lambda: load_predictor(scheme, graph_stages=stages))
            # No epochs left to train: PyG's "trained?" check (every epoch of `epochs` run)
            # holds for parameters loaded from a file without touching its private state.
            algorithm = load_weights(_pg_algorithm(epochs=0), payload["state_dict"],
                                     f"PGExplainer parameters {str(path)!r}")
            self._explainers[scheme, stages] = _pg_explainer(
                load_predictor(scheme, graph_stages=stages).model, algorithm)
        return self._explainers[scheme, stages]

    def explain(self, graph: ComputeGraph, ops: Group, cache: CostCache,
                rng: np.random.Generator) -> list[Edge]:
        """Group edges by PGExplainer's edge mask for the target "does not fit"."""
        return _explain_with(self._explainer, graph, ops, cache, rng,
                             graph_stages_for(self.graph_stages, graph),
                             target=torch.tensor([0]))


def _pg_algorithm(epochs: int) -> PGExplainer:
    return PGExplainer(epochs=epochs, lr=0.003)


def _pg_explainer(model: torch.nn.Module, algorithm: PGExplainer) -> Explainer:
    return Explainer(model=model, algorithm=algorithm, explanation_type="phenomenon",
                     edge_mask_type="object", model_config=_MODEL_CONFIG)


def train_pg_explainer(scheme: str, samples: list[tuple[ComputeGraph, Group, int, int]],
                       epochs: int = 20, seed: int = 0, out: Path | None = None,
                       graph_stages: str = "none") -> Path:
    """Train PGExplainer's edge scorer on invalid groups and save it next to the GNN.

    Args:
        scheme: Dataflow of the GNN explained.
        samples: (graph, group, buffer bytes, dtype bytes) of groups that do not fit.
        epochs: Passes over the samples.
        seed: Torch seed (inside a forked RNG).
        out: Where to write (default: `pg_checkpoint(scheme, graph_stages)`).
        graph_stages: The graph stage of the samples' graphs and of the GNN explained.
    """
    data = [group_tensors(g, ops, b, d)[:2] for g, ops, b, d in samples]
    data = [(x, e) for x, e in data if e.shape[1] > 0]
    logging.getLogger("torch_geometric").setLevel(logging.ERROR)
    with torch.random.fork_rng(), threads(1):  # loading the GNN draws initial weights too
        torch.manual_seed(seed)
        gnn = load_predictor(scheme, graph_stages=graph_stages)
        model = gnn.model
        algorithm = _pg_algorithm(epochs)
        explainer = _pg_explainer(model, algorithm)
        for epoch in range(epochs):
            start = time.perf_counter()
            loss = sum(explainer.algorithm.train(epoch, model, x, e, target=torch.tensor([0]))
                       for x, e in data)
            logging.getLogger(__name__).info("pg epoch %d: mean loss %.3f, %.0f s", epoch,
                                             loss / max(len(data), 1),
                                             time.perf_counter() - start)
    return save_explainer_checkpoint(out if out is not None
                                     else pg_checkpoint(scheme, graph_stages), "pg",
                                     gnn, algorithm.state_dict(), epochs=epochs,
                                     samples=len(data), seed=seed)
