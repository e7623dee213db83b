"""RG-Explainer (Shan et al., NeurIPS 2021) on the validity GNN, behind the `Explainer` protocol.

RG-Explainer explains a graph classification with a *connected* subgraph built in three
phases (Mills et al. §II-B): a seed locator (an MLP on the GNN's node embeddings) picks the
starting node, a policy grows the subgraph one neighbouring node at a time, and a STOP action
ends the growth. Here the GNN is `explain.gnn.ValidityGNN` and the prediction explained is
"this fusion group does not fit the buffer", so the explanation is an *invalid core*: a
connected set of ops that the GNN predicts cannot share a fusion group even on its own.

* Subgraphs are scored as fusion groups in their own right: the context features of the
  encoding (inputs read from outside the group, output leaving the group) are recomputed for
  every candidate set (`SubgraphScorer`), exactly as `explain.features.encode_group` would.
* The reward of a finished subgraph S is log p(S does not fit) (the cross-entropy with the
  explained prediction), minus a size penalty per op and a radius penalty per hop of S's
  eccentricity from the seed. At every step the policy sees, for each candidate op, the GNN's
  logit of S with that op added (the marginal effect the reward will measure).
* Training is REINFORCE: several rollouts of every invalid group are sampled, the mean return
  of a group's rollouts is the baseline of each, plus an entropy bonus. The seed locator is
  trained with the policy gradient of the seed choice and to predict the ops of the group's
  best rollout (the nodes the explanation should contain).

Ranking for the splitter. `explain.tree_split.GetSplitter` turns every explained edge (i, j) into
cuts of the group at the topological thresholds i <= t < j and prefers a cut whose two sides
both fit. Every partition into fitting groups must cut the invalid core somewhere, so the core's
own edges come first; among them the edge at which the growing subgraph tipped from "fits" to
"does not fit" (the subgraph just before it fits, so a cut there leaves a fitting side holding
most of the core) and its neighbours in the growth order. The boundary edges (the cut between
the core and the rest of the group) follow, then every other edge by its distance from the
core. See `rank_edges`.

Torch randomness (sampled rollouts, initial weights) is drawn inside `torch.random.fork_rng`
from a seed taken from the caller's generator; the global torch state is untouched.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from explain import checkpoint as _checkpoint
from explain.checkpoint import (
    FORMATS,
    CheckpointError,
    load_explainer_checkpoint,
    load_weights,
    save_explainer_checkpoint,
)
from explain.explainers import graph_stages_for, group_tensors
from explain.features import FEATURE_SCHEMA, capacities
from explain.gnn import ValidityGNN
from explain.predict import load_predictor
from explain.solutions import Edge
from explain.train import threads
from simulator.cost import CostCache
from simulator.partition import Group
from simulator.scheme import FUSED_SCHEMES
from simulator.workload.graph import ComputeGraph

__all__ = [
    "RG_FORMAT",
    "RgConfig",
    "RgExplainerGET",
    "RgPolicy",
    "Rollout",
    "SubgraphScorer",
    "cut_pieces",
    "load_rg_policy",
    "rank_edges",
    "refine_ranking",
    "rg_checkpoint",
    "rollout",
    "train_rg_explainer",
]

Sample = tuple[ComputeGraph, Group, int, int]

RG_FORMAT = FORMATS["rg"]
_LOG = logging.getLogger(__name__)
_NAMES = [name for name, _ in FEATURE_SCHEMA]
_EXTERNAL = _NAMES.index("inputs_from_outside")
_LEAVES = _NAMES.index("leaves_group")
_CLIP = 6.0  # GNN logits beyond this say nothing more about the explanation


@dataclass(frozen=True)
class RgConfig:
    """Hyper-parameters of the policy and its training (saved with the parameters).

    Attributes:
        hidden: Width of the MLPs.
        size_penalty: Reward lost per op of the explanation.
        radius_penalty: Reward lost per hop of the explanation's radius (seed eccentricity).
        rollouts: Sampled rollouts per group and update (the baseline is their mean return).
        batch_groups: Groups per optimiser step.
        lr: Adam learning rate.
        entropy_weight: Weight of the entropy bonus.
        locator_weight: Weight of the seed locator's membership loss.
        value_weight: Weight of the value head's squared error.
    """

    hidden: int = 64
    size_penalty: float = 0.02
    radius_penalty: float = 0.02
    rollouts: int = 4
    batch_groups: int = 8
    lr: float = 3e-3
    entropy_weight: float = 0.01
    locator_weight: float = 0.5
    value_weight: float = 0.1

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (numbers only: loadable with ``weights_only=True``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> RgConfig:
        """Inverse of `to_dict` (unknown keys are ignored)."""
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in doc.items() if k in known})


def _symlog(value: torch.Tensor) -> torch.Tensor:
    """Sign-preserving log scaling of GNN logits (they range over hundreds)."""
    return torch.sign(value) * torch.log1p(value.abs()) / 4.0


class SubgraphScorer:
    """A group encoded for the GNN, able to score any of its subsets as a group of its own.

    Attributes:
        order: The group's ops, ascending (local node k is op ``order[k]``).
        edges: Global (i, j) of every local edge, aligned with ``edge_index`` columns.
        n: Nodes of the group.
        neighbours: Undirected adjacency, local ids.
        embeddings: (n, hidden) GNN node embeddings of the whole group (no gradient).
    """

    def __init__(self, graph: ComputeGraph, ops: Sequence[int],
                 buffer_bytes: int | tuple[int, int, int], dtype_bytes: int,
                 model: ValidityGNN) -> None:
        self.model = model
        self.order = tuple(sorted(ops))
        self.x, self.edge_index, self.edges = group_tensors(graph, self.order, buffer_bytes,
                                                            dtype_bytes)
        self.n = len(self.order)
        self.src, self.dst = self.edge_index[0], self.edge_index[1]
        self.mult = torch.tensor([float(graph[j].inputs.count(i)) for i, j in self.edges])
        self.neighbours: list[set[int]] = [set() for _ in range(self.n)]
        for a, b in self.edge_index.T.tolist():
            self.neighbours[a].add(b)
            self.neighbours[b].add(a)
        with torch.no_grad():
            self.embeddings = model.embed(self.x, self.edge_index)
        self._memo: dict[bytes, float] = {}

    def features(self, masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Batched GNN input of the subsets `masks` ((k, n) bool), each encoded as a group.

        Returns:
            Node features of the selected nodes (subset by subset, ascending op id), the edge
            index between them and the batch vector.
        """
        k = masks.shape[0]
        outside = (~masks).float()
        external = torch.zeros(k, self.n).index_add_(
            1, self.dst, outside[:, self.src] * self.mult) / 4.0
        leaves = torch.zeros(k, self.n).index_add_(1, self.src, outside[:, self.dst]).clamp(max=1)
        x = self.x.expand(k, -1, -1).clone()
        x[:, :, _EXTERNAL] += external
        x[:, :, _LEAVES] = torch.maximum(x[:, :, _LEAVES], leaves)
        position = masks.reshape(-1).long().cumsum(0).reshape(k, self.n) - 1
        keep = masks[:, self.src] & masks[:, self.dst]
        which, edge = keep.nonzero(as_tuple=True)
        edge_index = torch.stack([position[which, self.src[edge]],
                                  position[which, self.dst[edge]]])
        batch = torch.arange(k).repeat_interleave(masks.sum(1))
        return x[masks], edge_index, batch

    @torch.no_grad()
    def logits(self, masks: torch.Tensor) -> torch.Tensor:
        """(k,) GNN logits (positive: fits) of the subsets `masks` ((k, n) bool), memoised:
        rollouts of one group revisit the same subsets."""
        keys = [bytes(row) for row in masks.numpy()]
        missing = [k for k, key in enumerate(keys) if key not in self._memo]
        if missing:
            x, edge_index, batch = self.features(masks[missing])
            fresh = self.model(x, edge_index, batch).reshape(-1).tolist()
            self._memo.update((keys[k], v) for k, v in zip(missing, fresh, strict=True))
        return torch.tensor([self._memo[key] for key in keys])

    def frontier(self, inside: torch.Tensor) -> list[int]:
        """Nodes outside the subset adjacent to it, ascending."""
        members = inside.nonzero().reshape(-1).tolist()
        return sorted({b for a in members for b in self.neighbours[a]} - set(members))

    def radius(self, nodes: Sequence[int]) -> int:
        """Eccentricity of the first node within the subgraph induced by `nodes`."""
        members, dist = set(nodes), {nodes[0]: 0}
        queue = deque([nodes[0]])
        while queue:
            a = queue.popleft()
            for b in self.neighbours[a] & members:
                if b not in dist:
                    dist[b] = dist[a] + 1
                    queue.append(b)
        return max(dist.values())


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, outputs))


