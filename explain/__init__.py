"""Explanation-guided repair of fusion groups (Mills et al., "Applying Graph Explanation to
Operator Fusion"): the fusion-group dataset, the GNN that predicts whether a group fits the
on-chip buffer, and its shipped checkpoints.

Modules:
    features: the versioned node-feature schema and the encoding of a group as a small graph.
    sampling: random-search partition proposals and the distinct groups they contain.
    dataset: labelled, cached datasets of groups per dataflow (Table I).
    stats: dataset counts and the valid-share-vs-buffer plot (Fig. 3).
    batch: flat packing of encoded groups and PyG-layout mini-batches.
    gnn: the GraphConv classifier.
    train: the split, training loop and metrics.
    checkpoint: saving and verified loading of checkpoints (shipped in ``checkpoints/``).
    predict: `predict_valid`, the batched prediction API the splitter uses.
    pipeline: `train_gnn`, what ``fusion-dse train-gnn`` runs.

The package imports `simulator` (and may import `search`), never `fusion_dse`; importing it
loads neither torch nor a model.
"""

__all__: list[str] = []
