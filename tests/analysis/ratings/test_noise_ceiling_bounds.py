"""Noise ceiling: closed form vs L-BFGS, and both bounds against their analytic expectations.

Synthetic participants x_i = t + e_i with a fixed pattern t (population variance s_t^2 over entries)
and independent noise e_i ~ N(0, s^2). For many entries the expected values are
  lower bound  r(x_i, mean of the other P - 1) = s_t^2 / sqrt((s_t^2 + s^2)(s_t^2 + s^2 / (P - 1)))
  upper bound  r(x_i, mean of all P)           = sqrt((s_t^2 + s^2 / P) / (s_t^2 + s^2))
(the best prediction is the mean of the z-scores, which contains x_i itself). Over 30 seeds the
Monte-Carlo SD of either estimate at P = 20 and 3,000 entries is ~0.002; the tolerance is 0.008.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import check_grad
from scipy.stats import binom

from humanlike.analysis.ratings.ceilings import (
    NegativeMeanR,
    leave_one_out_predictions,
    masked_r,
    noise_ceiling,
    upper_bound_closed_form,
    upper_bound_optimized,
)

P, N_ENTRIES, NOISE_SD, TOL = 20, 3000, 1.0, 0.008


def _synthetic(seed: int, missing: float = 0.0):
    rng = np.random.default_rng(seed)
    pattern = rng.normal(size=N_ENTRIES)
    x = pattern + NOISE_SD * rng.normal(size=(P, N_ENTRIES))
    if missing:
        x[rng.random(x.shape) < missing] = np.nan
    return x, pattern, pattern.var()


def _expected_lower(var_t: float) -> float:
    s2 = NOISE_SD**2
    return var_t / np.sqrt((var_t + s2) * (var_t + s2 / (P - 1)))


def _expected_upper(var_t: float, self_weight: float = 1.0 / P) -> float:
    s2 = NOISE_SD**2
    return np.sqrt((var_t + s2 * self_weight) / (var_t + s2))


def test_closed_form_and_lbfgs_upper_bounds_agree_to_1e5_when_nothing_is_missing():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 1, 300)) + rng.uniform(0.5, 2.0, size=(8, 1, 1)) * rng.normal(
        size=(8, 1, 300)
    )
    closed = upper_bound_closed_form(x)
    # Start from the plain mean rating, not from the closed-form answer.
    optimized = upper_bound_optimized(x, init="mean")
    assert optimized.converged
    assert optimized.n_iterations > 5
    assert abs(optimized.value - closed.value) < 1e-5


def test_closed_form_upper_bound_equals_norm_of_mean_z_score_over_sqrt_n():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 50)) + rng.normal(size=50)
    z = (x - x.mean(1, keepdims=True)) / x.std(1, keepdims=True)
    expected = np.linalg.norm(z.mean(0)) / np.sqrt(x.shape[1])  # Cauchy-Schwarz maximum
    assert upper_bound_closed_form(x).value == pytest.approx(expected, abs=1e-12)


def test_leave_one_out_bound_matches_its_analytic_expectation():
    x, _, var_t = _synthetic(2)
    assert noise_ceiling(x).lower == pytest.approx(_expected_lower(var_t), abs=TOL)


def test_upper_bound_matches_its_analytic_expectation():
    x, _, var_t = _synthetic(3)
    ceiling = noise_ceiling(x)
    assert ceiling.method == "closed_form"
    assert ceiling.upper == pytest.approx(_expected_upper(var_t), abs=TOL)


def test_optimiser_recovers_the_upper_bound_with_ten_percent_of_ratings_missing():
    x, _, var_t = _synthetic(4, missing=0.10)
    ceiling = noise_ceiling(x)
    # With missing ratings participant i's own z enters the consensus at an entry with weight
    # 1 / (number of raters there): E[1 / (1 + Binomial(P - 1, 0.9))].
    k = np.arange(P)
    self_weight = float(np.sum(binom.pmf(k, P - 1, 0.9) / (1 + k)))
    assert ceiling.method == "optimized"
    assert ceiling.upper == pytest.approx(_expected_upper(var_t, self_weight), abs=TOL)
    assert ceiling.lower == pytest.approx(_expected_lower(var_t), abs=TOL)


def test_optimised_bound_is_never_below_the_closed_form_start_with_missing_ratings():
    x, _, _ = _synthetic(5, missing=0.3)
    start = upper_bound_closed_form(x)
    optimized = upper_bound_optimized(x)
    assert optimized.converged
    assert optimized.value >= start.value - 1e-12
    assert optimized.value > start.value  # the consensus of z-scores is no longer optimal


def test_analytic_gradient_matches_finite_differences():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(5, 40)) + rng.normal(size=40)
    x[rng.random(x.shape) < 0.2] = np.nan
    objective = NegativeMeanR(x)
    v = rng.normal(size=int(objective.active.sum()))
    error = check_grad(lambda u: objective(u)[0], lambda u: objective(u)[1], v)
    assert error < 1e-6 * max(1.0, float(np.linalg.norm(objective(v)[1])))


def test_leave_one_out_prediction_is_the_mean_of_the_other_raters():
    x = np.array([[1.0, 0.0, np.nan], [0.5, 0.5, 1.0], [0.0, 1.0, 0.0]])
    loo = leave_one_out_predictions(x)
    np.testing.assert_allclose(loo[0], [0.25, 0.75, 0.5])
    np.testing.assert_allclose(loo[1], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(loo[2], [0.75, 0.25, 1.0])


def test_noise_ceiling_needs_two_participants():
    with pytest.raises(ValueError, match="at least two participants"):
        noise_ceiling(np.ones((1, 5)))


@settings(max_examples=40, deadline=None)
@given(
    x=arrays(float, (4, 12), elements=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])),
    y=arrays(float, 12, elements=st.floats(0, 1)),
)
def test_no_prediction_beats_the_closed_form_upper_bound(x, y):
    """Property: with complete ratings, mean r of any prediction <= the closed-form bound."""
    assume(np.all(x.std(1) > 0) and np.std(y) > 1e-6)  # correlations must be defined
    assert np.mean(masked_r(x, y)) <= upper_bound_closed_form(x).value + 1e-9
