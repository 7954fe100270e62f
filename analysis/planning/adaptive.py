"""Adaptive allocation weights: the inclusion probabilities that make the Horvitz-Thompson
estimates of the undecided model comparisons most precise (docs/adaptive.md).

The comparison of models a and b on the additive score (``analysis.planning.design``) is the
pool-wide mean over stimuli of d_ab(s) = fit_a(s) - fit_b(s), fit the negative mean squared error
over categories. One participant's HT estimate from a Poisson draw with inclusion
probabilities pi has variance (1 / S^2) (sum_s E[d_ab(s)^2] / pi_s - sum_s E[d_ab(s)]^2) (the HT
variance of Poisson sampling, Särndal, Swensson & Wretman 1992, ch. 3.5, with the rating noise
inside d); minimising the sum over the undecided pairs of each pair's variance, relative to its own
scale sum_s E[d_ab(s)^2], subject to sum_s pi_s = n gives Neyman's allocation
pi_s proportional to sqrt(sum_ab E[d_ab(s)^2] / sum_t E[d_ab(t)^2]) (Neyman 1934; the Lagrange
condition a_s / pi_s^2 = lambda). ``neyman_weights`` returns those proportions; the draw floors
them by the spec's uniform share and caps them at 1 (``design.inclusion_probabilities``). No
constant in it was tuned on ``bench/adaptive.py``: the floor is the researcher's ``random_share``;
``stimulus_noise``'s 10 prior degrees of freedom and ``human_means``' prior (the models' mean and
spread) are stated priors."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from humanlike.analysis.planning.decide import model_pairs


def pair_moments(
    probabilities: np.ndarray, human_mean: np.ndarray, noise_sd: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray]:
    """(..., P, S) the mean and the second moment of d_ab(s) = fit_a(s) - fit_b(s) for one rating
    of s, pairs in ``model_pairs`` order. d is linear in the rating x:
    d = (1/K) sum_k delta_k (2 x_k - y_a,k - y_b,k), delta = y_a - y_b, so with x_k of mean
    ``human_mean`` h_k and independent noise of SD sigma(s) (``noise_sd`` (..., S)),
    E[d] = (1/K) sum_k delta_k (2 h_k - y_a,k - y_b,k) and Var[d] = 4 sigma^2 sum_k delta_k^2 / K^2
    (the scale's rounding and clipping ignored)."""
    y = np.asarray(probabilities, dtype=float)
    pairs = model_pairs(y.shape[0])
    a = np.array([p[0] for p in pairs], dtype=int)
    b = np.array([p[1] for p in pairs], dtype=int)
    delta = y[a] - y[b]  # (P, S, K)
    h = np.asarray(human_mean, dtype=float)[..., None, :, :]  # (..., 1, S, K)
    n_categories = y.shape[-1]
    mean = (delta * (2 * h - y[a] - y[b])).mean(-1)
    sigma2 = np.asarray(noise_sd, dtype=float) ** 2
    sigma2 = sigma2[..., None, :] if sigma2.ndim else sigma2
    variance = 4 * sigma2 * (delta**2).sum(-1) / n_categories**2
    return mean, mean**2 + variance


def neyman_weights(
    probabilities: np.ndarray, undecided: np.ndarray, human_mean: np.ndarray,
    noise_sd: np.ndarray | float, n_trials: int, n_participants: int | np.ndarray,
) -> np.ndarray:
    """(..., S) weights summing to one, pi_s proportional to sqrt(sum_ab c_ab E[d_ab(s)^2]) over
    the undecided pairs (boolean (..., P), ``model_pairs`` order; moments from ``pair_moments``),
    uniform with nothing undecided or no pair differing anywhere.

    c_ab = 1 / (S^2 (Delta_ab^2 + v_ab / N)): the participants a pair needs grow as its
    per-participant variance over its squared pool-wide difference Delta_ab (the mean of E[d_ab]),
    so minimising the sum of the undecided pairs' expected participant counts weights each pair's
    variance by 1 / Delta_ab^2; Delta_ab^2 is taken as its expectation given the ``n_participants``
    N so far, Delta_ab^2 + v_ab / N, v_ab the pair's uniform-design variance (S/n sum a - sum m^2)
    / S^2 with ``n_trials`` n stimuli per participant, so a pair that looks tied does not take
    every trial."""
    mean, second = pair_moments(probabilities, human_mean, noise_sd)  # (..., P, S)
    n_stimuli = second.shape[-1]
    delta = mean.mean(-1)
    variance = (n_stimuli / n_trials * second.sum(-1) - (mean**2).sum(-1)) / n_stimuli**2
    n = np.asarray(n_participants, dtype=float)[..., None] if np.ndim(n_participants) else \
        float(n_participants)
    precision = delta**2 + np.maximum(variance, 0.0) / np.maximum(n, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cost = np.where(precision > 0, 1.0 / (n_stimuli**2 * np.where(precision > 0, precision, 1.0)),
                        0.0)
    wanted = (np.asarray(undecided, dtype=float)[..., None] * cost[..., None] * second).sum(-2)
    weight = np.sqrt(wanted)
    mass = weight.sum(-1, keepdims=True)
    uniform = np.full(weight.shape, 1.0 / weight.shape[-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mass > 0, weight / np.where(mass > 0, mass, 1.0), uniform)


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


def human_means(
    ratings: np.ndarray, probabilities: np.ndarray, noise_sd: np.ndarray | float,
) -> np.ndarray:
    """(..., S, K) the human's mean rating per entry from (..., N, S, K) ratings (NaN: not rated):
    the normal-normal posterior mean with the models' average as prior mean and their spread as
    prior variance, (n xbar / sigma^2 + m / tau^2) / (n / sigma^2 + 1 / tau^2) (Gelman et al.
    2013, ch. 2.5), so an entry rated by few people leans on the models."""
    x = np.asarray(ratings, dtype=float)
    y = np.asarray(probabilities, dtype=float)
    observed = np.isfinite(x)
    n = observed.sum(-3)
    total = np.where(observed, x, 0.0).sum(-3)
    precision = 1.0 / np.maximum(y.var(0), 1e-4)  # (S, K)
    sigma2 = np.asarray(noise_sd, dtype=float)[..., None] ** 2
    return (total / sigma2 + y.mean(0) * precision) / (n / sigma2 + precision)


def weights_hash(stimuli: Sequence[str], weights: np.ndarray) -> str:
    """sha256 of the stimulus ids and their weights (rounded to 1e-12), recorded with each draw."""
    h = hashlib.sha256()
    for key, value in zip(stimuli, np.asarray(weights, dtype=float).tolist(), strict=True):
        h.update(f"{key}\t{value:.12e}\n".encode())
    return h.hexdigest()