class RgPolicy(nn.Module):
    """Seed locator and growth policy on frozen GNN node embeddings.

    Args:
        embed_dim: Width of the GNN embeddings.
        hidden: Width of the MLPs.
    """

    _STATE = 3  # GNN logit of the subgraph, its size and radius (both relative)
    _CANDIDATE = 2  # GNN logit with the candidate added, and its change

    def __init__(self, embed_dim: int = 128, hidden: int = 64) -> None:
        super().__init__()
        self.locator = _mlp(embed_dim, hidden, 1)
        self.encoder = nn.Sequential(nn.Linear(embed_dim, hidden), nn.ReLU())
        self.context = _mlp(hidden + self._STATE, hidden, hidden)
        self.candidate = _mlp(2 * hidden + self._CANDIDATE, hidden, 1)
        self.stop = _mlp(hidden + self._STATE, hidden, 1)
        self.value = _mlp(hidden + self._STATE, hidden, 1)

    def seed_logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(n,) seed locator scores: how much each node belongs in the explanation."""
        return self.locator(torch.log1p(embeddings)).reshape(-1)

    def encode(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(n, hidden) node encodings shared by every step of a rollout."""
        return self.encoder(torch.log1p(embeddings))

    def step(self, encoded: torch.Tensor, inside: torch.Tensor, candidates: torch.Tensor,
             state: torch.Tensor, candidate_logits: torch.Tensor, logit: torch.Tensor,
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores of adding each candidate, then of STOP (last), and the state's value (the
        baseline of the policy gradient).

        Args:
            encoded: (n, hidden) node encodings.
            inside: (n,) bool, the current subgraph.
            candidates: (c,) local ids of the frontier nodes.
            state: (3,) subgraph state: scaled logit, relative size, relative radius.
            candidate_logits: (c,) GNN logits of the subgraph with each candidate added.
            logit: GNN logit of the current subgraph.
        """
        pooled = encoded[inside].mean(0)
        context = self.context(torch.cat([pooled, state]))
        extra = torch.stack([_symlog(candidate_logits), _symlog(candidate_logits - logit)], 1)
        rows = torch.cat([encoded[candidates], context.expand(len(candidates), -1), extra], 1)
        add = self.candidate(rows).reshape(-1)
        summary = torch.cat([context, state])
        return torch.cat([add, self.stop(summary)]), self.value(summary).reshape(())


@dataclass
class Rollout:
    """One generated explanation.

    Attributes:
        nodes: Local ids in the order added (the seed first).
        logits: GNN logit of the subgraph after each addition (aligned with `nodes`).
        radii: Eccentricity of the seed after each addition (aligned with `nodes`).
        stopped: True if the policy chose STOP (False: the whole group was taken).
        seed_log_prob: Log-probability of the seed.
        step_log_probs: Log-probability of every growth action (STOP included).
        values: The value head's estimate before every growth action.
        entropy: Sum of the entropies of the action distributions.
    """

    nodes: list[int]
    logits: list[float]
    radii: list[int]
    stopped: bool
    seed_log_prob: torch.Tensor
    step_log_probs: list[torch.Tensor]
    values: list[torch.Tensor]
    entropy: torch.Tensor

    def reward(self, config: RgConfig) -> float:
        """Prediction reward of the final subgraph minus its size and radius penalties."""
        return _value(self.logits[-1], len(self.nodes), self.radii[-1], config)

    def returns(self, config: RgConfig) -> list[float]:
        """Reward-to-go of every growth action.

        The step reward of adding a node is the change of the penalised reward, that of STOP
        is 0, so the return of an action is what the rest of the rollout gained from there
        on: continuing past the point where the subgraph no longer fits earns only penalties.
        """
        final = self.reward(config)
        values = [_value(lg, k + 1, r, config)
                  for k, (lg, r) in enumerate(zip(self.logits, self.radii, strict=True))]
        return [final - values[t] for t in range(len(self.step_log_probs))]


def _choose(scores: torch.Tensor, greedy: bool) -> tuple[int, torch.Tensor, torch.Tensor]:
    """Index taken (argmax, or a sample from the default torch generator), its log-probability
    and the entropy of the distribution."""
    logp = torch.log_softmax(scores, 0)
    index = int(scores.argmax()) if greedy else int(torch.multinomial(logp.exp(), 1))
    return index, logp[index], -(logp.exp() * logp).sum()


def _value(logit: float, size: int, radius: int, config: RgConfig) -> float:
    """log p(does not fit) of a subgraph (logit clipped to +-`_CLIP`), minus the penalties."""
    clipped = min(max(logit, -_CLIP), _CLIP)
    prediction = -math.log1p(math.exp(clipped))  # log sigmoid(-logit)
    return prediction - config.size_penalty * size - config.radius_penalty * radius


def _state(logit: float, size: int, radius: int, n: int) -> torch.Tensor:
    return torch.tensor([float(_symlog(torch.tensor(logit))), size / n, radius / n])


def rollout(policy: RgPolicy, scorer: SubgraphScorer, greedy: bool = True) -> Rollout:
    """Grow one explanation: a seed from the locator, then nodes until STOP.

    Args:
        policy: Seed locator and growth policy.
        scorer: The group.
        greedy: Take the most likely action at every step (deterministic); otherwise sample
            with the default torch generator.
    """
    encoded = policy.encode(scorer.embeddings)
    seed, seed_lp, entropy = _choose(policy.seed_logits(scorer.embeddings), greedy)
    inside = torch.zeros(scorer.n, dtype=torch.bool)
    inside[seed] = True
    result = Rollout([seed], [float(scorer.logits(inside[None])[0])], [0], False, seed_lp, [], [],
                     entropy)
    while candidates := scorer.frontier(inside):
        index = torch.tensor(candidates)
        masks = inside.expand(len(candidates), -1).clone()
        masks[torch.arange(len(candidates)), index] = True
        cand_logits = scorer.logits(masks)
        state = _state(result.logits[-1], len(result.nodes), result.radii[-1], scorer.n)
        scores, value = policy.step(encoded, inside, index, state, cand_logits,
                                    torch.tensor(result.logits[-1]))
        action, lp, ent = _choose(scores, greedy)
        result.step_log_probs.append(lp)
        result.values.append(value)
        result.entropy = result.entropy + ent
        if action == len(candidates):
            result.stopped = True
            break
        inside = inside.clone()  # the previous mask is saved for the backward pass
        inside[candidates[action]] = True
        result.nodes.append(candidates[action])
        result.logits.append(float(cand_logits[action]))
        result.radii.append(scorer.radius(result.nodes))
    return result


# --- ranking --------------------------------------------------------------------------------


def _growth_edges(scorer: SubgraphScorer, nodes: Sequence[int]) -> list[int]:
    """Edge columns inside the explanation, in the order the policy added them (each added
    node's edges to the nodes added before it, earliest partner first)."""
    added = {v: k for k, v in enumerate(nodes)}
    column = {(a, b): c for c, (a, b) in enumerate(scorer.edge_index.T.tolist())}
    out = []
    for v in nodes[1:]:
        earlier = sorted((u for u in scorer.neighbours[v] if added.get(u, len(nodes)) < added[v]),
                         key=added.__getitem__)
        out += [column.get((u, v), column.get((v, u))) for u in earlier]
    return out


def _tipping_step(logits: Sequence[float]) -> int:
    """The addition after which the subgraph stopped fitting for good: the last step whose
    logit went from >= 0 to < 0 (the largest drop when the sign never changed that way)."""
    for k in range(len(logits) - 1, 0, -1):
        if logits[k] < 0 <= logits[k - 1]:
            return k
    drops = [logits[k - 1] - logits[k] for k in range(1, len(logits))]
    return 1 + int(np.argmax(drops)) if drops else 0


def _hop_distance(scorer: SubgraphScorer, nodes: Sequence[int]) -> list[int]:
    """Undirected hops from the explanation to every node of the group."""
    dist = [scorer.n] * scorer.n
    for v in nodes:
        dist[v] = 0
    queue = deque(nodes)
    while queue:
        a = queue.popleft()
        for b in scorer.neighbours[a]:
            if dist[b] > dist[a] + 1:
                dist[b] = dist[a] + 1
                queue.append(b)
    return dist


def _boundary(scorer: SubgraphScorer, nodes: Sequence[int]) -> list[int]:
    """Edge columns between the explanation and the rest of the group, those of the earliest
    added explanation node first, then in topological order."""
    added = {v: k for k, v in enumerate(nodes)}
    pairs = scorer.edge_index.T.tolist()
    cut = [c for c, (a, b) in enumerate(pairs) if (a in added) != (b in added)]
    return sorted(cut, key=lambda c: (min(added.get(v, scorer.n) for v in pairs[c]),
                                      scorer.edges[c]))


def _core(scorer: SubgraphScorer, result: Rollout) -> list[int]:
    """Edge columns inside the explanation: those of the tipping addition, then the others
    from the latest added to the earliest."""
    inner = _growth_edges(scorer, result.nodes)
    tip = _tipping_step(result.logits)
    before = len(_growth_edges(scorer, result.nodes[:tip]))
    tipping = inner[before:len(_growth_edges(scorer, result.nodes[:tip + 1]))]
    return tipping + [c for c in reversed(inner) if c not in tipping]


def rank_edges(scorer: SubgraphScorer, result: Rollout) -> list[Edge]:
    """The group's edges ranked for the splitter, most responsible for the invalidity first.

    1. The boundary of the explanation (the edges between the invalid core and the rest of
       the group, nearest the seed first): their cuts separate the core from what fits
       around it, so they are where the group should be split;
    2. the core's own edges: first those of the tipping addition (the node whose addition
       made the growing subgraph stop fitting: a cut there leaves a fitting part of the core
       on one side), then the others from the last added back to the seed;
    3. every other edge, nearest the core first, then in topological order.

    On invalid groups of four training networks (LBDF, 128-256 KiB) the boundary-first order
    let the top four edges alone break 86-95 % of the groups into fitting pieces, against
    64-86 % for the core's edges first and 56-82 % for the plain growth order.
    """
    core = _core(scorer, result)
    boundary = _boundary(scorer, result.nodes)
    dist = _hop_distance(scorer, result.nodes)
    pairs = scorer.edge_index.T.tolist()
    taken = set(core) | set(boundary)
    rest = sorted((c for c in range(len(pairs)) if c not in taken),
                  key=lambda c: (min(dist[v] for v in pairs[c]), scorer.edges[c]))
    return [scorer.edges[c] for c in boundary + core + rest]


def cut_pieces(scorer: SubgraphScorer, edges: Sequence[Edge]) -> list[list[int]]:
    """Local node lists of the pieces the group falls into when cut at every topological
    threshold `edges` span (each segment's connected components): the pieces the splitter's
    rectify measure checks (`explain.tree_split`)."""
    cuts = sorted({k for i, j in edges for k, t in enumerate(scorer.order) if i <= t < j})
    segment = [sum(1 for c in cuts if c < k) for k in range(scorer.n)]
    pieces, seen = [], set()
    for v in range(scorer.n):
        if v in seen:
            continue
        piece, queue = [], deque([v])
        seen.add(v)
        while queue:
            a = queue.popleft()
            piece.append(a)
            for b in scorer.neighbours[a]:
                if b not in seen and segment[b] == segment[v]:
                    seen.add(b)
                    queue.append(b)
        pieces.append(sorted(piece))
    return pieces


def _core_first(scorer: SubgraphScorer, result: Rollout) -> list[Edge]:
    """An explanation's edges for a piece that is mostly core: the core's (tipping addition
    first), then the boundary, then the rest in topological order."""
    core = _core(scorer, result)
    boundary = [c for c in _boundary(scorer, result.nodes) if c not in core]
    taken = set(core) | set(boundary)
    rest = [c for c in range(len(scorer.edges)) if c not in taken]
    return [scorer.edges[c] for c in core + boundary + rest]


def refine_ranking(policy: RgPolicy, scorer: SubgraphScorer, ranked: list[Edge],
                   graph: ComputeGraph, cache: CostCache, greedy: bool) -> list[Edge]:
    """`ranked` (the first explanation's `rank_edges`) regrown where the invalidity remains.

    The first edge is the explanation's. After each, the group is cut at the edges chosen so
    far (`cut_pieces`) and the GNN scores every piece as a group of its own; the piece it is
    surest does not fit is explained by the policy in turn (RG-Explainer on that piece) and
    the first of its edges not chosen yet is added, the core's before the boundary (a piece
    cut off by earlier edges is mostly core: trimming its boundary frees little). This stops
    when the GNN predicts that every piece fits; the rest of `ranked` follows.

    Without it the top edges all come from one invalid core: on the fused graph, whose groups
    hold more layers, local search proposes more groups that exceed the buffer in several
    places (an inverted-residual block of MobileNetV2 at 14 x 14 needs a cut of its own at
    128 KiB), and those cut their first core into single ops while another block stays whole
    (docs/explain.md, "Graph stages").
    """
    chosen: list[Edge] = ranked[:1]
    rankings: dict[tuple[int, ...], list[Edge]] = {}
    while chosen and len(chosen) < len(ranked):
        pieces = [p for p in cut_pieces(scorer, chosen) if len(p) > 1]
        if not pieces:
            break
        masks = torch.zeros(len(pieces), scorer.n, dtype=torch.bool)
        for k, piece in enumerate(pieces):
            masks[k, piece] = True
        logits = scorer.logits(masks).tolist()
        added = None
        for logit, piece in sorted(zip(logits, pieces, strict=True)):
            if logit >= 0:
                break
            key = tuple(piece)
            if key not in rankings:
                sub = SubgraphScorer(graph, [scorer.order[v] for v in piece],
                                     capacities(cache.hw), cache.hw.dtype_bytes, scorer.model)
                rankings[key] = (_core_first(sub, rollout(policy, sub, greedy=greedy))
                                 if sub.edges else [])
            added = next((e for e in rankings[key] if e not in chosen), None)
            if added is not None:
                break
        if added is None:
            break
        chosen.append(added)
    return list(dict.fromkeys(chosen + ranked))


# --- parameters -------------------------------------------------------------------------------


def rg_checkpoint(scheme: str, graph_stages: str = "none") -> Path:
    """Where the trained RG-Explainer parameters of `scheme` for `graph_stages` ship."""
    suffix = _checkpoint.GRAPH_STAGE_SUFFIX[_checkpoint.checkpoint_graph_stages(graph_stages)]
    return _checkpoint.CHECKPOINT_DIR / f"rg-{scheme}{suffix}.pt"


def load_rg_policy(path: str | Path, scheme: str,
                   graph_stages: str = "none") -> tuple[RgPolicy, RgConfig]:
    """Read trained parameters (weights only) and check they explain the shipped GNN of
    `graph_stages`.

    Raises:
        CheckpointError: Unreadable, of another format or dataflow, trained on another GNN, or
            not fitting the policy.
    """
    where = f"RG-Explainer parameters {str(path)!r}"
    payload = load_explainer_checkpoint(
        path, "rg", scheme, lambda: load_predictor(scheme, graph_stages=graph_stages),
        keys=("config", "embed_dim"))
    try:
        config = RgConfig.from_dict(payload["config"])
        policy = RgPolicy(int(payload["embed_dim"]), config.hidden)
    except (AttributeError, TypeError, ValueError) as err:
        raise CheckpointError(f"{where} has a malformed header ({type(err).__name__})") from err
    return load_weights(policy, payload["state_dict"], where).eval(), config


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31 - 1))


