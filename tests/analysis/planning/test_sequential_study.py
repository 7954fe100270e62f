"""Simulated monitored studies: the exact pool-wide scores in closed form (checked by simulation),
and with every model equally good a look after every participant keeps the family-wise false
decisions within alpha + 3 SE under uniform and adaptive allocation alike."""

from __future__ import annotations

import numpy as np

from humanlike.analysis.planning.sequential_study import (
    expected_fits,
    level_probabilities,
    rate,
    simulate_studies,
)
from humanlike.analysis.planning.simulate import SCALE


def test_expected_fits_match_a_simulation_of_the_rounded_ratings():
    rng = np.random.default_rng(0)
    y, h = rng.uniform(0, 1, (2, 6, 3)), rng.uniform(0, 1, (6, 3))
    x = rate(h, 0.3 * rng.standard_normal((100_000, 6, 3)), np.ones((100_000, 6), bool))
    fit = -((x[:, None] - y) ** 2).mean((-2, -1))  # (draws, M)
    se = fit.std(0) / np.sqrt(len(fit))
    assert np.all(np.abs(fit.mean(0) - expected_fits(y, h, 0.3)) < 4 * se)
    np.testing.assert_allclose(level_probabilities(h, 0.3).sum(-1), 1.0)


def null_pool(rng: np.random.Generator, n_models: int = 3, n_stimuli: int = 16,
              noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """Models whose deviations from the human's expected rating are the same values on permuted
    stimuli: every pool-wide difference exactly 0, yet each stimulus separates the models."""
    h = rng.uniform(0.3, 0.7, (n_stimuli, 4))
    mean = (level_probabilities(h, noise) * np.asarray(SCALE)).sum(-1)
    deviation = rng.choice([-0.25, 0.25], mean.shape) * rng.uniform(0.5, 1.0, mean.shape)
    y = np.stack([mean + deviation[rng.permutation(n_stimuli)] for _ in range(n_models)])
    return y, h


def test_null_family_wise_error_at_every_look_uniform_and_adaptive():
    rng = np.random.default_rng(7)
    y, h = null_pool(rng)
    fits = expected_fits(y, h, 0.3)
    np.testing.assert_allclose(fits, fits[0], atol=1e-12)  # the null holds exactly
    n_studies, alpha = 300, 0.05
    noise = rng.standard_normal((n_studies, 80, *h.shape))
    limit = alpha + 3 * np.sqrt(alpha * (1 - alpha) / n_studies)
    for adaptive in (False, True):
        out = simulate_studies(y, h, 0.3, 6, 80, adaptive, noise, np.random.default_rng(8),
                               refresh=2, alpha=alpha)
        assert out.wrong.mean() <= limit, (adaptive, out.wrong.mean())
