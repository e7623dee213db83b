"""`simulate`: run a partition plan on the simulated machine, group after group.

Groups run one at a time in a topological order of the graph of groups (the smallest op id
first among those ready). A group runs as the cost layer says it runs (`CostCache.run`): under
the plan's dataflow, or, for an unfusable op and every group of a layer-by-layer plan, on its
own (`simulator.cost.lbl.layer_tiling`): its rows streamed as a single-op LBDF group when that
fits, else tiled to the buffer (`simulator.engine.layer`). The buffer is enforced for every
group; a group that cannot run is refused with the reason (`SimulationError`; see
docs/simulator.md).

Energy is the analytic model's formula (docs/hardware.md) on what the simulation did: the DRAM
bytes it moved, the MACs it ran, the first-order buffer accesses of the ops it ran plus every
DRAM byte through the buffer (`simulator.cost.traffic.buffer_traffic_elems`; the event-level
`GroupSim.buffer_traffic_bytes` is reported apart), and the buffers' leakage over the simulated
cycles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.cost import CostCache, GroupCost
from simulator.cost.traffic import buffer_traffic_elems, weight_traffic_elems
from simulator.dataflow import dataflow
from simulator.engine.machine import Machine, SimulationError
from simulator.engine.report import GroupSim, SimReport
from simulator.partition import topological_order, violations
from simulator.plan import PartitionPlan
from simulator.scheme import Scheme
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["simulate"]


def simulate(graph: ComputeGraph, plan: PartitionPlan, hw: HardwareConfig, scheme: str | Scheme,
             record: bool = True, cache: CostCache | None = None,
             checked: bool = False) -> SimReport:
    """Execute `plan` event by event and report time, traffic and buffer occupancy.

    Args:
        graph, plan, hw: The network, its partition and the machine.
        scheme: The dataflow (`Scheme` or its name).
        record: Keep the occupancy timeline and every DRAM transfer (for plots and traces).
        cache: Group costs of (graph, hw, scheme) to reuse; they say how each group runs.
        checked: The caller has already checked that `plan` is a partition of `graph`.

    Raises:
        InputError: An unknown scheme.
        SimulationError: The plan is not a partition, or a group cannot run in the buffer
            (named, with the reason: what could not be allocated, an op whose smallest tile
            does not fit, a layer-by-layer group of several ops, a BRR-incompatible group).
    """
    scheme = Scheme.parse(scheme)
    problems = [] if checked else violations(graph, plan, limit=2)
    if problems:
        raise SimulationError(f"cannot simulate: {'; '.join(problems)}")
    cache = cache or CostCache(graph, hw, scheme)
    if cache.scheme is not scheme:
        raise ValueError(f"the cost cache is for scheme '{cache.scheme}', not '{scheme}'")
    machine = Machine(hw, record=record)
    groups = []
    for k in topological_order(graph, plan):
        groups.append(_run_group(machine, graph, k, cache.run(plan.groups[k].ops), hw))
    accesses = sum(buffer_traffic_elems(graph, g.ops) * hw.dtype_bytes + g.dram_bytes
                   for g in groups)
    weights = sum(weight_traffic_elems(graph, g.ops) * hw.dtype_bytes
                  + sum(n for t, n in g.dram_read.items() if t.endswith(".weights"))
                  for g in groups) if hw.is_split else None
    return _report(machine, scheme, tuple(groups), accesses, weights)


def _run_group(m: Machine, graph: ComputeGraph, k: int, cost: GroupCost,
               hw: HardwareConfig) -> GroupSim:
    """Run one group the way its cost says it runs: its dataflow's runner
    (`simulator.dataflow`, by `GroupCost.scheme`) replays the schedule the cost chose."""
    ops, mode = cost.ops, cost.scheme
    label = f"{k} ({graph[ops[0]].name}, {len(ops)} ops)"
    run = dataflow(mode).run(m, graph, cost, hw, label)
    m.reset_group_counters()
    start = m.now
    m.run_group(run.body, label)
    c = m.counters
    return GroupSim(
        index=k, ops=ops, mode=mode, start=start, end=m.now, compute_cycles=c.pe_busy,
        stall_cycles=c.stall, dram_read=dict(c.read_bytes), dram_write=dict(c.write_bytes),
        peak_buffer_bytes=m.peak, macs=c.macs, events=c.events,
        buffer_traffic_bytes=c.buffer_bytes, tiles=run.tiles,
        weights_streamed=run.weights_streamed, tiling=run.tiling,
        peak_by_buffer=tuple(m.peaks.items()) if hw.is_split else (),
    )


def _report(m: Machine, scheme: Scheme, groups: tuple[GroupSim, ...],
            buffer_accesses: int, weight_accesses: int | None = None) -> SimReport:
    hw = m.hw
    dram = sum(g.dram_bytes for g in groups)
    return SimReport(
        scheme=scheme, groups=groups, cycles=m.now, clock_hz=hw.clock_hz,
        macs_per_cycle=hw.macs_per_cycle,
        energy_dram_pj=dram * hw.energy_dram_pj_per_byte,
        energy_buffer_pj=hw.buffer_energy_pj(buffer_accesses, weight_accesses),
        energy_mac_pj=sum(g.macs for g in groups) * hw.energy_mac_pj,
        energy_leak_pj=m.now * hw.leakage_pj_per_cycle, area_mm2=hw.area_mm2,
        events=sum(g.events for g in groups),
        occupancy=tuple(m.occupancy), transfers=tuple(m.transfers),
    )