@dataclass
class RgExplainerGET:
    """RG-Explainer on the validity GNN (the paper's RG), with pre-trained parameters.

    Attributes:
        greedy: Run the policy deterministically (most likely seed and actions); otherwise
            sample it with a torch seed drawn from the search's generator.
        name: ``"rg"``.
        checkpoint: Parameters to use instead of the shipped ones (`rg_checkpoint`); they must
            explain the GNN of the graph stage in use.
        graph_stages: The graph stage of the GNN and parameters (``none`` or ``fuse``); None:
            the one that suits each graph explained (`explain.explainers.graph_stages_for`).
        refine: Explain in turn what the first edges leave that the GNN predicts does not fit
            (`refine_ranking`); False: the first explanation's ranking alone (`rank_edges`).
    """

    greedy: bool = True
    name: str = "rg"
    checkpoint: Path | None = None
    graph_stages: str | None = None
    refine: bool = True
    _policies: dict[tuple[str, str], tuple[RgPolicy, RgConfig]] = field(default_factory=dict,
                                                                        repr=False)
    _ranked: dict[tuple, tuple[Edge, ...]] = field(default_factory=dict, repr=False)

    def _path(self, scheme: str, stages: str | None = None) -> Path:
        return Path(self.checkpoint) if self.checkpoint is not None \
            else rg_checkpoint(scheme, stages or self.graph_stages or "none")

    def supports(self, scheme: str) -> bool:
        """Dataflows with a shipped GNN and trained RG-Explainer parameters."""
        return scheme in FUSED_SCHEMES and self._path(scheme).is_file()

    def _policy(self, scheme: str, stages: str) -> tuple[RgPolicy, RgConfig]:
        if (scheme, stages) not in self._policies:
            self._policies[scheme, stages] = load_rg_policy(self._path(scheme, stages), scheme,
                                                            stages)
        return self._policies[scheme, stages]

    def explain(self, graph: ComputeGraph, ops: Group, cache: CostCache,
                rng: np.random.Generator) -> list[Edge]:
        """Group edges ranked from the policy's explanation (see `rank_edges`). Greedy
        explanations are deterministic: a group explained before gets its ranking again (the
        generator is drawn from all the same)."""
        seed = _seed(rng)
        if len(ops) < 2:
            return []
        stages = graph_stages_for(self.graph_stages, graph)
        key = (graph, cache.scheme, stages, capacities(cache.hw), cache.hw.dtype_bytes,
               tuple(ops))
        if self.greedy and key in self._ranked:
            return list(self._ranked[key])
        ranked = self._explain(graph, ops, cache, seed, stages)
        if self.greedy:
            self._ranked[key] = tuple(ranked)
        return ranked

    def _explain(self, graph: ComputeGraph, ops: Group, cache: CostCache, seed: int,
                 stages: str) -> list[Edge]:
        with torch.random.fork_rng(), threads(1), torch.no_grad():
            policy, _ = self._policy(cache.scheme, stages)
            scorer = SubgraphScorer(graph, ops, capacities(cache.hw), cache.hw.dtype_bytes,
                                    load_predictor(cache.scheme, graph_stages=stages).model)
            if not scorer.edges:
                return []
            torch.manual_seed(seed)
            result = rollout(policy, scorer, greedy=self.greedy)
            ranked = rank_edges(scorer, result)
            if not self.refine:
                return ranked
            return refine_ranking(policy, scorer, ranked, graph, cache, self.greedy)


