"""The cycle-approximate discrete-event simulator (simpy) of fusion plans (docs/simulator.md)."""

from simulator.engine.machine import SimulationError, Transfer
from simulator.engine.report import GroupSim, SimReport
from simulator.engine.simulate import simulate

__all__ = ["GroupSim", "SimReport", "SimulationError", "Transfer", "simulate"]
