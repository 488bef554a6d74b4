"""The planner: enumerate parallel layouts, screen memory, bound and rank them with the core estimator,
and explain the winner in terms of the interconnect tiers its traffic crosses."""

from tierwise.planner.answer import answer_plans, answer_scale, plan_document, scale_document
from tierwise.planner.branch_and_bound import OBJECTIVES, SearchResult, search
from tierwise.planner.capacity import MinimumFit, min_gpus_to_fit
from tierwise.planner.results import GpuUse, NearMiss, PlanAnswer, RankedPlan, ScaleAnswer, ScalePoint
from tierwise.planner.space import Constraints, build_space

__all__ = ["Constraints", "build_space", "search", "SearchResult", "OBJECTIVES", "plan_document", "scale_document",
           "min_gpus_to_fit", "MinimumFit", "answer_plans", "answer_scale", "PlanAnswer", "RankedPlan", "NearMiss",
           "GpuUse", "ScaleAnswer", "ScalePoint"]
