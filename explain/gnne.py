"""GNNExplainer's edge masks for many groups in one optimisation (batched, plain torch).

`edge_masks` computes exactly what PyG's `GNNExplainer` (``explanation_type="model"``,
``edge_mask_type="object"``, no node mask, binary classification on raw logits) computes for each
group, for a list of groups at once: the groups are joined into one disjoint-union graph and their
masks optimised together. Every term of the loss belongs to one group (the cross entropy of its
logit against the GNN's own prediction, the sum of its mask and the mean entropy of its mask over
its own edges), so the total loss is a sum over groups, the gradient of a group's mask is the
gradient of its own loss, and Adam, which updates every element on its own, moves each mask as an
independent run would. The batch changes nothing but floating-point rounding (tested against PyG
to 1e-5) and the time: one optimisation of tens of tiny graphs costs about what one of them costs.

The same steps as PyG, in its order: the target is the GNN's prediction (logit > 0) on the
unmasked group; the mask of a group with N nodes and E edges starts at ``randn(E) * sqrt(2) *
sqrt(1 / N)`` drawn from the group's own seed (as ``torch.manual_seed(seed)`` then PyG would
draw it); every epoch weights each message by ``sigmoid(mask)``; the first epoch's loss is the
cross entropy alone, and its gradient decides the *hard mask* (edges with a non-zero gradient),
over which later epochs add ``edge_size * sum(sigmoid)`` and ``edge_ent * mean(entropy)``; the
result is ``sigmoid(mask)``, zero outside the hard mask.

The model is `explain.gnn.ValidityGNN` (GraphConv layers with sum aggregation, sum pooling, an MLP
head of linear layers and ReLUs), evaluated here with its own weights, detached: no gradient is
computed for them (PyG computes and discards one every epoch), the first layer's root term is
computed once, and each later layer is one matrix product. Adam is `torch.optim.Adam`'s update,
written out on the one mask tensor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch_geometric.explain.algorithm import GNNExplainer

from explain.gnn import ValidityGNN

__all__ = ["COEFFS", "edge_masks"]

COEFFS = dict(GNNExplainer.default_coeffs)
"""PyG's default GNNExplainer coefficients (edge size 0.005 summed, edge entropy 1.0)."""


class _Weights:
    """The GNN's weights, detached: the first layer's root term is a constant of the input;
    every later layer is one product of [aggregated, own] features with [W_rel | W_root]."""

    def __init__(self, model: ValidityGNN) -> None:
        self.layers: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        for conv in model.convs:
            if conv.aggr != "add":
                raise ValueError(f"batched GNNExplainer needs sum aggregation, not {conv.aggr!r}")
            rel, root = conv.lin_rel, conv.lin_root
            self.layers.append((torch.cat([rel.weight, root.weight], dim=1).detach(),
                                None if rel.bias is None else rel.bias.detach()))
        self.first_rel = model.convs[0].lin_rel.weight.detach()
        self.first_root = model.convs[0].lin_root.weight.detach()
        self.head: list[tuple[torch.Tensor, torch.Tensor | None] | None] = []
        for module in model.head:
            if isinstance(module, torch.nn.Linear):
                self.head.append((module.weight.detach(),
                                  None if module.bias is None else module.bias.detach()))
            elif isinstance(module, torch.nn.ReLU):
                self.head.append(None)
            else:
                raise ValueError(f"batched GNNExplainer cannot run head layer {module!r}")


def _forward(w: _Weights, x: torch.Tensor, root0: torch.Tensor, src: torch.Tensor,
             dst: torch.Tensor, weight: torch.Tensor | None, batch: torch.Tensor,
             groups: int) -> torch.Tensor:
    """Logits (groups,) of the union graph, each message scaled by `weight` (None: 1)."""
    h = x
    for k, (w_cat, bias) in enumerate(w.layers):
        msg = h.index_select(0, src)
        if weight is not None:
            msg = msg * weight.unsqueeze(1)
        agg = torch.zeros(h.shape[0], h.shape[1], dtype=h.dtype).index_add_(0, dst, msg)
        if k == 0:
            h = torch.relu(F.linear(agg, w.first_rel, bias) + root0)
        else:
            h = torch.relu(F.linear(torch.cat([agg, h], dim=1), w_cat, bias))
    out = torch.zeros(groups, h.shape[1], dtype=h.dtype).index_add_(0, batch, h)
    for layer in w.head:
        out = torch.relu(out) if layer is None else F.linear(out, *layer)
    return out.view(-1)


