"""The whole-tensor rule of the exact solver under BRR (docs/exact.md, "The whole-tensor rule").

A matrix product reads its second operand whole for every row it produces, so some tile needs
every row of that operand and of every op it is computed from along ops that read every row of
their input; where such an op's whole tensor (with its inputs' rows and a slice of its weights)
exceeds the buffer, no group holding it and the product fits, whatever the tile count. The
exact solver prunes those sets with their supersets and its lazy search treats the pair as
never sharing a group.
"""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from search.exact import enumerate_space, optimum
from search.exact.candidates import _Growth, bits
from search.exact.solver import ExactCaps
from simulator.cost import CostCache
from simulator.cost.brr import (
    _whole_floors,
    accumulator_elems,
    group_cost,
    incompatibility,
    one_tile_floor,
    tile_regions,
    whole_tensor_rule,
)
from simulator.cost.rows import row_deps
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo
from tests.search.test_exact import _grown_convex

_MODELS = {"deit_s": load_zoo("deit_s", (1, 3, 64, 64)),  # 17 tokens of 384
           "bert_base": load_zoo("bert_base", (1, 16, 768))}  # 16 tokens of 768


def _hw(buffer: int):
    return load_hw("edge-npu", {"buffer": buffer})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(sorted(_MODELS)), at=st.integers(0, 10_000),
       steps=st.lists(st.integers(0, 50), min_size=1, max_size=30),
       buffer=st.sampled_from((8_192, 16_384, 32_768, 65_536)))
def test_a_set_the_rule_rules_out_never_fits(model, at, steps, buffer):
    """Random convex groups of small transformers: a group the rule rules out does not fit
    the buffer (the cost model's own answer), and in every group holding a product and an op
    of its rule, a tile that needs a row of the product needs every row of that op."""
    graph = _MODELS[model]
    hw = _hw(buffer)
    ops = _grown_convex(graph, at % len(graph), steps)
    growth = _Growth(graph, CostCache(graph, hw, "brr"), None, None)
    mask = sum(1 << o for o in ops)
    if growth._whole_tensors(mask):
        assert not group_cost(graph, ops, hw).fits
    deps = row_deps(graph)
    for m, others in whole_tensor_rule(graph, _hw(16)).items():  # every op counts as big
        if not mask >> m & 1:
            continue
        for o in bits(mask & others):
            for tiles in (2, 5):
                regions = tile_regions(graph, ops, tiles)
                needs_m = regions.rows(m) > 0
                assert needs_m.any()
                assert (regions.rows(o)[needs_m] == deps.height_of[o]).all(), (m, o, tiles)


def test_the_rule_is_what_the_whole_floors_say():
    """DeiT-S at 64 x 64: at a buffer below K's projection with all its rows (and the
    normalised input all of them read), the attention product and that projection never
    share a group; above every whole floor the rule is empty."""
    graph = _MODELS["deit_s"]
    act, need = _whole_floors(graph, accumulator_elems(1))
    k_proj = next(op.id for op in graph if op.name.endswith("k_proj"))
    product = next(op.id for op in graph if op.kind.name == "MATMUL")
    rule = whole_tensor_rule(graph, _hw(int(need[k_proj]) - 1))
    assert rule[product] >> k_proj & 1
    assert not whole_tensor_rule(graph, _hw(int(need.max())))


def test_the_rule_prunes_sets_and_keeps_the_optimum():
    """DeiT-S at 64 x 64 under BRR at 8 KiB: the rule prunes sets from the enumeration (with
    their supersets), and the optimum is the one without it (brute-force equality of the
    searches is held by the other exact tests; here the rule must not lose it)."""
    graph = _MODELS["deit_s"]
    hw = _hw(8_192)
    cache = CostCache(graph, hw, "brr")
    space = enumerate_space(graph, cache, max_sets=50_000)
    with_rule = optimum(graph, cache, caps=ExactCaps())
    growth = _Growth(graph, cache, None, None)
    assert growth.whole and any(growth._whole_tensors(m) for m in
                                (1 << a | 1 << b for b, r in growth.whole.items()
                                 for a in bits(r)))
    assert not any(growth._whole_tensors(m) for m in space.masks)
    no_rule = _Growth.__init__  # the rule switched off: the same optimum
    try:
        def init(self, *args, **kwargs):
            no_rule(self, *args, **kwargs)
            self.whole, self.whole_from = {}, 0
        _Growth.__init__ = init
        without = optimum(graph, CostCache(graph, hw, "brr"), caps=ExactCaps())
    finally:
        _Growth.__init__ = no_rule
    assert with_rule.optimal and without.optimal
    assert (with_rule.dram_bytes, with_rule.cycles) == (without.dram_bytes, without.cycles)


_ONE_TILE_ZOO = ("resnet18", "mobilenet_v2", "squeezenet1_0")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(sorted(_MODELS) + list(_ONE_TILE_ZOO)), at=st.integers(0, 10_000),
       steps=st.lists(st.integers(0, 50), min_size=1, max_size=30),
       more=st.lists(st.integers(0, 50), min_size=1, max_size=10),
       buffer=st.sampled_from((16_384, 65_536, 262_144)))
@example(model="squeezenet1_0", at=140, steps=[1], more=[0], buffer=262_144)  # input-sliced
def test_one_tile_floor_holds_and_only_grows(model, at, steps, more, buffer):
    """docs/exact.md, "One tile": on random convex groups (and a superset grown from each),
    the one-tile floor is at most the live activations the cost model's single tile holds at
    its busiest position, a group over it runs at two tiles or more if it fits at all (the
    example: a squeeze conv whose input enters and which runs input-sliced in one tile, holding
    one channel of its input: that input must not count), and a superset's floor is at least
    the set's."""
    graph = _MODELS.get(model) or load_zoo(model)
    ops = _grown_convex(graph, at % len(graph), steps)
    if incompatibility(graph, ops):
        return
    floor = one_tile_floor(graph, ops)
    assert floor <= int(tile_regions(graph, ops, 1).live_elems()[:, 0].max())
    cost = group_cost(graph, ops, _hw(buffer))
    if cost.fits and floor * cost_dtype(buffer) > buffer:
        assert cost.tiles >= 2
    bigger = _grown_convex(graph, at % len(graph), [*steps, *more])  # grows `ops` on
    assert set(ops) <= set(bigger)
    if not incompatibility(graph, bigger):
        assert one_tile_floor(graph, bigger) >= floor


def cost_dtype(buffer: int) -> int:
    """Bytes per element of the edge-npu preset."""
    return _hw(buffer).dtype_bytes
