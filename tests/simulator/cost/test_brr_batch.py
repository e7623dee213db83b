"""BRR tile costs computed for several tile counts in one pass equal one count at a time."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.cost.brr import TileRegions, _blocks, _Layout, tile_regions
from simulator.cost.rows import row_deps
from simulator.workload.loader import load_zoo


def _groups(graph, sizes):
    """Contiguous windows of ops (ids are topological): convex enough for the cost model."""
    for start, size in sizes:
        yield tuple(range(start, min(start + size, len(graph))))


@pytest.mark.parametrize("model", ["resnet18", "efficientnet_b0", "squeezenet1_0"])
def test_batched_counts_equal_single_counts(model):
    graph = load_zoo(model)
    deps = row_deps(graph)
    for ops in _groups(graph, [(0, 6), (5, 20), (20, 40), (len(graph) - 12, 12)]):
        layout = _Layout(graph, ops, deps, 4)
        counts = (1, 2, 3, 4, 8, 13, int(layout.heights.max()))
        together = _blocks(layout, counts)
        for n in counts:
            alone = _blocks(_Layout(graph, ops, deps, 4), (n,))[n]
            assert _summary(alone) == _summary(together[n])
            assert (alone.rows == together[n].rows).all()
            assert (alone.live == together[n].live).all()


def _summary(b) -> tuple:
    """What the configuration of a tile count is computed from."""
    return (b.tiles, b.act, b.macs, b.held_w, b.floor, b.finest, b.sliced_finest, b.least)


def test_regions_live_elements_match_lifetimes():
    """live_elems is the sum, over tensors whose lifetime covers a position, of their rows."""
    graph = load_zoo("resnet18")
    ops = tuple(range(3, 15))
    regions = tile_regions(graph, ops, 4)
    assert isinstance(regions, TileRegions)
    live = regions.live_elems()
    expected = np.zeros_like(live)
    for (born, dies), ref in zip(regions.lifetimes(), regions.refs, strict=True):
        expected[born:dies + 1] += regions.rows(ref) * row_deps(graph).row_elems_of[ref]
    assert (live == expected).all()
    assert all(regions.first[r].shape == (4,) and regions.last[r].shape == (4,)
               for r in regions.refs)
