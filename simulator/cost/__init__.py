"""Analytic cost models of fusion groups: LBDF, BRR and layer by layer (docs/cost-model.md)."""

from simulator.cost.evaluate import (
    COST_MODELS,
    CostCache,
    PlanCost,
    PlanTotals,
    evaluate_plan,
    plan_totals,
)
from simulator.cost.types import Failure, GroupCost, Timing

__all__ = ["COST_MODELS", "CostCache", "Failure", "GroupCost", "PlanCost", "PlanTotals",
           "Timing", "evaluate_plan", "plan_totals"]
