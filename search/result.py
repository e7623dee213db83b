"""The result of a search: best plan, its cost, the history of evaluations and a summary.

History columns (one row per proposed-and-evaluated plan, in order; stable names):

==============================  ==========================================================
``evaluation``                  1-based index of the plan in the budget
``dram_bytes``                  DRAM traffic of the plan, whole network
``dram_bytes_fuseable``         DRAM traffic of its groups of fuseable ops (paper's scope)
``mbu_bytes``                   max buffer usage over its groups of fuseable ops (paper's MBU)
``fused_mbu_bytes``             largest F_beta over its groups of two or more ops (0 if none)
``cycles``                      analytic cycles
``groups``                      number of groups
``valid``                       the plan is valid (always true: a search only records valid plans)
``best_dram_bytes``             least ``dram_bytes`` so far (valid plans)
``best_dram_bytes_fuseable``    ``dram_bytes_fuseable`` of that best plan
==============================  ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from simulator.cost import PlanCost
from simulator.plan import PartitionPlan
from simulator.workload.graph import ComputeGraph

if TYPE_CHECKING:
    from simulator.hw import HardwareConfig

__all__ = ["HISTORY_COLUMNS", "OBJECTIVE_COLUMNS", "SearchResult", "empty_history"]

HISTORY_COLUMNS = ("evaluation", "dram_bytes", "dram_bytes_fuseable", "mbu_bytes",
                   "fused_mbu_bytes", "cycles", "groups", "valid", "best_dram_bytes",
                   "best_dram_bytes_fuseable")

OBJECTIVE_COLUMNS = {"dram": "dram_bytes", "mbu": "fused_mbu_bytes", "cycles": "cycles"}
"""History / Pareto column of each objective."""


def empty_history() -> pd.DataFrame:
    """A history with no rows and the stable columns."""
    return pd.DataFrame({c: pd.Series(dtype="bool" if c == "valid" else "int64")
                         for c in HISTORY_COLUMNS})


@dataclass(frozen=True)
class SearchResult:
    """What a search found (the DataFrames are not to be modified).

    Attributes:
        graph: The network.
        hw: The hardware configuration.
        plan: The valid plan with the least DRAM traffic found.
        cost: Its full cost (`simulator.cost.evaluate_plan`).
        history: One row per evaluated plan (`HISTORY_COLUMNS`).
        summary: JSON-ready figures (see docs/search.md for the keys).
        pareto: With several objectives, the non-dominated plans found: columns
            ``evaluation``, the objective columns (`OBJECTIVE_COLUMNS`), then
            ``dram_bytes_fuseable``, ``mbu_bytes`` and ``groups``, sorted by DRAM; None with
            one objective.
        front: The plans of the `pareto` rows, in the same order.
    """

    graph: ComputeGraph
    hw: HardwareConfig
    plan: PartitionPlan
    cost: PlanCost
    history: pd.DataFrame
    summary: dict[str, Any]
    pareto: pd.DataFrame | None = None
    front: tuple[PartitionPlan, ...] = field(default=())

    @property
    def budget_used(self) -> int:
        """Plans proposed and evaluated."""
        return len(self.history)
