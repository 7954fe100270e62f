"""Anytime-valid and declared-look decisions between models from per-participant score differences."""

from humanlike.analysis.sequential.decide import SCHEMES, SequentialDecision, decide

__all__ = ["SCHEMES", "SequentialDecision", "decide"]
