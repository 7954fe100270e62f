"""Significance tests of error consistency: independence test, equal-EC swap test, Holm-Sidak."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.multitest import multipletests

from humanlike.analysis import holm_sidak
from humanlike.analysis.error_consistency import (
    compare_models,
    equal_ec_test,
    independence_pvalues,
    independence_test,
    kappa_from_rates,
)


def _independent_pairs(rng, p_a, p_b, n, reps):
    a = rng.random((reps, n)) < p_a
    b = rng.random((reps, n)) < p_b
    k = kappa_from_rates((a == b).mean(axis=1), a.mean(axis=1), b.mean(axis=1), n)
    return k, a.sum(axis=1), b.sum(axis=1)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    p_a=st.floats(0.3, 0.8),
    p_b=st.floats(0.3, 0.8),
    n=st.integers(120, 400),
    seed=st.integers(0, 2**32 - 1),
)
def test_independence_p_values_are_uniform_under_independence(p_a, p_b, n, seed):
    rng = np.random.default_rng(seed)
    k, ka, kb = _independent_pairs(rng, p_a, p_b, n, reps=400)
    p = independence_pvalues(k, ka, kb, n, n_sim=400, random_state=rng)
    assert stats.kstest(p, "uniform").pvalue > 0.001


@pytest.mark.parametrize(("p_a", "p_b", "n"), [(0.95, 0.95, 100), (0.9, 0.8, 40), (0.6, 0.9, 30)])
def test_independence_test_is_never_anti_conservative_with_few_distinct_kappas(p_a, p_b, n):
    # with high accuracies or few trials kappa is strongly discrete: ties make p conservative
    rng = np.random.default_rng(2)
    k, ka, kb = _independent_pairs(rng, p_a, p_b, n, reps=1000)
    p = independence_pvalues(k, ka, kb, n, n_sim=400, random_state=rng)
    for alpha in (0.01, 0.05, 0.1):
        # rejection rate at most alpha plus 3 Monte-Carlo standard errors
        assert np.mean(p <= alpha) <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / 1000)


def test_independence_p_value_follows_the_counting_formula():
    rng = np.random.default_rng(0)
    a = rng.random(200) < 0.7
    b = np.where(rng.random(200) < 0.2, a, rng.random(200) < 0.6)
    res = independence_test(a, b, n_sim=999, random_state=1)
    expected = (1 + np.sum(np.abs(res.null_distribution) >= abs(res.kappa) - 1e-12)) / 1000
    assert res.p_value == pytest.approx(expected)
    assert 1 / 1000 <= res.p_value <= 1


def test_copies_are_detected_and_p_value_hits_its_floor():
    rng = np.random.default_rng(1)
    a = rng.random(300) < 0.7
    b = np.where(rng.random(300) < 0.6, a, rng.random(300) < 0.7)
    assert independence_test(a, b, n_sim=500, random_state=0).p_value == pytest.approx(1 / 501)


def test_independence_pvalues_broadcasts_over_pairs_and_validates_counts():
    p = independence_pvalues([0.0, 0.5], [50, 60], [40, 70], 100, n_sim=200, random_state=0)
    assert p.shape == (2,)
    assert p[0] > 0.5 and p[1] < 0.01
    with pytest.raises(ValueError, match="n_correct"):
        independence_pvalues(0.1, 120, 40, 100)


def _copier(rng, ref, p_copy, acc):
    return np.where(rng.random(ref.size) < p_copy, ref, rng.random(ref.size) < acc)


def test_equal_ec_swap_test_is_calibrated_for_exchangeable_candidates():
    rng = np.random.default_rng(4)
    p = []
    for r in range(80):
        ref = rng.random(200) < 0.8
        x, y = _copier(rng, ref, 0.4, 0.7), _copier(rng, ref, 0.4, 0.7)
        p.append(equal_ec_test(ref, x, y, n_resamples=200, random_state=r).p_value)
    p = np.asarray(p)
    assert stats.kstest(p, "uniform").pvalue > 0.001
    assert np.mean(p <= 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 80)


def test_equal_ec_test_detects_different_copy_rates_and_reports_the_delta():
    rng = np.random.default_rng(8)
    ref = rng.random((600, 3)) < 0.75  # three reference observers
    x = _copier(rng, ref[:, 0], 0.6, 0.75)
    y = _copier(rng, ref[:, 0], 0.1, 0.75)
    res = equal_ec_test(ref, x, y, n_resamples=1000, random_state=0)
    from humanlike.analysis.error_consistency import kappa

    ka = np.mean([kappa(ref[:, j], x) for j in range(3)])
    kb = np.mean([kappa(ref[:, j], y) for j in range(3)])
    assert res.kappa_a == pytest.approx(ka) and res.kappa_b == pytest.approx(kb)
    assert res.delta == pytest.approx(ka - kb)
    assert res.p_value < 0.01
    assert res.ci.low < res.delta < res.ci.high
    assert abs(np.mean(res.null_distribution)) < 0.02  # the swap null is centred on zero


def test_equal_ec_test_with_strata_averages_ec_over_strata():
    rng = np.random.default_rng(3)
    ref = rng.random(400) < 0.7
    x = _copier(rng, ref, 0.5, 0.7)
    y = _copier(rng, ref, 0.2, 0.7)
    strata = np.repeat(["a", "b"], 200)
    res = equal_ec_test(ref, x, y, strata=strata, n_resamples=300, random_state=0)
    from humanlike.analysis.error_consistency import kappa

    per = [kappa(ref[strata == s], x[strata == s]) for s in "ab"]
    assert res.kappa_a == pytest.approx(np.mean(per))


def test_equal_ec_test_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="reference"):
        equal_ec_test(np.ones((5, 2)), [1, 0, 1, 0], [1, 1, 1, 0])


def test_holm_sidak_matches_statsmodels_and_the_closed_form():
    p = np.array([0.01, 0.04, 0.03, 0.2])
    res = holm_sidak(p, alpha=0.05)
    reject, adjusted, _, _ = multipletests(p, alpha=0.05, method="holm-sidak")
    np.testing.assert_allclose(res.p_adjusted, adjusted)
    np.testing.assert_array_equal(res.reject, reject)
    # smallest p: 1 - (1 - p)^m with m = 4
    assert res.p_adjusted[0] == pytest.approx(1 - (1 - 0.01) ** 4)


def test_holm_sidak_passes_nan_through_and_ignores_it_in_the_family_size():
    res = holm_sidak([0.01, np.nan, 0.04])
    assert np.isnan(res.p_adjusted[1]) and not res.reject[1]
    assert res.p_adjusted[0] == pytest.approx(1 - (1 - 0.01) ** 2)


def test_compare_models_ranks_a_copying_model_above_a_guessing_one():
    rng = np.random.default_rng(6)
    n = 300
    humans = rng.random((n, 4)) < 0.75
    latent = humans[:, 0]
    good = _copier(rng, latent, 0.7, 0.75)
    bad = rng.random(n) < 0.75
    rows = []
    for name, col, group in [
        *[(f"h{j}", humans[:, j], "human") for j in range(4)],
        ("good", good, "model"),
        ("bad", bad, "model"),
    ]:
        rows += [
            {"observer": name, "stimulus": i, "correct": bool(v), "group": group}
            for i, v in enumerate(col)
        ]
    out = compare_models(pd.DataFrame(rows), n_resamples=500, random_state=0)
    assert len(out) == 1
    row = out.iloc[0]
    assert {row["model_a"], row["model_b"]} == {"good", "bad"}
    assert row["p_holm_sidak"] < 0.05 and bool(row["reject"])
