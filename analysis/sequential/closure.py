"""Closed testing of the family of pairs with Bonferroni-combined sequential tests (Holm's shortcut).

Each intersection H_S of |S| pair nulls is rejected at the first look where some pair j in S crosses
its level-alpha/|S| test (threshold |S|/alpha for e-processes: Vovk & Wang 2021 §5; the
alpha/|S| spending boundaries for group-sequential z: Maurer & Bretz 2013 §3); pair k is decided
once every H_S with k in S has been rejected (Marcus, Peritz & Gabriel 1976), so the family-wise
error stays at alpha. Holm's shortcut (Holm 1979): the last of those rejections, over subset sizes
s, is min(first_k(s), the (s-1)-th largest first_j(s) among the other pairs)."""

from __future__ import annotations

import numpy as np


def first_crossings(crossed: np.ndarray) -> np.ndarray:
    """(..., K) index of the first True along axis -2 of (..., L, K); inf where never."""
    return np.where(crossed.any(-2), np.argmax(crossed, axis=-2), np.inf)


def closed_decision_times(first: np.ndarray) -> np.ndarray:
    """(R, K) look index at which each pair is decided by closed testing; inf where never.

    ``first`` (R, S, K): for subset size s = 1..K (axis 1), the first look at which pair k crosses its
    alpha/s test."""
    n_studies, n_sizes, k = first.shape
    times = np.empty((n_studies, k))
    for pair in range(k):  # K pairs (at most 15): each vectorised over studies and subset sizes
        own = first[:, :, pair]  # (R, S)
        others = -np.sort(-np.delete(first, pair, axis=2), axis=2)  # (R, S, K-1) descending
        worst = own.copy()
        for s in range(2, n_sizes + 1):
            worst[:, s - 1] = np.minimum(own[:, s - 1], others[:, s - 1, s - 2])
        times[:, pair] = worst.max(axis=1)
    return times
