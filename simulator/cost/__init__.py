"""Analytic cost models of fusion groups: LBDF, BRR and layer by layer (docs/cost-model.md)."""

from simulator.cost.evaluate import (
    SCHEMES,
    CostCache,
    PlanCost,
    evaluate_plan,
    get_scheme,
    unfusable_ops,
)
from simulator.cost.types import GroupCost, Timing

__all__ = ["SCHEMES", "CostCache", "GroupCost", "PlanCost", "Timing", "evaluate_plan",
           "get_scheme", "unfusable_ops"]