# --- training ---------------------------------------------------------------------------------


def _group_loss(policy: RgPolicy, scorer: SubgraphScorer, config: RgConfig,
                ) -> tuple[torch.Tensor, list[Rollout]]:
    """REINFORCE loss of `config.rollouts` sampled rollouts of one group.

    The seed choice is weighted by the rollout's reward minus the group's mean reward (the
    baseline); every growth action by its reward-to-go minus the value head's estimate (the
    baseline), which learns the reward-to-go. The locator also learns to score the nodes of the
    group's best rollout above the others.
    """
    runs = [rollout(policy, scorer, greedy=False) for _ in range(config.rollouts)]
    rewards = torch.tensor([r.reward(config) for r in runs])
    advantage = rewards - rewards.mean()
    loss = torch.zeros(())
    for run, adv in zip(runs, advantage, strict=True):
        loss = loss - adv * run.seed_log_prob - config.entropy_weight * run.entropy
        if run.step_log_probs:
            returns = torch.tensor(run.returns(config))
            values = torch.stack(run.values)
            step_adv = returns - values.detach()
            loss = loss - (step_adv * torch.stack(run.step_log_probs)).sum()
            loss = loss + config.value_weight * ((values - returns) ** 2).sum()
    target = torch.zeros(scorer.n)
    target[runs[int(rewards.argmax())].nodes] = 1.0
    locator = nn.functional.binary_cross_entropy_with_logits(
        policy.seed_logits(scorer.embeddings), target)
    return loss / config.rollouts + config.locator_weight * locator, runs


