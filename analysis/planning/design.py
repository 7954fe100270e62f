"""A sampling design with known inclusion probabilities for adaptive stimulus allocation, and the
design-unbiased estimates it allows.

- ``inclusion_probabilities``: first-order inclusion probabilities of a fixed-size draw of ``n`` of
  ``S`` stimuli, proportional to the weights and floored by a uniform share, capped at 1 (the usual
  iterative capping of probability-proportional-to-size designs; Särndal, Swensson & Wretman 1992,
  ch. 3.6).
- ``systematic_pps``: randomised systematic PPS sampling (Madow 1949; Hartley & Rao 1962): the
  stimuli in random order, one uniform start, every unit whose cumulative probability interval
  holds a point ``u + k``; exactly ``n`` stimuli, stimulus ``s`` with probability ``pi_s``.
- ``uniform_subsample``: the drawn stimuli thinned to an equal-probability sample (the
  random-share cross-check).
- ``horvitz_thompson_mean`` / ``hajek_mean``: the pool-wide mean of a per-stimulus quantity from
  the drawn stimuli, each weighted by ``1 / pi_s`` (Horvitz & Thompson 1952; Hájek 1971): unbiased
  (HT) or ratio-consistent (Hájek) for the mean over the whole pool, whatever the weights were.
- ``additive_scores``: a model score that is additive over stimuli, so it can be reweighted: the
  negative mean squared error between a participant's ratings of a stimulus and the model's
  probabilities, averaged over the pool by HT. A per-participant Pearson r over a drawn set is not
  additive (its centring and scaling use the drawn set) and cannot be reweighted.
"""

from __future__ import annotations

import numpy as np


def inclusion_probabilities(weights: np.ndarray, n: int, floor_share: float = 0.25) -> np.ndarray:
    """(..., S) inclusion probabilities summing to ``n`` per row: ``n ((1 - f) w / sum(w) + f / S)``
    with ``f = floor_share`` (so every stimulus keeps at least ``f n / S``), those above 1 capped at
    1 and the rest rescaled to the remaining size, repeated until none exceeds 1."""
    w = np.asarray(weights, dtype=float)
    n_stimuli = w.shape[-1] if w.ndim else 0
    if w.ndim < 1 or n_stimuli == 0:
        raise ValueError("weights: expected a non-empty array of per-stimulus weights")
    if not 0 < n <= n_stimuli:
        raise ValueError(f"n: must be between 1 and the {n_stimuli} stimuli, got {n}")
    if not 0 <= floor_share <= 1:
        raise ValueError(f"floor_share: must be in [0, 1], got {floor_share}")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights: must be finite and non-negative")
    total = w.sum(-1, keepdims=True)
    share = np.where(total > 0, w / np.where(total > 0, total, 1.0), 1.0 / n_stimuli)
    size = (1.0 - floor_share) * share + floor_share / n_stimuli
    pi = np.zeros(w.shape)
    capped = np.zeros(w.shape, dtype=bool)
    for _ in range(n_stimuli):  # at most S capping rounds (each caps at least one more stimulus)
        free = ~capped
        free_size = np.where(free, size, 0.0)
        room = n - capped.sum(-1, keepdims=True)
        pi = np.where(capped, 1.0, room * free_size / np.maximum(free_size.sum(-1, keepdims=True),
                                                                 1e-300))
        over = free & (pi > 1.0)
        if not over.any():
            break
        capped |= over
    return pi


def systematic_pps(pi: np.ndarray, rng: np.random.Generator, shape: tuple[int, ...] = ()) -> np.ndarray:
    """Boolean (*shape, S) draws of exactly ``sum(pi)`` stimuli, stimulus ``s`` drawn with
    probability ``pi[..., s]`` (``pi`` broadcast against ``shape``): randomised systematic PPS
    (the order shuffled for every draw, one uniform start ``u``; a stimulus is drawn when its
    interval of the cumulative ``pi`` holds ``u + k`` for an integer ``k``)."""
    p = np.asarray(pi, dtype=float)
    n = p.sum(-1)
    if np.any(np.abs(n - np.round(n)) > 1e-9) or np.any(p < 0) or np.any(p > 1 + 1e-12):
        raise ValueError("pi: inclusion probabilities in [0, 1] summing to a whole number")
    shape = np.broadcast_shapes(tuple(shape), p.shape[:-1])
    order = np.argsort(rng.random((*shape, p.shape[-1])), axis=-1)
    return systematic_draw(p, order, rng.random((*shape, 1)))


