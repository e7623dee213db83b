"""The compiled LBDF cost model (`simulator.cost.lbdf` over `simulator.cost._lbdf_kernels`)
against the numpy reference implementation it replaced (`lbdf_reference.py`): every figure of
every group, its event order and its cycles are the same, bit for bit, on random groups of
small random graphs and of zoo networks (CNNs: windows, strides, residuals, SE blocks,
upsampling, concats; transformers: token rows, attention's keys and values read whole, the
class-token slice), at pixel and at row granularity.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost import _lbdf_kernels, lbdf
from simulator.cost.cycles import lbdf_cycles
from simulator.hw import HardwareConfig, load_hw
from simulator.partition import components
from simulator.workload.graph import ComputeGraph, GraphError
from simulator.workload.loader import load_zoo
from tests.simulator.cost import lbdf_reference as reference
from tests.simulator.cost.test_lbdf_pixel import GRAPHS, small_groups

ZOO = {"mobilenet_v3_small": (1, 3, 64, 64), "squeezenet1_0": (1, 3, 64, 64),
       "resnet18": (1, 3, 64, 64), "efficientnet_b0": (1, 3, 64, 64),
       "deeplabv3_mobilenet_v3_large": (1, 3, 64, 64), "vit_b_16": (1, 3, 64, 64)}


@cache
def _network(name: str) -> ComputeGraph:
    if name == "bert_2layers@32":
        from simulator.workload.torch_import import from_torch
        from simulator.workload.zoo.bert import BertEncoder

        return from_torch(BertEncoder(2, 768, 12, 3072), (1, 32, 768), name="bert_2layers")
    return load_zoo(name, ZOO[name])


@st.composite
def zoo_groups(draw) -> tuple[ComputeGraph, tuple[int, ...]]:
    """A connected group of up to 30 consecutive ops of a zoo network."""
    graph = _network(draw(st.sampled_from([*ZOO, "bert_2layers@32"])))
    first = draw(st.integers(0, len(graph) - 1))
    last = draw(st.integers(first, min(len(graph), first + 30) - 1))
    return graph, tuple(sorted(max(components(graph, range(first, last + 1)), key=len)))


def _hws() -> list[HardwareConfig]:
    return [load_hw("edge-npu", {"buffer": buffer, "lbdf_buffer": granularity,
                                 "dtype_bytes": d})
            for buffer in ("16KiB", "1MiB") for granularity in ("pixel", "row") for d in (1, 2)]


HWS = _hws()


def _figures(cost) -> tuple:
    t = cost.timing
    return (cost.scheme, cost.ops, cost.buffer_bytes, cost.weight_buffer_bytes,
            cost.dram_act_read, cost.dram_weight_read, cost.dram_write, cost.macs, cost.fits,
            cost.reason, cost.failure, cost.tiles, t.compute_cycles, t.dram_cycles, t.cycles,
            t.energy_dram_pj, t.energy_buffer_pj, t.energy_mac_pj)


def _same_order(a: lbdf.RowOrder, b: reference.RowOrder) -> None:
    assert (a.refs, a.heights, a.n_entering) == (b.refs, b.heights, b.n_entering)
    for field in ("tensor", "row", "block", "levels"):
        x, y = getattr(a, field), getattr(b, field)
        assert (x is None) == (y is None), field
        if x is not None:
            assert x.dtype == np.int64 and np.array_equal(x, y), field


def _check(graph: ComputeGraph, ops: tuple[int, ...]) -> None:
    for hw in HWS:
        assert _figures(lbdf.group_cost(graph, ops, hw)) == \
            _figures(reference.group_cost(graph, ops, hw))
    for granularity in ("pixel", "row"):
        assert lbdf.line_buffer_elems(graph, ops, granularity) == \
            reference.line_buffer_elems(graph, ops, granularity)
        order = lbdf.row_order(graph, ops, granularity)
        _same_order(order, reference.row_order(graph, ops, granularity))
        hw = HWS[0]
        assert lbdf_cycles(graph, ops, order, hw) == \
            reference.lbdf_cycles(graph, ops, reference.row_order(graph, ops, granularity), hw)
    assert lbdf.peak_row_bytes(graph, ops) == reference.peak_row_bytes(graph, ops)


@settings(max_examples=150, deadline=None)
@given(small_groups())
def test_small_random_groups_cost_the_same_as_the_reference(case):
    _check(*case)


@settings(max_examples=120, deadline=None)
@given(zoo_groups())
def test_zoo_groups_cost_the_same_as_the_reference(case):
    _check(*case)


@pytest.mark.parametrize("name", list(GRAPHS))
def test_every_sub_group_of_the_small_graphs(name):
    graph = GRAPHS[name]
    n = len(graph)
    for i in range(n):
        for j in range(i + 1, n + 1):
            for group in components(graph, range(i, j)):
                _check(graph, tuple(sorted(group)))


def test_op_ids_are_checked():
    graph = GRAPHS["two 3x3 convs"]
    with pytest.raises(GraphError):
        lbdf.line_buffer_elems(graph, (0, 5))
    with pytest.raises(ValueError, match="twice"):
        lbdf.group_cost(graph, (0, 0), HWS[0])


def test_the_tables_are_built_once_per_graph_and_never_written():
    # costing every sub-group in one order, in the reverse order, or each with fresh tables
    # agrees, and the tables a graph's groups were costed with equal fresh ones
    graph = _network("mobilenet_v3_small")
    groups = [tuple(sorted(c)) for i in range(0, 40, 3) for j in range(i + 1, i + 12)
              for c in components(graph, range(i, j))]
    _lbdf_kernels.lbdf_tables.cache_clear()
    first = [lbdf.row_order(graph, g, "pixel") for g in groups]
    used, fresh = _lbdf_kernels.lbdf_tables(graph), _lbdf_kernels.LbdfTables(graph)
    for a, b in zip(used.args, fresh.args, strict=True):
        assert np.array_equal(a, b)
    last = [lbdf.row_order(graph, g, "pixel") for g in reversed(groups)][::-1]
    for a, b in zip(first, last, strict=True):
        _same_order(a, b)  # (a RowOrder compared with a RowOrder)