def _update(policy: RgPolicy, optimiser: torch.optim.Optimizer, batch: list[SubgraphScorer],
            config: RgConfig) -> list[tuple[float, int]]:
    """One optimiser step on a batch of groups; returns (reward, size) of every rollout (the
    rollouts themselves hold autograd graphs and are dropped)."""
    losses, runs = zip(*(_group_loss(policy, s, config) for s in batch), strict=True)
    optimiser.zero_grad()
    (torch.stack(list(losses)).mean()).backward()
    nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    optimiser.step()
    return [(r.reward(config), len(r.nodes)) for group in runs for r in group]


def _train(policy: RgPolicy, scorers: list[SubgraphScorer], epochs: int, config: RgConfig,
           log: list[dict[str, float]]) -> None:
    optimiser = torch.optim.Adam(policy.parameters(), lr=config.lr)
    for epoch in range(epochs):
        start = time.perf_counter()
        order = torch.randperm(len(scorers)).tolist()
        runs: list[tuple[float, int]] = []
        for k in range(0, len(order), config.batch_groups):
            batch = [scorers[i] for i in order[k:k + config.batch_groups]]
            runs += _update(policy, optimiser, batch, config)
        rewards, sizes = zip(*runs, strict=True) if runs else ((0.0,), (0,))
        log.append({"epoch": epoch, "mean_reward": float(np.mean(rewards)),
                    "mean_size": float(np.mean(sizes)),
                    "seconds": time.perf_counter() - start})
        _LOG.info("rg epoch %d: mean reward %.3f, mean size %.1f, %.0f s", epoch,
                  log[-1]["mean_reward"], log[-1]["mean_size"], log[-1]["seconds"])


