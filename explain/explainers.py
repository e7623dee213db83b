"""Graph-explanation techniques behind the `Explainer` protocol of `explain.tree_split`.

Each explainer receives a fusion group the cost model says does not fit, encodes it exactly as
the validity GNN was trained (`explain.features`, at the hardware's buffer size), and ranks the
group's edges by the weight the explanation gives them (most responsible for the predicted
invalidity first). Only edges of the group are returned.

* `GnnExplainerGET`: GNNExplainer (Ying et al. 2019) on the shipped GNN, as PyG computes it
  with ``explanation_type="model"``: an edge mask optimised for every group, many groups at
  once (`explain.gnne`), each seeded from its own encoding and computed once per run.
* `PgExplainerGET`: PyG's PGExplainer (Luo et al. 2020). It only supports
  ``explanation_type="phenomenon"`` (explaining a given target, here "does not fit") and must
  be trained first: `train_pg_explainer` fits its edge-scoring MLP on invalid groups of the GNN
  dataset, and the parameters ship next to the GNN checkpoints.

Torch randomness is drawn from private seeds: GNNExplainer's initial masks from a seed derived
from each group's encoding, PGExplainer's from one taken from the search's generator (inside
`torch.random.fork_rng`); runs are reproducible and the global torch state is untouched.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch_geometric.explain import Explainer
from torch_geometric.explain.algorithm import GNNExplainer, PGExplainer

from explain import checkpoint as _checkpoint
from explain.checkpoint import load_explainer_checkpoint, load_weights, save_explainer_checkpoint
from explain.features import capacities, encode_group, node_features
from explain.gnne import edge_masks
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


def group_tensors(graph: ComputeGraph, ops: Group, buffer_bytes: int | tuple[int, int, int],
                  dtype_bytes: int) -> tuple[torch.Tensor, torch.Tensor, list[Edge]]:
    """Node features, local edge index and the global (i, j) of each edge of a group
    (`buffer_bytes`: the buffer size, or split capacities, `explain.features.capacities`)."""
    enc = encode_group(graph, ops, dtype_bytes)
    caps = buffer_bytes if isinstance(buffer_bytes, tuple) else float(buffer_bytes)
    x = torch.from_numpy(node_features(enc.base, enc.sizes, caps))
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
    x, edge_index, edges = group_tensors(graph, ops, capacities(cache.hw),
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

    The edge mask is PyG's GNNExplainer optimisation (``explanation_type="model"``: 100 epochs
    of Adam at lr 0.01 on the GNN's own prediction, PyG's regularisation), computed by
    `explain.gnne.edge_masks`, which optimises the masks of many groups at once: Algorithm 1
    hands over every group its recursion will explain next (`explain_many`), so one optimisation
    serves a whole level of the tree, and every group an ask of random search repairs. The
    initial mask of a group is drawn from a torch seed derived from the group's encoding (its
    node features and edges, `explain.features.content_digest`) and `seed`, not from the
    search's generator: the mask is a function of what the GNN sees, so it can be computed in
    any order and batch, and is computed once per run for equal encodings (the same ops, or a
    repeated block of the network: `masks_reused` in the report).

    Attributes:
        epochs, lr: GNNExplainer's optimisation.
        graph_stages: The GNN's graph stage (``none`` or ``fuse``); None: the one that suits
            each graph explained (`graph_stages_for`).
        seed: Mixed into every group's mask seed (0 by default).
        batch_groups: Most groups optimised together (memory bound; results do not depend on
            it beyond floating-point rounding).
        legacy: PyG's `GNNExplainer` one group at a time, seeded from the search's generator
            (the implementation before batching; for comparison and tests), no cache.
    """

    epochs: int = 100
    lr: float = 0.01
    name: str = "gnne"
    graph_stages: str | None = None
    seed: int = 0
    batch_groups: int = 256
    legacy: bool = False
    _explainers: dict[tuple[str, str], Explainer] = field(default_factory=dict, repr=False)
    _masks: dict[tuple, torch.Tensor] = field(default_factory=dict, repr=False)
    _encoded: dict[tuple, tuple[tuple | None, list[Edge]]] = field(default_factory=dict,
                                                                    repr=False)
    _counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("masks_optimised", "mask_batches"), 0), repr=False)

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
        """Group edges by GNNExplainer's edge mask, highest first (`rng` is used only by
        `legacy`)."""
        stages = graph_stages_for(self.graph_stages, graph)
        if self.legacy:
            return _explain_with(self._explainer, graph, ops, cache, rng, stages)
        return self.explain_many(graph, [ops], cache)[0]

    @property
    def batches(self) -> bool:
        """True: `explain_many` is the explanation (not with `legacy`)."""
        return not self.legacy

    def explain_many(self, graph: ComputeGraph, groups: Sequence[Group],
                     cache: CostCache) -> list[list[Edge]]:
        """`explain` of every group, the masks not yet known optimised together."""
        stages = graph_stages_for(self.graph_stages, graph)
        hw = cache.hw
        found: list[tuple[tuple | None, list[Edge]]] = []
        todo: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        for ops in groups:
            where = (graph, cache.scheme, stages, capacities(hw), hw.dtype_bytes, tuple(ops))
            known = self._encoded.get(where)
            if known is None:
                x, e, edges = group_tensors(graph, ops, capacities(hw), hw.dtype_bytes)
                key = where[1:-1] + (_digest(x, e),) if edges else None
                known = self._encoded[where] = (key, edges)
                if key is not None and key not in self._masks:
                    todo.setdefault(key, (x, e))
            found.append(known)
        if todo:
            self._optimise(cache.scheme, stages, todo)
        return [_ranked(edges, self._masks[key]) if key is not None else []
                for key, edges in found]

    def _optimise(self, scheme: str, stages: str,
                  todo: dict[tuple, tuple[torch.Tensor, torch.Tensor]]) -> None:
        items = list(todo.items())
        with torch.random.fork_rng(), threads(1):  # model loading draws initial weights too
            model = load_predictor(scheme, graph_stages=stages).model
            for start in range(0, len(items), self.batch_groups):
                chunk = items[start:start + self.batch_groups]
                seeds = [_mask_seed(key[-1], self.seed) for key, _ in chunk]
                masks = edge_masks(model, [g for _, g in chunk], seeds, self.epochs, self.lr)
                self._masks.update((key, m) for (key, _), m in zip(chunk, masks, strict=True))
                self._counts["mask_batches"] += 1
        self._counts["masks_optimised"] += len(items)

    def report(self) -> dict[str, int]:
        """Masks optimised, optimisations run (batches), and groups explained by the mask of
        another group with the same encoding (a repeated block)."""
        groups = sum(k is not None for k, _ in self._encoded.values())
        return {**self._counts, "masks_reused": groups - len(self._masks)}


