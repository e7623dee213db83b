"""Analytic cycles and peak buffer against the simulator, over the zoo (prints figures).

For every zoo network (the 13 CNNs and vit_b_16, deit_s, bert_base) under LBDF and BRR at
64 KiB, 256 KiB and 2 MiB (edge-npu), the segment-DP plan (`search.baselines.segment_dp`, the
least-DRAM segment plan; the greedy plan where segment_dp fails) is costed (`evaluate_plan`)
and simulated (`simulator.engine`). Each
row prints the analytic cycles (what summaries, sweeps and `compare` report), the simulated
cycles and their relative difference; the roofline max(compute, DRAM) summed over the groups
(the analytic cycles before the schedule-aware model, docs/cost-model.md section 5) and its
difference; the simulated peak buffer next to the largest F_beta over all groups (the
whole-network peak buffer) and the MBU (the largest F_beta over groups of fuseable ops); and
the simulated DRAM against F_D; the analytic energy (DRAM + buffer accesses at the SRAM
model's pJ/B + MACs + leakage x cycles, docs/hardware.md) against the simulator's and their
relative difference. The last lines give the worst disagreements.

    python benchmarks/cycles_agreement.py [--models resnet18,bert_base | --cnn]
                                          [--schemes lbdf,brr] [--buffers 64KiB,256KiB,2MiB]
                                          [--hw edge-npu]
"""

from __future__ import annotations

import argparse
import time

from search.baselines import greedy_fusion, segment_dp
from simulator.cost import CostCache, evaluate_plan
from simulator.engine import SimulationError, simulate
from simulator.hw import load_hw
from simulator.workload.loader import load_zoo
from simulator.workload.zoo import CNN, zoo_names


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(zoo_names()))
    p.add_argument("--schemes", default="lbdf,brr")
    p.add_argument("--buffers", default="64KiB,256KiB,2MiB")
    p.add_argument("--hw", default="edge-npu")
    p.add_argument("--cnn", action="store_true", help="the 13 CNNs of the zoo (not --models)")
    args = p.parse_args()
    models = zoo_names(CNN) if args.cnn else args.models.split(",")
    worst = worst_roof = worst_energy = 0.0
    worst_at = roof_at = energy_at = ""
    peak_over = dram_gap = runs = 0
    skipped: list[str] = []
    start = time.perf_counter()
    print(f"{'model':28s} {'scheme':4s} {'buffer':6s} {'groups':>6s} {'analytic':>13s} "
          f"{'simulated':>13s} {'diff':>8s} {'roofline':>13s} {'diff':>8s} "
          f"{'sim peak':>10s} {'max F_beta':>10s} {'MBU':>10s} {'energy uJ':>12s} "
          f"{'sim uJ':>12s} {'diff':>9s} {'leak uJ':>8s} {'s':>6s}")
    for name in models:
        graph = load_zoo(name)
        for scheme in args.schemes.split(","):
            for buffer in args.buffers.split(","):
                hw = load_hw(args.hw, {"buffer": buffer})
                t0 = time.perf_counter()
                cache = CostCache(graph, hw, scheme)
                try:
                    plan = segment_dp(graph, cache).plan
                except (TypeError, ValueError):  # no segment plan runs (a prefix
                    plan = greedy_fusion(graph, cache)  # unreachable): the greedy plan instead
                    print(f"{name:28s} {scheme:4s} {buffer:6s} (segment_dp failed: greedy plan)")
                cost = evaluate_plan(graph, plan, hw, scheme, cache)
                label = f"{name:28s} {scheme:4s} {buffer:6s}"
                if not cost.valid:
                    skipped.append(f"{label.strip()}: {cost.violations[0][:70]}")
                    print(f"{label} skipped: {cost.violations[0][:70]}")
                    continue
                try:
                    rep = simulate(graph, plan, hw, scheme, record=False, cache=cache,
                                   checked=True)
                except SimulationError as e:
                    skipped.append(f"{label.strip()}: {e}")
                    print(f"{label} refused: {e}")
                    continue
                seconds = time.perf_counter() - t0
                runs += 1
                roof = sum(max(c.timing.compute_cycles, c.timing.dram_cycles)
                           for c in cost.groups)
                diff = (cost.cycles - rep.cycles) / rep.cycles
                rdiff = (roof - rep.cycles) / rep.cycles
                fbeta = max(c.buffer_bytes for c in cost.groups)
                ediff = (cost.energy_pj - rep.energy_pj) / rep.energy_pj
                if abs(ediff) >= abs(worst_energy):
                    worst_energy, energy_at = ediff, label.strip()
                if abs(diff) >= abs(worst):
                    worst, worst_at = diff, label.strip()
                if abs(rdiff) >= abs(worst_roof):
                    worst_roof, roof_at = rdiff, label.strip()
                peak_over = max(peak_over, rep.peak_buffer_bytes - fbeta)
                dram_gap = max(dram_gap, abs(rep.dram_bytes - cost.dram_bytes))
                print(f"{label} {len(plan):6d} {cost.cycles:13,d} {rep.cycles:13,d} "
                      f"{diff:+8.3%} {roof:13,d} {rdiff:+8.2%} {rep.peak_buffer_bytes:10,d} "
                      f"{fbeta:10,d} {cost.mbu:10,d} {cost.energy_pj / 1e6:12,.3f} "
                      f"{rep.energy_pj / 1e6:12,.3f} {ediff:+9.4%} "
                      f"{rep.energy_leak_pj / 1e6:8.3f} {seconds:6.1f}", flush=True)
    print(f"\n{runs} runs in {time.perf_counter() - start:.0f} s; worst analytic vs simulated "
          f"cycles {worst:+.3%} ({worst_at}); roofline (the former analytic cycles) "
          f"{worst_roof:+.2%} ({roof_at}); simulated peak - max F_beta at most {peak_over} B; "
          f"DRAM mismatch at most {dram_gap} B; worst analytic vs simulated energy "
          f"{worst_energy:+.4%} ({energy_at})")
    for s in skipped:
        print(f"skipped {s}")


if __name__ == "__main__":
    main()