def train_rg_explainer(scheme: str, samples: list[Sample], epochs: int = 5, seed: int = 0,
                       out: Path | None = None, config: RgConfig | None = None,
                       graph_stages: str = "none") -> Path:
    """Train the seed locator and policy on invalid groups and save them next to the GNN.

    Args are those of `explain.explainers.train_pg_explainer` (``out`` defaults to
    `rg_checkpoint(scheme, graph_stages)`), plus ``config``, the hyper-parameters (default:
    `RgConfig()`).

    Returns:
        The path written.
    """
    config = config or RgConfig()
    gnn = load_predictor(scheme, graph_stages=graph_stages)
    model = gnn.model
    log: list[dict[str, float]] = []
    with torch.random.fork_rng(), threads(1):
        torch.manual_seed(seed)
        scorers = [SubgraphScorer(g, ops, b, d, model) for g, ops, b, d in samples
                   if len(ops) > 1]
        scorers = [s for s in scorers if s.edges]
        embed_dim = int(scorers[0].embeddings.shape[1]) if scorers else model.spec.hidden
        policy = RgPolicy(embed_dim, config.hidden)
        _train(policy, scorers, epochs, config, log)
    path = Path(out) if out is not None else rg_checkpoint(scheme, graph_stages)
    return save_explainer_checkpoint(path, "rg", gnn, policy.state_dict(),
                                     config=config.to_dict(), embed_dim=embed_dim,
                                     epochs=epochs, samples=len(scorers), seed=seed, log=log)
