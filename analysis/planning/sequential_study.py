"""Simulated rating studies decided as a monitored adaptive study is: participants arrive one by
one, each rates ``n_trials`` stimuli drawn by the sampling design (uniform, or Neyman-allocated
inclusion probabilities floored by a uniform share, ``planning.adaptive`` and ``planning.design``),
each participant's design-weighted score differences (``ratings.weighted``) feed the anytime-valid
test (``sequential.decide``, continuous, every participant a look), and the allocation is
recomputed from the data every ``refresh`` participants, as the panel worker does. R studies run at
once as arrays; the only loop is over refreshes.

``expected_fits`` gives the exact pool-wide score of each model for a generating human (the
discretised rating's distribution in closed form), the truth a decision is checked against."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from humanlike.analysis.planning.adaptive import human_means, neyman_weights, stimulus_noise
from humanlike.analysis.planning.design import (
    additive_scores,
    inclusion_probabilities,
    systematic_pps,
)
from humanlike.analysis.planning.simulate import SCALE
from humanlike.analysis.ratings.weighted import scaled_differences
from humanlike.analysis.sequential.decide import DEFAULT_METHOD, decide


def level_probabilities(human: np.ndarray, noise_sd: float,
                        scale: tuple[float, ...] = SCALE) -> np.ndarray:
    """(S, K, L) the probability of each rating level for a latent h + e, e ~ N(0, sd^2), clipped
    to the scale and rounded to the nearest level (``simulate.simulate_ratings``' observer)."""
    levels = np.asarray(scale, dtype=float)
    cuts = np.r_[-np.inf, (levels[1:] + levels[:-1]) / 2, np.inf]
    cdf = norm.cdf((cuts - np.asarray(human, dtype=float)[..., None]) / noise_sd)
    return np.diff(cdf, axis=-1)


def expected_fits(probabilities: np.ndarray, human: np.ndarray, noise_sd: float,
                  scale: tuple[float, ...] = SCALE) -> np.ndarray:
    """(M,) each model's pool-wide expected additive score, minus the mean over stimuli and
    categories of E[(x - y)^2] under ``level_probabilities``: the estimand of the HT scores."""
    p = level_probabilities(human, noise_sd, scale)  # (S, K, L)
    levels = np.asarray(scale, dtype=float)
    y = np.asarray(probabilities, dtype=float)[..., None]  # (M, S, K, 1)
    return -((levels - y) ** 2 * p).sum(-1).mean((-2, -1))


def rate(human: np.ndarray, noise: np.ndarray, shown: np.ndarray,
         scale: tuple[float, ...] = SCALE) -> np.ndarray:
    """(..., S, K) ratings: h + noise clipped and rounded to the nearest level, NaN where not
    ``shown`` (..., S)."""
    levels = np.asarray(scale, dtype=float)
    latent = np.clip(np.asarray(human, dtype=float) + noise, levels[0], levels[-1])
    step = levels[1] - levels[0]
    x = levels[0] + np.round((latent - levels[0]) / step) * step
    return np.where(shown[..., None], x, np.nan)


@dataclass(frozen=True)
class SimulatedStudies:
    """Per study: ``stop_n`` (participants when every pair was decided; ``max_n`` when not:
    censored), ``decided`` and ``direction`` per pair at the end (+1: the first model better),
    ``wrong`` (some pair decided against the truth's sign, or at all when the truth is 0), and
    ``correct_winner`` (the truly best model decided better than every other)."""

    stop_n: np.ndarray
    decided: np.ndarray
    direction: np.ndarray
    wrong: np.ndarray
    correct_winner: np.ndarray
    stopped: np.ndarray


def simulate_studies(probabilities: np.ndarray, human: np.ndarray, noise_sd: float,
                     n_trials: int, max_n: int, adaptive: bool, noise: np.ndarray,
                     rng: np.random.Generator, floor_share: float = 0.25, min_n: int = 4,
                     refresh: int = 4, alpha: float = 0.05,
                     method: str = DEFAULT_METHOD, weighted: bool = True) -> SimulatedStudies:
    """R studies (``noise``: (R, max_n, S, K) standard-normal draws, shared between designs for
    paired comparisons) of the generating ``human`` (S, K) with rating noise ``noise_sd``,
    ``n_trials`` stimuli per participant; ``adaptive``: Neyman allocation recomputed every
    ``refresh`` participants from ``min_n`` on, else uniform; ``method``: the continuous test
    (``sequential.decide.METHODS``); ``weighted=False`` scores each participant by the
    unweighted mean over the stimuli rated (what the design weights prevent: under adaptive
    allocation it estimates the over-sampled mixture, not the pool)."""
    y = np.asarray(probabilities, dtype=float)
    n_models, n_stimuli, n_categories = y.shape
    n_studies = noise.shape[0]
    pairs = [(a, b) for a in range(n_models) for b in range(a + 1, n_models)]
    scaled = np.full((n_studies, max_n, len(pairs)), np.nan)
    x = np.full((n_studies, max_n, n_stimuli, n_categories), np.nan)
    uniform = np.full((n_studies, n_stimuli), n_trials / n_stimuli)
    undecided = np.ones((n_studies, len(pairs)), dtype=bool)
    n = 0
    while n < max_n:
        batch = min(refresh, max_n - n)
        pi = uniform
        if adaptive and n >= min_n:
            sd = stimulus_noise(x[:, :n])
            weights = neyman_weights(y, undecided, human_means(x[:, :n], y, sd), sd, n_trials, n)
            pi = inclusion_probabilities(weights, n_trials, floor_share)
        shown = systematic_pps(pi[:, None, :], rng, (n_studies, batch))
        x[:, n:n + batch] = rate(human, noise_sd * noise[:, n:n + batch], shown)
        p = np.broadcast_to(pi[:, None, :], shown.shape)
        scores = additive_scores(x[:, n:n + batch], y,
                                 p if weighted else np.full(p.shape, n_trials / n_stimuli))
        d = np.stack([scores[..., a] - scores[..., b] for a, b in pairs], axis=-1)
        scaled[:, n:n + batch] = scaled_differences(  # each bound fixed before the draw
            d.reshape(-1, len(pairs)), y, shown.reshape(-1, n_stimuli),
            p.reshape(-1, n_stimuli), design=p.reshape(-1, n_stimuli)).reshape(d.shape)
        n += batch
        if adaptive and n >= min_n and n < max_n:
            undecided = ~np.asarray(decide(scaled[:, :n], "continuous", alpha, bound=1.0,
                                           bounds=False, method=method).decided)
    final = decide(scaled, "continuous", alpha, bound=1.0, bounds=False, method=method)
    at = np.where(final.decided, final.decided_at, max_n)
    stop_n = np.where(np.all(final.decided, axis=1), at.max(axis=1), max_n)
    truth = expected_fits(y, human, noise_sd)
    sign = np.sign(np.array([truth[a] - truth[b] for a, b in pairs]))
    direction = np.asarray(final.direction)
    wrong = np.any(final.decided & (direction != sign), axis=1)
    best = int(np.argmax(truth))
    beats = np.ones(n_studies, dtype=bool)
    for k, (a, b) in enumerate(pairs):
        if best in (a, b):
            beats &= direction[:, k] == (1 if best == a else -1)
    return SimulatedStudies(stop_n=stop_n, decided=np.asarray(final.decided), direction=direction,
                            wrong=wrong, correct_winner=beats & np.all(sign != 0),
                            stopped=np.all(final.decided, axis=1))
