"""The defaults of the explanation layer's jobs, in a module that imports nothing, so that the
command line shows them (``cli.toml``'s ``default_from`` and help texts) without torch.

The modules that use them (`explain.train`, `explain.pretrain`, `explain.dataset`,
`explain.tree_split`, `fusion_dse.explanation`) read them from here; this is their only home.
"""

from __future__ import annotations

__all__ = ["EPOCHS", "EXPLAINER", "EXPLAIN_TOP", "HELD_OUT_GROUPS", "MAX_EDGES", "PRETRAIN",
           "PRETRAIN_HELD_OUT", "PRETRAIN_TOP", "THREADS"]

EPOCHS = 50
"""Training epochs of the validity GNN (`explain.train.TrainConfig`)."""
THREADS = 1
"""torch threads while training (the faster on this project's 2-core machine, docs/gnn.md)."""
HELD_OUT_GROUPS = 1000
"""Groups drawn per held-out network to measure a trained GNN (`explain.dataset`)."""

PRETRAIN = {"pg": {"epochs": 30, "per_network": 40}, "rg": {"epochs": 10, "per_network": 40}}
"""Epochs and invalid samples per training network of the shipped explainer parameters."""
PRETRAIN_HELD_OUT = 10
"""Invalid groups per network in a pre-trained explainer's measurement."""
PRETRAIN_TOP = 4
"""Explained edges per group in that measurement."""

MAX_EDGES = 4
"""Explained edges an explanation-guided repair considers per group (`GetSplitter`)."""
EXPLAINER = "gnne"
"""The explainer of ``fusion-dse explain`` (`fusion_dse.explanation.explain_group`)."""
EXPLAIN_TOP = 8
"""Explained edges ``fusion-dse explain`` lets the splitter consider."""
