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


def null_pool(rng: np.random.Generator, noise: float = 0.3,
              n_stimuli: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Three models exactly equally good for the human (the same summed squared deviation from
    its expected rating), whose errors are placed differently: model 0 deviates by 0.4 on 4
    stimuli, models 1 and 2 by 0.2 on all 16, signs at random. Allocation that over-samples the
    stimuli where models 0 and 1 differ most over-samples model 0's errors: an unweighted
    estimate then favours model 1, the design-weighted one does not."""
    h = rng.uniform(0.35, 0.65, (n_stimuli, 4))
    mean = (level_probabilities(h, noise) * np.asarray(SCALE)).sum(-1)
    concentrated = np.zeros((n_stimuli, 4))
    concentrated[:4] = 0.4
    spread = np.full((n_stimuli, 4), 0.2)
    deviations = [concentrated, spread, spread]
    y = np.stack([mean + d * rng.choice([-1.0, 1.0], d.shape) for d in deviations])
    return y, h


def test_null_family_wise_error_at_every_look_uniform_and_adaptive():
    rng = np.random.default_rng(7)
    y, h = null_pool(rng)
    fits = expected_fits(y, h, 0.3)
    np.testing.assert_allclose(fits, fits[0], atol=1e-12)  # the null holds exactly
    n_studies, alpha = 300, 0.05
    noise = rng.standard_normal((n_studies, 80, *h.shape))
    limit = alpha + 3 * np.sqrt(alpha * (1 - alpha) / n_studies)

    def false_rate(adaptive: bool, method: str, weighted: bool = True) -> float:
        out = simulate_studies(y, h, 0.3, 6, 80, adaptive, noise, np.random.default_rng(8),
                               refresh=2, alpha=alpha, method=method, weighted=weighted)
        return float(out.wrong.mean())

    for method in ("betting_mixture", "betting", "safe_t"):
        for adaptive in (False, True):
            assert false_rate(adaptive, method) <= limit, (method, adaptive)
    # the simulation can see a design bias: the unweighted mean under adaptive allocation decides
    # for the model whose errors the allocation under-samples
    assert false_rate(True, "safe_t", weighted=False) > 0.3


def test_the_values_the_sequential_test_reads_have_mean_zero_under_a_pool_wide_null():
    # two stimuli, one drawn per participant with probability 1/2, one category, fixed ratings.
    # stimulus 1: models 0.5 / 0.0, rated 0.5: d = 0.25, largest possible |d| 0.75; stimulus 2:
    # models 0.25 / 0.75, rated 0.75: d = -0.25, largest |d| 0.5. The pool-wide difference is 0,
    # so the value each participant adds to the e-process must have mean 0 over the two equally
    # likely draws (its conditional mean given the earlier participants: Ville's inequality needs
    # it). Scaling by the drawn stimulus' own bound gives 1/3 and -1/2 (mean -1/12); a bound fixed
    # before the draw, the largest over the draws the design can make (0.75), gives 1/3 and -1/3.
    from humanlike.analysis.ratings.weighted import weighted_scores

    y = np.array([[[0.5], [0.25]], [[0.0], [0.75]]])  # (M, S, K)
    x = np.array([[[0.5], [np.nan]], [[np.nan], [0.75]]])  # participant i drew stimulus i
    drawn = np.isfinite(x[..., 0])
    pi = np.where(drawn, 0.5, np.nan)
    design = np.full((2, 2), 0.5)  # each participant's inclusion probabilities, drawn or not
    result = weighted_scores(x, y, pi, ["a", "b"], design=design)
    np.testing.assert_allclose(result.differences[:, 0], [0.25, -0.25])
    np.testing.assert_allclose(result.scaled[:, 0], [1 / 3, -1 / 3])
    assert result.scaled.mean() == 0
