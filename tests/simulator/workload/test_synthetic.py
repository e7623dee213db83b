"""Synthetic networks of the IR (simulator.workload.synthetic)."""

from __future__ import annotations

from collections import Counter

import pytest

from simulator.workload.graph import OpKind
from simulator.workload.synthetic import hrnet_like, parallel_branches


def test_hrnet_like_is_hrnet_w18_small():
    """The figures of timm's hrnet_w18_small as `from_torch` imports it (225 ops; BatchNorm
    folded): weights, MACs and op kinds."""
    g = hrnet_like()
    assert len(g) == 225
    assert sum(op.weight_elems for op in g) == 13_171_608
    assert sum(op.macs for op in g) == 1_601_508_352
    kinds = Counter(op.kind for op in g)
    assert kinds[OpKind.CONV] == 91 and kinds[OpKind.RESIZE] == 10
    assert g[len(g) - 1].output_shape == (1, 1000)


def test_hrnet_like_without_stem_and_head_outputs_every_branch():
    g = hrnet_like(resolution=16, widths=(2, 4, 8), blocks=1, head=False, stem=False)
    assert [g[o].output_shape for o in g.outputs] == [(1, 2, 16, 16), (1, 4, 8, 8),
                                                       (1, 8, 4, 4)]


def test_parallel_branches_shape():
    g = parallel_branches(stages=2, branches=4, depth=3, width=8, resolution=16)
    assert len(g) == 2 + 2 * (4 * 3 * 2 + 3)
    assert g[g.outputs[0]].output_shape == (1, 8, 16, 16)


def test_hrnet_like_needs_two_branches():
    with pytest.raises(ValueError, match="two branches"):
        hrnet_like(widths=(16,))