def edge_masks(model: ValidityGNN, graphs: Sequence[tuple[torch.Tensor, torch.Tensor]],
               seeds: Sequence[int], epochs: int = 100, lr: float = 0.01,
               coeffs: dict | None = None) -> list[torch.Tensor]:
    """GNNExplainer's edge mask of every graph, optimised together.

    Args:
        model: The validity GNN (left unchanged; its weights get no gradient).
        graphs: (x, edge_index) of each group, edge_index local to the group; every group has
            at least one edge.
        seeds: Torch seed of each group's initial mask.
        epochs, lr: GNNExplainer's optimisation (Adam, PyTorch's defaults otherwise).
        coeffs: Regularisation coefficients (default `COEFFS`).

    Returns:
        One (edges,) mask per graph, in [0, 1], zero outside the hard mask.

    The caller holds the torch thread count; only private generators are drawn from.
    """
    c = {**COEFFS, **(coeffs or {})}
    if c["edge_reduction"] != "sum":
        raise ValueError("batched GNNExplainer sums the edge-size term")
    n = len(graphs)
    if n == 0:
        return []
    nodes = [int(x.shape[0]) for x, _ in graphs]
    edges = [int(e.shape[1]) for _, e in graphs]
    if min(edges) < 1:
        raise ValueError("every graph explained needs an edge")
    offsets = torch.tensor([0, *nodes[:-1]]).cumsum(0)
    x = torch.cat([g[0] for g in graphs]).to(torch.float32)
    ei = torch.cat([e + int(off) for (_, e), off in zip(graphs, offsets, strict=True)], dim=1)
    src, dst = ei[0].contiguous(), ei[1].contiguous()
    batch = torch.repeat_interleave(torch.arange(n), torch.tensor(nodes))
    edge_graph = torch.repeat_interleave(torch.arange(n), torch.tensor(edges))
    w = _Weights(model)
    root0 = F.linear(x, w.first_root)
    with torch.no_grad():
        target = (_forward(w, x, root0, src, dst, None, batch, n) > 0).to(torch.float32)
    init = []
    gen = torch.Generator()
    for k, e, seed in zip(nodes, edges, seeds, strict=True):
        gen.manual_seed(int(seed))
        std = torch.nn.init.calculate_gain("relu") * math.sqrt(2.0 / (2 * k))
        init.append(torch.randn(e, generator=gen) * std)
    mask = torch.cat(init).requires_grad_(True)
    # Adam as torch.optim.Adam computes it (single-tensor path, no weight decay or amsgrad).
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    exp_avg, exp_avg_sq = torch.zeros_like(mask), torch.zeros_like(mask)
    hard = hard_graph = count = None
    ent_eps = c["EPS"]
    for epoch in range(epochs):
        logits = _forward(w, x, root0, src, dst, mask.sigmoid(), batch, n)
        loss = F.binary_cross_entropy_with_logits(logits, target, reduction="sum")
        if hard is not None:
            m = mask[hard].sigmoid()
            loss = loss + c["edge_size"] * m.sum()
            ent = -m * torch.log(m + ent_eps) - (1 - m) * torch.log(1 - m + ent_eps)
            per_graph = torch.zeros(n).index_add_(0, hard_graph, ent)
            loss = loss + c["edge_ent"] * (per_graph / count).sum()
        (grad,) = torch.autograd.grad(loss, mask)
        with torch.no_grad():
            step = epoch + 1
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step_size = lr / (1 - beta1**step)
            denom = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(eps)
            mask.addcdiv_(exp_avg, denom, value=-step_size)
        if epoch == 0:
            hard = grad != 0.0
            hard_graph = edge_graph[hard]
            count = torch.bincount(hard_graph, minlength=n).clamp(min=1).to(torch.float32)
    out = mask.detach().sigmoid()
    if hard is not None:
        out[~hard] = 0.0
    return list(out.split(edges))
