"""Adaptive allocation weights: favour the stimuli whose ratings are expected to add the most
evidence to the model comparisons still undecided, relative to the human noise there
(docs/adaptive.md).

``discrimination_weights`` (what the server and the benchmark use): per undecided pair (a, b), the
squared signal-to-noise ratio of one rating's evidence, max(0, d m_ab(s))^2 / (sigma^2(s)
|Delta_ab(s)|^2) with m_ab(s) = <h(s) - hbar, Delta_ab(s)> and d the side the comparison leans to
(this project's derivation for its score, docs/adaptive.md), or, before it leans, the models' squared disagreement
|Delta_ab(s)|^2 / sigma^2(s) (the Gaussian-noise model-discrimination criterion of Cavagnaro et al.
2010, Cooke et al. 2018 and the T-optimum designs of Atkinson & Fedorov 1975;
``allocation_weights`` sums it over the pairs); each undecided pair
gets an equal share."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from humanlike.analysis.planning.decide import model_pairs

LEAN_P = 0.2
"""A comparison leans one way (its direction counts in ``discrimination_weights``) once its
Holm-Sidak p is below this; before, its stimuli are weighted by the symmetric disagreement.
Chosen on ``bench/adaptive.py`` (0.05 gave 0.78x, 0.2 0.5x; signing at once gave 12% false
decisions): docs/adaptive.md."""


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


def discrimination_weights(
    probabilities: np.ndarray, undecided: np.ndarray, direction: np.ndarray,
    human_mean: np.ndarray, noise_sd: np.ndarray | float,
) -> np.ndarray:
    """(..., S) weights summing to one from the expected evidence one rating of s adds to each
    undecided comparison (a, b).

    A rating x of s moves the difference of the two models' fits by <x - xbar, Delta_ab(s)> (the
    covariance term of r_a - r_b; Delta = p_a - p_b, centred over the pool); its expectation
    m_ab(s) = <h(s) - hbar, Delta_ab(s)> (``human_mean`` h), its variance sigma(s)^2 |Delta_ab(s)|^2.
    A stimulus' information for the comparison is the squared signal-to-noise ratio of the evidence
    pointing the way the comparison leans (``direction`` +1: a ahead, -1: b ahead),
    max(0, d m)^2 / (sigma^2 |Delta|^2), and, before it leans (0), the symmetric disagreement
    |Delta|^2 / sigma^2 (Cavagnaro et al. 2010's expected squared model difference over noise;
    docs/adaptive.md). Each undecided comparison gets an equal share (its information normalised
    over the pool), so no pair with large disagreements crowds out the others; with nothing
    undecided or no evidence anywhere the weights are uniform."""
    y = np.asarray(probabilities, dtype=float)
    pairs = model_pairs(y.shape[0])
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    delta = y[a] - y[b]  # (P, S, K)
    delta = delta - delta.mean((-2, -1), keepdims=True)
    h = np.asarray(human_mean, dtype=float)
    h = h - h.mean((-2, -1), keepdims=True)  # (..., S, K)
    signal = np.einsum("...sk,psk->...ps", h, delta)
    d = np.asarray(direction, dtype=float)[..., None]
    sigma2 = np.asarray(noise_sd, dtype=float) ** 2
    sigma2 = sigma2[..., None, :] if sigma2.ndim else sigma2  # (..., 1, S) against (..., P, S)
    variance = sigma2 * (delta**2).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        signed = np.where(variance > 0, np.maximum(d * signal, 0.0) ** 2 / variance, 0.0)
        # no lean yet: the symmetric disagreement |Delta|^2 / sigma^2 (``allocation_weights``)
        symmetric = (delta**2).sum(-1) / sigma2
        information = np.where(d == 0, symmetric, signed)  # (..., P, S)
        total = information.sum(-1, keepdims=True)
        share = np.where(total > 0, information / np.where(total > 0, total, 1.0), 0.0)
    wanted = np.asarray(undecided, dtype=float)[..., None] * share
    weight = wanted.sum(-2)
    mass = weight.sum(-1, keepdims=True)
    uniform = np.full(weight.shape, 1.0 / weight.shape[-1])
    return np.where(mass > 0, weight / np.where(mass > 0, mass, 1.0), uniform)