def _digest(x: torch.Tensor, edge_index: torch.Tensor) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(np.asarray([*x.shape, *edge_index.shape], dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(x.numpy()).tobytes())
    h.update(np.ascontiguousarray(edge_index.numpy()).tobytes())
    return h.digest()


def _mask_seed(digest: bytes, salt: int) -> int:
    """The torch seed of a group's initial mask: its encoding's digest with `salt`."""
    h = hashlib.blake2b(digest, digest_size=8, key=int(salt).to_bytes(8, "little", signed=True))
    return int.from_bytes(h.digest(), "little") & (2**63 - 1)


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
    _ranked: dict[tuple, tuple[Edge, ...]] = field(default_factory=dict, repr=False)

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
        """Group edges by PGExplainer's edge mask for the target "does not fit". The mask is
        deterministic (the trained MLP on the GNN's embeddings), so a group explained before
        gets its ranking again, with the generator drawn from as explaining it draws."""
        stages = graph_stages_for(self.graph_stages, graph)
        key = (graph, cache.scheme, stages, capacities(cache.hw), cache.hw.dtype_bytes,
               tuple(ops))
        if key in self._ranked:
            if self._ranked[key]:
                _seed(rng)
            return list(self._ranked[key])
        edges = _explain_with(self._explainer, graph, ops, cache, rng, stages,
                              target=torch.tensor([0]))
        self._ranked[key] = tuple(edges)
        return edges


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
