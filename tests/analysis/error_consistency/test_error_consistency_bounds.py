"""Bounds of c_obs and kappa (Geirhos et al. 2020, eqs. 5-6; Klein et al. 2025) and the null band."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humanlike.analysis.error_consistency import (
    c_obs_bounds,
    kappa,
    kappa_bounds,
    kappa_max,
    kappa_min,
    null_band,
    pair_null_band,
)

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
inner = st.floats(min_value=0.01, max_value=0.99, allow_nan=False)


def test_kappa_max_of_accuracies_point_eight_and_point_six_is_six_elevenths():
    assert kappa_max(0.8, 0.6) == pytest.approx(6 / 11, abs=1e-12)


def test_kappa_min_of_accuracies_point_eight_and_point_six_is_minus_two_thirds():
    # c_obs = 1 - (min(.8, .4) + min(.2, .6)) = .4, c_exp = .56: (.4 - .56) / .44 = -4/11
    assert kappa_min(0.8, 0.6) == pytest.approx(-4 / 11, abs=1e-12)


def test_c_obs_bounds_match_the_closed_form_at_known_points():
    low, high = c_obs_bounds([0.0, 0.32, 0.5, 0.82, 1.0])
    np.testing.assert_allclose(low, [0.0, 0.0, 0.0, 0.8, 1.0], atol=1e-12)
    np.testing.assert_allclose(high, [0.0, 0.4, 1.0, 1.0, 1.0], atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(unit, unit, unit)
def test_every_joint_distribution_has_c_obs_within_the_bounds_of_its_c_exp(p1, p2, t):
    # a joint 2x2 table with marginals p1, p2: p11 anywhere in its Frechet range
    p11 = max(0.0, p1 + p2 - 1) + t * (min(p1, p2) - max(0.0, p1 + p2 - 1))
    c_obs = p11 + (1 - p1 - p2 + p11)
    c_exp = p1 * p2 + (1 - p1) * (1 - p2)
    low, high = c_obs_bounds(c_exp)
    assert low - 1e-9 <= c_obs <= high + 1e-9


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0.0, max_value=1.0))
def test_c_obs_bounds_are_attained_by_some_pair_of_accuracies(c_exp):
    # the bound curves are the envelope: for c_exp <= .5 the upper bound is reached with
    # p1 = .5 + x, p2 = .5 - x, x = sqrt((.5 - c_exp) / 2), and c_obs = 1 - |p1 - p2|
    low, high = c_obs_bounds(c_exp)
    if c_exp <= 0.5:
        x = np.sqrt((0.5 - c_exp) / 2)
        assert high == pytest.approx(1 - 2 * x, abs=1e-9)
    else:
        x = np.sqrt((c_exp - 0.5) / 2)
        assert low == pytest.approx(abs((0.5 + x) + (0.5 + x) - 1), abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(inner, inner)
def test_kappa_max_and_min_are_reached_by_explicit_trial_sequences(a1, a2):
    n = 2000
    k1, k2 = round(a1 * n), round(a2 * n)
    x = np.arange(n) < k1
    best = np.arange(n) < k2  # errors aligned as far as possible
    worst = np.arange(n) >= n - k2  # errors placed on the other observer's correct trials
    acc1, acc2 = k1 / n, k2 / n
    if 0 < k1 < n and 0 < k2 < n:
        assert kappa(x, best) == pytest.approx(kappa_max(acc1, acc2), abs=1e-9)
        assert kappa(x, worst) == pytest.approx(kappa_min(acc1, acc2), abs=1e-9)


def test_kappa_bounds_are_nan_where_c_exp_is_one():
    low, high = kappa_bounds([0.3, 1.0])
    assert np.isfinite(low[0]) and np.isfinite(high[0])
    assert np.isnan(low[1]) and np.isnan(high[1])


def test_bounds_reject_values_outside_the_unit_interval():
    with pytest.raises(ValueError, match="c_exp"):
        c_obs_bounds(1.2)
    with pytest.raises(ValueError, match="acc1"):
        kappa_max(-0.1, 0.5)


def test_null_band_covers_independent_observers_at_the_nominal_rate():
    rng = np.random.default_rng(5)
    n, reps = 160, 4000
    p1, p2 = 0.7, 0.55
    c_exp = p1 * p2 + (1 - p1) * (1 - p2)
    a = rng.random((reps, n)) < p1
    b = rng.random((reps, n)) < p2
    low, high = null_band(c_exp, n, method="binomial")
    c_obs = (a == b).mean(axis=1)
    coverage = np.mean((c_obs >= low) & (c_obs <= high))
    # binomial quantiles are conservative; 4000 draws give a Monte-Carlo SE below .004
    assert 0.94 <= coverage <= 0.975


def _paper_simulation(n: int, pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Geirhos et al. 2020 S.3 by brute force: every trial of independent observers drawn,
    accuracies from their grid's three segments, c_exp recomputed from the simulated trials."""
    rng = np.random.default_rng(seed)
    seg = np.array([[0.0, 0.15], [0.15, 0.85], [0.85, 1.0]])[rng.integers(0, 3, (2, pairs))]
    p = seg[..., 0] + (seg[..., 1] - seg[..., 0]) * rng.random((2, pairs))
    a = rng.random((pairs, n)) < p[0][:, None]
    b = rng.random((pairs, n)) < p[1][:, None]
    pa, pb = a.mean(axis=1), b.mean(axis=1)
    return pa * pb + (1 - pa) * (1 - pb), (a == b).mean(axis=1)


