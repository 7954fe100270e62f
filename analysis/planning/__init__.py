"""Planning a model-comparison study by model recovery (``humanlike plan``), and the weights of
adaptive stimulus allocation (docs/planning.md, docs/adaptive.md)."""

from humanlike.analysis.planning.decide import Decisions, decide, draw_counts, resampled_scores
from humanlike.analysis.planning.recovery import UNDECIDED, Plan, PlanInputs, plan_study
from humanlike.analysis.planning.simulate import draw_subsets, simulate_ratings

__all__ = ["UNDECIDED", "Decisions", "Plan", "PlanInputs", "decide", "draw_counts",
           "draw_subsets", "plan_study", "resampled_scores", "simulate_ratings"]
