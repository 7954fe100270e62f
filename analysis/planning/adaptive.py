"""Adaptive allocation weights: favour the stimuli on which the models of the comparisons still
undecided disagree most, relative to the human noise there (docs/adaptive.md).

For an undecided pair (a, b) a stimulus' information is its models' squared disagreement
D_ab(s) = mean_k (p_a[s, k] - p_b[s, k])^2 over the human noise variance sigma^2(s): the
signal-to-noise ratio with which one rating tells a from b (the model-discrimination criterion of
Cavagnaro et al. 2010 and Cooke et al. 2018, for Gaussian rating noise). The weight of s is
w(s) = sum over undecided pairs of D_ab(s) / sigma^2(s), normalised to sum to one; with nothing
undecided (or no disagreement) the weights are uniform."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from humanlike.analysis.planning.decide import model_pairs


def disagreement(probabilities: np.ndarray) -> np.ndarray:
    """(P, S) mean squared difference over categories of each model pair's probabilities."""
    y = np.asarray(probabilities, dtype=float)
    pairs = model_pairs(y.shape[0])
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    return ((y[a] - y[b]) ** 2).mean(-1)


def stimulus_noise(ratings: np.ndarray, floor: float = 0.05, prior_dof: float = 10.0) -> np.ndarray:
    """(..., S) human noise SD per stimulus from (..., N, S, K) ratings (NaN: not rated): each
    stimulus' pooled variance around its (stimulus, category) means, shrunk towards the overall
    pooled variance as if that were ``prior_dof`` more degrees of freedom (the scaled-inverse-chi^2
    posterior mean of a normal variance; Gelman et al. 2013, ch. 3.2), so a stimulus rated by few
    people does not get an extreme weight; 0.25 with no data; never below ``floor``."""
    x = np.asarray(ratings, dtype=float)
    observed = np.isfinite(x)
    n = observed.sum(-3)  # (..., S, K)
    mean = np.where(n > 0, np.nansum(x, -3) / np.maximum(n, 1), 0.0)
    squares = np.where(observed, (np.where(observed, x, 0.0) - mean[..., None, :, :]) ** 2, 0.0)
    ss = squares.sum(-3).sum(-1)  # (..., S)
    dof = np.clip(n - 1, 0, None).sum(-1)
    total_dof = dof.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = np.where(total_dof > 0, ss.sum(-1, keepdims=True) / total_dof, 0.25**2)
    variance = (ss + prior_dof * pooled) / (dof + prior_dof)
    return np.maximum(np.sqrt(variance), floor)


def allocation_weights(
    probabilities: np.ndarray, undecided: np.ndarray, noise_sd: np.ndarray | float,
) -> np.ndarray:
    """(..., S) weights summing to one: sum of D_ab(s) over the undecided pairs (boolean
    (..., P), pairs in ``model_pairs`` order) divided by sigma(s)^2 (``noise_sd`` (..., S))."""
    d = disagreement(probabilities)  # (P, S)
    u = np.asarray(undecided, dtype=float)
    information = (u @ d) / np.asarray(noise_sd, dtype=float) ** 2
    total = information.sum(-1, keepdims=True)
    uniform = np.full(information.shape, 1.0 / information.shape[-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, information / np.where(total > 0, total, 1.0), uniform)


def weights_hash(stimuli: Sequence[str], weights: np.ndarray) -> str:
    """sha256 of the stimulus ids and their weights (rounded to 1e-12), recorded with each draw."""
    h = hashlib.sha256()
    for key, value in zip(stimuli, np.asarray(weights, dtype=float).tolist(), strict=True):
        h.update(f"{key}\t{value:.12e}\n".encode())
    return h.hexdigest()