def test_null_band_is_the_simulated_band_of_geirhos_s3_not_the_binomial_one():
    # S.3 / Fig. SF.1: with c_exp estimated from the same trials, c_obs of independent observers
    # spreads far less than Binomial(n, c_exp); at n = 160, c_exp = .8 about half as wide
    c_exp, c_obs = _paper_simulation(160, 60_000, seed=11)
    for centre in (0.6, 0.8):
        sel = np.abs(c_exp - centre) < 0.005
        sim_low, sim_high = np.quantile(c_obs[sel], [0.025, 0.975])
        low, high = null_band(centre, 160)
        # quantile SE with ~500-1000 draws per bin and steps of 1/160: about .004
        assert low == pytest.approx(sim_low, abs=0.0125)
        assert high == pytest.approx(sim_high, abs=0.0125)
    b_low, b_high = null_band(0.8, 160, method="binomial")
    low, high = null_band(0.8, 160)
    assert 1.7 < (b_high - b_low) / (high - low) < 2.6


def test_simulated_null_band_covers_95_percent_of_simulated_independent_pairs():
    c_exp, c_obs = _paper_simulation(160, 20_000, seed=12)
    low, high = null_band(c_exp, 160)
    coverage = np.mean((c_obs >= low - 1e-12) & (c_obs <= high + 1e-12))
    # 20,000 pairs: Monte-Carlo SE .0015; discreteness of c_obs makes the band slightly conservative
    assert 0.94 <= coverage <= 0.97


def test_pair_null_band_covers_independent_observers_given_their_counts():
    rng = np.random.default_rng(13)
    n, reps = 160, 20_000
    a = rng.random((reps, n)) < 0.9
    b = rng.random((reps, n)) < 0.85
    low, high = pair_null_band(a.sum(axis=1), b.sum(axis=1), n)
    c_obs = (a == b).mean(axis=1)
    coverage = np.mean((c_obs >= low) & (c_obs <= high))
    assert 0.95 <= coverage <= 0.99  # exact conditional quantiles: at least nominal (discrete)
    # and far narrower than the binomial band at the same c_exp
    b_low, b_high = null_band(0.9 * 0.85 + 0.1 * 0.15, n, method="binomial")
    assert np.median(high - low) < 0.6 * (b_high - b_low)


def test_null_band_rejects_an_unknown_method():
    with pytest.raises(ValueError, match="method"):
        null_band(0.5, 100, method="normal")


def test_null_band_narrows_as_trials_grow():
    w_small = np.subtract(*null_band(0.6, 100)[::-1])
    w_large = np.subtract(*null_band(0.6, 10_000)[::-1])
    assert w_large < w_small / 5


def test_null_band_rejects_a_non_integer_trial_count():
    with pytest.raises(ValueError, match="n"):
        null_band(0.5, 10.5)


def test_accuracy_range_is_where_the_kappa_bounds_admit_the_kappa():
    # brute force over a fine grid of second accuracies: the admitted set is exactly [low, high]
    from humanlike.analysis.error_consistency import accuracy_range

    grid = np.linspace(0.0005, 0.9995, 8000)
    for acc1 in (0.05, 0.3, 0.5, 0.72, 0.95):
        for k in (-0.8, -0.3, -0.05, 0.0, 0.1, 0.45, 0.9):
            low, high = accuracy_range(acc1, k)
            admitted = (np.asarray(kappa_min(acc1, grid)) <= k + 1e-12) & (
                k <= np.asarray(kappa_max(acc1, grid)) + 1e-12)
            inside = (grid >= low) & (grid <= high)
            assert (admitted != inside).sum() <= 2, (acc1, k, low, high)


def test_accuracy_range_closed_forms():
    from humanlike.analysis.error_consistency import accuracy_range

    # kappa = 1 needs equal accuracies; kappa = 0 allows any
    assert np.allclose(accuracy_range(0.8, 1.0), (0.8, 0.8))
    assert np.allclose(accuracy_range(0.8, 0.0), (0.0, 1.0))
    # kappa_max(.8, a2) = 6/11 at a2 = .6 (Klein et al.'s example above), so .6 is the low end
    low, high = accuracy_range(0.8, 6 / 11)
    assert np.isclose(low, 0.6) and np.isclose(float(kappa_max(0.8, high)), 6 / 11)
    # a kappa of -0.9 is out of reach for a 95%-correct observer: an empty range
    assert np.isnan(accuracy_range(0.95, -0.9)).all()
    with pytest.raises(ValueError, match="kappa"):
        accuracy_range(0.5, 1.5)