def systematic_draw(pi: np.ndarray, order: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The draw of ``systematic_pps`` for given orders (*shape, S) and starts (*shape, 1) in
    [0, 1): stimulus ``order[j]`` is drawn when ``(C_{j-1} - u, C_j - u]`` holds an integer,
    ``C`` the cumulative ``pi`` in that order."""
    p = np.broadcast_to(np.asarray(pi, dtype=float), order.shape)
    cumulative = np.cumsum(np.take_along_axis(p, order, axis=-1), axis=-1)
    before = np.concatenate([np.zeros((*order.shape[:-1], 1)), cumulative[..., :-1]], axis=-1)
    picked = np.floor(cumulative - start + 1e-12) > np.floor(before - start + 1e-12)
    drawn = np.zeros(picked.shape, dtype=bool)
    np.put_along_axis(drawn, order, picked, axis=-1)
    return drawn


def uniform_subsample(drawn: np.ndarray, pi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Boolean (..., S): each drawn stimulus kept with probability ``min(pi) / pi_s`` (Poisson
    thinning), so every stimulus is in the kept set with the same probability ``min(pi)``: an
    equal-probability sample of the pool inside an unequal-probability draw, on which unweighted
    estimators (a per-participant Pearson r) describe the whole pool (the random-share cross-check;
    all of a uniform draw is kept)."""
    p = np.broadcast_to(np.asarray(pi, dtype=float), np.shape(drawn))
    keep = p.min(-1, keepdims=True) / np.where(p > 0, p, 1.0)
    return np.asarray(drawn, dtype=bool) & ((rng.random(p.shape) < keep) | (keep >= 1.0 - 1e-12))


def horvitz_thompson_mean(values: np.ndarray, drawn: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """(...) HT estimate of the mean of ``values`` over the S stimuli from the drawn ones:
    ``(1 / S) sum_{s drawn} values_s / pi_s`` (Horvitz & Thompson 1952)."""
    v, d, p = np.broadcast_arrays(np.asarray(values, float), np.asarray(drawn, bool),
                                  np.asarray(pi, float))
    return np.where(d, v / np.where(d, p, 1.0), 0.0).sum(-1) / v.shape[-1]


def hajek_mean(values: np.ndarray, drawn: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """(...) Hájek's ratio estimate: ``sum_{drawn} v_s / pi_s / sum_{drawn} 1 / pi_s``."""
    v, d, p = np.broadcast_arrays(np.asarray(values, float), np.asarray(drawn, bool),
                                  np.asarray(pi, float))
    weight = np.where(d, 1.0 / np.where(d, p, 1.0), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weight * np.where(d, v, 0.0)).sum(-1) / weight.sum(-1)


def stimulus_fit(ratings: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """(..., N, M, S) each model's fit to each participant's ratings of each stimulus: minus the mean
    over categories of (rating - probability)^2 (NaN where the stimulus was not rated)."""
    x = np.asarray(ratings, dtype=float)  # (..., N, S, K)
    y = np.asarray(probabilities, dtype=float)  # (M, S, K)
    return -((x[..., None, :, :] - y) ** 2).mean(-1)


def additive_scores(ratings: np.ndarray, probabilities: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """(..., N, M) each participant's HT score of each model: the pool-wide mean of
    ``stimulus_fit`` estimated from the stimuli the participant rated, drawn with inclusion
    probabilities ``pi`` (..., N, S) (uniform allocation: ``n / S`` everywhere)."""
    fit = stimulus_fit(ratings, probabilities)
    drawn = np.isfinite(fit)
    p = np.asarray(pi, dtype=float)[..., None, :]
    return horvitz_thompson_mean(np.nan_to_num(fit), drawn, p)
