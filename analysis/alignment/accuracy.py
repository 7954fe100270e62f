"""Accuracy-based alignment: accuracy difference and Brain-Score's accuracy distance with its ceiling.

Accuracy distance (Brain-Score ``accuracy_distance``, ``AccuracyDistance.distance_measure``):
``1 - |a_s - a_t| / max(1 - a_t, a_t - chance)`` for a source accuracy ``a_s`` (the model) and a
target accuracy ``a_t`` (one human), per condition, averaged over conditions, then over humans.
Its leave-one-out ceiling (``leave_one_out_ceiling``) scores each human as the source against the
pooled accuracy of all other humans as the target, averaged over humans and conditions.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def accuracy_difference(a_model: ArrayLike, a_human: ArrayLike) -> np.ndarray:
    """Return ``a_model - a_human`` (Geirhos et al. 2021, accuracy difference; 0 = human accuracy)."""
    return np.asarray(a_model, dtype=float) - np.asarray(a_human, dtype=float)


def accuracy_distance(a_source: ArrayLike, a_target: ArrayLike, chance: float = 0.0) -> np.ndarray:
    """Return ``1 - |a_s - a_t| / max(1 - a_t, a_t - chance)`` (Brain-Score accuracy_distance)."""
    a_s = np.asarray(a_source, dtype=float)
    a_t = np.asarray(a_target, dtype=float)
    span = np.maximum(1.0 - a_t, a_t - chance)
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1.0 - np.abs(a_s - a_t) / span


def leave_one_out_targets(correct: ArrayLike, trials: ArrayLike, weights: ArrayLike) -> np.ndarray:
    """Pooled accuracy of all other humans: ``(sum_j w_j k_j - w_i k_i) / (sum_j w_j n_j - w_i n_i)``.

    ``correct`` and ``trials`` are counts with humans on the last axis; ``weights`` (broadcast to
    them) say how often each human was drawn, so a resampled human's copies all leave together.
    """
    k = np.asarray(correct, dtype=float) * weights
    n = np.asarray(trials, dtype=float) * weights
    with np.errstate(invalid="ignore", divide="ignore"):
        return (k.sum(axis=-1, keepdims=True) - k) / (n.sum(axis=-1, keepdims=True) - n)
