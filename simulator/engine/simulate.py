"""`simulate`: run a partition plan on the simulated machine, group after group.

Groups run one at a time in a topological order of the graph of groups (the smallest op id
first among those ready). A group runs under the plan's dataflow; unfusable ops, and every
group of a layer-by-layer plan, run as single-op row-streaming groups whose buffer use is
recorded but not limited (layer-by-layer execution is valid by definition; see
docs/simulator.md).
"""

from __future__ import annotations

import heapq
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from simulator.cost import CostCache, get_scheme
from simulator.cost.brr import chosen_tiling, incompatibility
from simulator.engine.brr import run_brr_group
from simulator.engine.lbdf import run_lbdf_group
from simulator.engine.machine import Machine, SimulationError
from simulator.engine.report import GroupSim, SimReport
from simulator.plan import PartitionPlan, structural_violations
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["execution_order", "simulate"]


def execution_order(graph: ComputeGraph, plan: PartitionPlan) -> list[int]:
    """Group indices in a topological order of the graph of groups (smallest op id first)."""
    group_of = plan.group_of
    succ: dict[int, set[int]] = {k: set() for k in range(len(plan.groups))}
    indeg = dict.fromkeys(succ, 0)
    for i, j in graph.edges():
        a, b = group_of[i], group_of[j]
        if a != b and b not in succ[a]:
            succ[a].add(b)
            indeg[b] += 1
    ready = [(plan.groups[k].ops[0], k) for k, n in indeg.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(k)
        for b in succ[k]:
            indeg[b] -= 1
            if indeg[b] == 0:
                heapq.heappush(ready, (plan.groups[b].ops[0], b))
    return order


def simulate(graph: ComputeGraph, plan: PartitionPlan, hw: HardwareConfig, scheme: str,
             record: bool = True) -> SimReport:
    """Execute `plan` event by event and report time, traffic and buffer occupancy.

    Args:
        graph, plan, hw: The network, its partition and the machine.
        scheme: "lbdf", "brr" or "lbl".
        record: Keep the occupancy timeline and every DRAM transfer (for plots and traces).

    Raises:
        SimulationError: The plan is not a partition, or a group cannot run in the buffer
            (named, with what could not be allocated).
    """
    scheme = scheme.lower()
    get_scheme(scheme)
    problems = structural_violations(graph, plan, limit=2)
    if problems:
        raise SimulationError(f"cannot simulate: {'; '.join(problems)}")
    machine = Machine(hw, record=record)
    unfusable = set(CostCache(graph, hw, scheme).unfusable)
    groups = []
    for k in execution_order(graph, plan):
        ops = plan.groups[k].ops
        alone = scheme == "lbl" or (len(ops) == 1 and ops[0] in unfusable)
        groups.append(_run_group(machine, graph, k, ops, hw, "lbl" if alone else scheme))
    return _report(machine, scheme, tuple(groups))


def _run_group(m: Machine, graph: ComputeGraph, k: int, ops: tuple[int, ...],
               hw: HardwareConfig, mode: str) -> GroupSim:
    label = f"{k} ({graph[ops[0]].name}, {len(ops)} ops)"
    tiles, streamed = 1, False
    if mode == "brr":
        reason = incompatibility(graph, ops)
        if reason:
            raise SimulationError(f"group {label} cannot run under BRR: {reason}")
        tiling = chosen_tiling(graph, ops, hw)
        tiles, streamed = tiling.tiles, tiling.streamed

        def body() -> Generator[Any, Any, None]:
            yield from run_brr_group(m, graph, ops, tiling)
    else:
        def body() -> Generator[Any, Any, None]:
            yield from run_lbdf_group(m, graph, ops)
    m.reset_group_counters()
    start = m.now
    m.run_group(body, label, enforce=mode != "lbl")
    c = m.counters
    return GroupSim(
        index=k, ops=ops, mode=mode, start=start, end=m.now, compute_cycles=c.pe_busy,
        stall_cycles=c.stall, dram_read=dict(c.read_bytes), dram_write=dict(c.write_bytes),
        peak_buffer_bytes=m.peak, macs=c.macs, events=c.events,
        buffer_traffic_bytes=c.buffer_bytes, tiles=tiles, weights_streamed=streamed,
    )


def _report(m: Machine, scheme: str, groups: tuple[GroupSim, ...]) -> SimReport:
    hw = m.hw
    dram = sum(g.dram_bytes for g in groups)
    return SimReport(
        scheme=scheme, groups=groups, cycles=m.now, clock_hz=hw.clock_hz,
        macs_per_cycle=hw.macs_per_cycle,
        energy_dram_pj=dram * hw.energy_dram_pj_per_byte,
        energy_buffer_pj=sum(g.buffer_traffic_bytes for g in groups)
        * hw.energy_buffer_pj_per_byte,
        energy_mac_pj=sum(g.macs for g in groups) * hw.energy_mac_pj,
        events=sum(g.events for g in groups),
        occupancy=tuple(m.occupancy), transfers=tuple(m.transfers),
    )
