"""Design-weighted scores: unbiased for the pool under an unequal-probability draw (where the
unweighted mean is not), the per-pair bound attained by a rating, the scaled differences inside
[-1, 1], and the pool size as the HT denominator."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from humanlike.analysis.planning.design import inclusion_probabilities, systematic_pps
from humanlike.analysis.planning.sequential_study import expected_fits, rate
from humanlike.analysis.ratings.weighted import (
    pair_bounds,
    scaled_differences,
    weighted_scores,
)


def _pool(seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.uniform(0, 1, (3, 12, 4))
    h = rng.uniform(0.1, 0.9, (12, 4))
    return y, h


def test_weighted_scores_are_unbiased_for_the_pool_under_an_unequal_draw():
    y, h = _pool()
    rng = np.random.default_rng(1)
    n_people, noise = 6000, 0.3
    weights = np.r_[np.full(4, 10.0), np.ones(8)]  # 4 stimuli drawn far more often
    pi = np.broadcast_to(inclusion_probabilities(weights, 5, floor_share=0.25), (n_people, 12))
    shown = systematic_pps(pi, rng)
    x = rate(h, noise * rng.standard_normal((n_people, 12, 4)), shown)
    result = weighted_scores(x, y, np.where(shown, pi, np.nan), ["a", "b", "c"])
    truth = expected_fits(y, h, noise)  # the closed form, independent of the estimator
    se = np.nanstd(result.scores, axis=1) / np.sqrt(n_people)
    assert np.all(np.abs(result.models["estimate"].to_numpy() - truth) < 4 * se)
    # the unweighted mean over the rated stimuli estimates the over-sampled mixture instead
    fit = -((x[:, None] - y) ** 2).mean(-1)  # (N, M, S)
    naive = np.nanmean(np.nanmean(fit, axis=-1), axis=0)
    assert np.any(np.abs(naive - truth) > 10 * se)
    # the comparisons are the per-participant differences' means, Holm-Sidak corrected
    row = result.comparisons.iloc[0]
    assert row["difference"] == pytest.approx(np.nanmean(result.scores[0] - result.scores[1]))
    assert set(result.comparisons.columns) >= {"p_holm_sidak", "significant", "ci_low", "ci_high"}
    lower, upper = result.ceilings.set_index("bound")["estimate"]
    assert lower < upper


def test_pair_bound_is_attained_by_some_rating():
    y, _ = _pool(2)
    bound = pair_bounds(y)  # (3 pairs, 12 stimuli)
    corners = np.array(list(itertools.product([0.0, 1.0], repeat=4)))  # d is linear in x
    fits = -((corners[:, None, None, :] - y[None]) ** 2).mean(-1)  # (corners, M, S)
    for k, (a, b) in enumerate(itertools.combinations(range(3), 2)):
        np.testing.assert_allclose(np.abs(fits[:, a] - fits[:, b]).max(0), bound[k])


def test_scaled_differences_lie_in_the_unit_interval_and_the_pool_size_is_the_denominator():
    y, h = _pool(3)
    rng = np.random.default_rng(4)
    pi = np.broadcast_to(inclusion_probabilities(rng.gamma(0.5, size=12), 4, 0.25), (500, 12))
    shown = systematic_pps(pi, rng)
    x = rate(h, 0.5 * rng.standard_normal((500, 12, 4)), shown)
    result = weighted_scores(x, y, np.where(shown, pi, np.nan), ["a", "b", "c"])
    assert np.all(np.abs(result.scaled) <= 1 + 1e-12)
    assert np.all(np.sign(result.scaled) == np.sign(result.differences))
    # two more stimuli in the pool that nobody rated: every HT score shrinks by 12 / 14, the
    # scaled differences (a ratio of two HT sums) stay
    wider = weighted_scores(x, y, np.where(shown, pi, np.nan), ["a", "b", "c"], n_stimuli=14)
    np.testing.assert_allclose(wider.scores, result.scores * 12 / 14)
    np.testing.assert_allclose(wider.scaled, result.scaled)
    with pytest.raises(ValueError, match="n_stimuli"):
        weighted_scores(x, y, np.where(shown, pi, np.nan), ["a", "b", "c"], n_stimuli=11)
    with pytest.raises(ValueError, match="pi"):
        weighted_scores(x, y, pi[:, :5], ["a", "b", "c"])
    assert scaled_differences(np.zeros((1, 3)), y, np.zeros((1, 12), bool), np.ones((1, 12))).sum() == 0
