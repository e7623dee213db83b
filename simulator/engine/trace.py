"""Chrome trace-event JSON of a simulation (opens in Perfetto or chrome://tracing)."""

from __future__ import annotations

from typing import Any

from simulator.engine.report import SimReport

__all__ = ["chrome_trace"]

_GROUPS, _READS, _WRITES = 1, 2, 3


def chrome_trace(report: SimReport, names: list[str], max_counter_points: int = 20_000,
                 ) -> dict[str, Any]:
    """Groups, DRAM transfers and buffer occupancy as trace events (timestamps in us)."""
    us = 1e6 / report.clock_hz
    events: list[dict[str, Any]] = [
        _meta("process_name", 0, {"name": f"fusion-dse simulation ({report.scheme})"}),
        _meta("thread_name", _GROUPS, {"name": "groups (PE array)"}),
        _meta("thread_name", _READS, {"name": "DRAM reads"}),
        _meta("thread_name", _WRITES, {"name": "DRAM writes"}),
    ]
    for g in report.groups:
        first = names[g.ops[0]]
        events.append({
            "name": f"group {g.index}: {first}" + (f" +{len(g.ops) - 1}" if len(g.ops) > 1
                                                   else ""),
            "ph": "X", "pid": 0, "tid": _GROUPS, "ts": g.start * us,
            "dur": max(g.cycles, 1) * us,
            "args": {"ops": [names[o] for o in g.ops], "mode": g.mode, "bound": g.bound,
                     "compute_cycles": g.compute_cycles, "stall_cycles": g.stall_cycles,
                     "dram_bytes": g.dram_bytes, "peak_buffer_bytes": g.peak_buffer_bytes},
        })
    for t in report.transfers:
        events.append({"name": t.tensor, "ph": "X", "pid": 0,
                       "tid": _WRITES if t.write else _READS, "ts": t.start * us,
                       "dur": max(t.end - t.start, 1) * us, "args": {"bytes": t.nbytes}})
    step = max(1, len(report.occupancy) // max_counter_points)
    for cycle, level in report.occupancy[::step]:
        events.append({"name": "buffer occupancy", "ph": "C", "pid": 0, "ts": cycle * us,
                       "args": {"bytes": level}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"scheme": report.scheme, "cycles": report.cycles}}


def _meta(name: str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": 0, "tid": tid, "args": args}
