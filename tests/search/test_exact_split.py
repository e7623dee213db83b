"""The exact solver under split buffers (a weight buffer and an activation buffer,
`simulator.hw.HardwareConfig.buffers`): its pruning and bounds read the weight buffer for the
LBDF weight rule and BRR's resident weights, and the shared total elsewhere (a relaxation: a
configuration that fits both buffers fits their total), so the eager and the lazy search still
return the brute-force optimum, and the lazy heuristic stays consistent."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.exact import optimum
from simulator.cost import CostCache
from simulator.hw import load_hw
from simulator.workload.graph import ComputeGraph
from tests.search.conftest import Net, draw_dag
from tests.search.test_exact import _check_optimum
from tests.search.test_exact_lazy import _check_brute, _check_consistent
from tests.search.test_exact_streaming import _check_floors_and_consistency

# (weight buffer, activation buffer): weights tight, activations tight, both, neither
_SPLITS = ((600, 2_400), (2_400, 600), (1_200, 1_800), (4_000, 1_000), (1_000, 4_000),
           (6_000, 6_000))


@st.composite
def split_dags(draw) -> ComputeGraph:
    """Convolutions of 8 or 16 channels (up to 2,320 weights: some exceed a weight buffer
    above, some fit), activations, residual adds and concats over 4-7 ops."""
    return draw_dag(draw, "split", (4, 7), ["conv", "conv", "unary", "add", "concat"],
                    channels=[8, 16])


def _hw(split: tuple[int, int]):
    return load_hw("edge-npu", {"weight_buffer": split[0], "activation_buffer": split[1]})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=split_dags(), scheme=st.sampled_from(("lbdf", "brr", "hybrid")),
       split=st.sampled_from(_SPLITS))
def test_exact_equals_brute_force_under_split_buffers(graph, scheme, split):
    hw = _hw(split)
    _check_optimum(graph, CostCache(graph, hw, scheme))
    _check_brute(graph, CostCache(graph, hw, scheme))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=split_dags(), scheme=st.sampled_from(("lbdf", "brr")),
       split=st.sampled_from(_SPLITS))
def test_lazy_heuristic_stays_consistent_under_split_buffers(graph, scheme, split):
    _check_consistent(graph, CostCache(graph, _hw(split), scheme))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=split_dags(), split=st.sampled_from(_SPLITS))
def test_streaming_floors_stay_below_every_costed_brr_group_under_split_buffers(graph, split):
    """phi(o), with the weight buffer's term, never exceeds what a BRR set that runs pays
    above its compulsory traffic (and h stays consistent)."""
    _check_floors_and_consistency(graph, CostCache(graph, _hw(split), "brr"))


def test_split_buffers_change_what_runs():
    """Non-vacuity: on a 3x3 then a 1x1 convolution of 16 channels (2,320 and 272 weights),
    3,000 bytes split 600/2,400 keep the 3x3 convolution out of every LBDF group (its weights
    exceed the weight buffer), so the optimum moves more than with the buffer shared."""
    net = Net("chain16", (1, 16, 8, 8))
    a = net.conv("c0", "x", 16, k=3)
    b = net.conv("c1", net.unary("r0", a), 16, k=1)
    graph = net.build(net.unary("r1", b))
    shared = CostCache(graph, load_hw("edge-npu", {"buffer": 3_000}), "lbdf")
    split = CostCache(graph, _hw((600, 2_400)), "lbdf")
    assert shared.group((0, 1)).fits and not split.group((0, 1)).fits
    assert split.group((2, 3)).fits
    assert optimum(graph, shared).dram_bytes < optimum(graph, split).dram_bytes
