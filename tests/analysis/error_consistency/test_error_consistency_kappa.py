"""Cohen's kappa on correctness vectors: closed-form values, policies and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from humanlike.analysis.error_consistency import (
    error_consistency,
    kappa,
    kappa_bounds,
    kappa_from_rates,
    kappa_max,
    kappa_min,
)

binary_pairs = st.integers(min_value=2, max_value=60).flatmap(
    lambda n: st.tuples(
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
)


def test_kappa_matches_the_worked_example_of_two_thirds():
    assert kappa([1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]) == pytest.approx(2 / 3, abs=1e-12)


def test_kappa_is_minus_one_when_observers_disagree_on_every_trial():
    assert kappa([0, 0, 1, 1], [1, 1, 0, 0]) == pytest.approx(-1.0, abs=1e-12)


def test_unbiased_kappa_matches_the_worked_example_of_minus_a_quarter():
    # plain kappa is -6/29; n kappa / ((n - 1) + kappa) with n = 7 gives -1/4
    a, b = [0, 1, 0, 1, 1, 1, 1], [0, 1, 1, 0, 0, 0, 0]
    assert kappa(a, b) == pytest.approx(-6 / 29, abs=1e-12)
    assert kappa(a, b, unbiased=True) == pytest.approx(-0.25, abs=1e-12)


def test_kappa_is_one_when_observers_agree_on_every_trial():
    assert kappa([1, 0, 1, 1, 0], [1, 0, 1, 1, 0]) == pytest.approx(1.0)


def test_mvh_policy_gives_one_and_strict_gives_nan_when_both_are_perfect():
    perfect = np.ones(10, dtype=bool)
    assert kappa(perfect, perfect, degenerate="mvh") == 1.0
    assert np.isnan(kappa(perfect, perfect, degenerate="strict"))
    assert np.isnan(kappa(~perfect, ~perfect, degenerate="strict"))


def test_strict_policy_gives_zero_when_exactly_one_observer_is_perfect():
    other = np.array([1, 0, 1, 1, 0, 0, 1], dtype=bool)
    assert kappa(np.ones(7), other, degenerate="strict") == 0.0
    assert kappa(other, np.ones(7), degenerate="mvh") == 0.0


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([1, 0, 2], [1, 0, 1], "0/1"),
        ([1, 0, 1], [1, 0], "same length"),
        ([], [], "empty"),
        ([[1, 0]], [[1, 0]], "1-D"),
        ([1.0, np.nan], [1.0, 0.0], "0/1"),
    ],
)
def test_kappa_rejects_bad_input_with_a_clear_error(a, b, message):
    with pytest.raises(ValueError, match=message):
        kappa(a, b)


def test_unknown_degenerate_policy_is_rejected():
    with pytest.raises(ValueError, match="degenerate"):
        kappa([1, 0], [1, 0], degenerate="lenient")


@settings(max_examples=150, deadline=None)
@given(binary_pairs)
def test_kappa_equals_scikit_learn_cohen_kappa_when_defined(pair):
    a, b = (np.asarray(x) for x in pair)
    expected_consistency = a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean())
    if expected_consistency == 1.0:
        return  # undefined (both observers constant and equal): covered by the policy tests
    assert kappa(a, b, degenerate="strict") == pytest.approx(
        cohen_kappa_score(a, b, labels=[False, True]), abs=1e-12
    )


@settings(max_examples=150, deadline=None)
@given(binary_pairs)
def test_kappa_lies_within_its_bounds_given_accuracies_and_c_exp(pair):
    a, b = (np.asarray(x) for x in pair)
    k = kappa(a, b, degenerate="mvh")  # defined everywhere under model-vs-human's convention
    pa, pb = a.mean(), b.mean()
    c_exp = pa * pb + (1 - pa) * (1 - pb)
    assert -1.0 - 1e-12 <= k <= 1.0 + 1e-12
    if c_exp < 1.0:
        assert kappa_min(pa, pb) - 1e-9 <= k <= kappa_max(pa, pb) + 1e-9
        low, high = kappa_bounds(c_exp)
        assert low - 1e-9 <= k <= high + 1e-9


@settings(max_examples=100, deadline=None)
@given(binary_pairs, st.sampled_from(["undefined", "mvh", "strict"]), st.booleans())
def test_kappa_is_symmetric_in_its_two_observers(pair, degenerate, unbiased):
    a, b = pair
    np.testing.assert_equal(
        kappa(a, b, degenerate=degenerate, unbiased=unbiased),
        kappa(b, a, degenerate=degenerate, unbiased=unbiased),
    )


@settings(max_examples=100, deadline=None)
@given(binary_pairs, st.randoms(use_true_random=False))
def test_kappa_is_invariant_to_trial_order(pair, random):
    a, b = (np.asarray(x) for x in pair)
    order = list(range(a.size))
    random.shuffle(order)
    assert kappa(a[order], b[order]) == pytest.approx(kappa(a, b), abs=1e-12, nan_ok=True)


def test_kappa_from_rates_broadcasts_over_arrays():
    c_obs = np.array([[0.5, 1.0], [0.8, 0.2]])
    out = kappa_from_rates(c_obs, 0.5, 0.5)
    np.testing.assert_allclose(out, (c_obs - 0.5) / 0.5)


def test_error_consistency_reports_kappa_agreements_ci_and_p_value():
    rng = np.random.default_rng(3)
    a = rng.random(400) < 0.7
    b = np.where(rng.random(400) < 0.5, a, rng.random(400) < 0.7)
    res = error_consistency(a, b, n_resamples=2000, n_sim=2000, random_state=0)
    assert res.kappa == pytest.approx(kappa(a, b))
    assert res.c_obs == pytest.approx(np.mean(a == b))
    assert res.c_exp == pytest.approx(a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean()))
    assert res.n == 400
    assert res.ci.low < res.kappa < res.ci.high
    # half the trials are copies: kappa is far from independence
    assert res.p_value == pytest.approx(1 / 2001)
    again = error_consistency(a, b, n_resamples=2000, n_sim=2000, random_state=0)
    assert again == res


def test_error_consistency_ci_has_the_normal_theory_width():
    # 95% percentile interval ~ kappa +- 1.96 SE, with SE of Fleiss, Cohen & Everitt (1969)
    from humanlike.analysis.error_consistency import kappa_standard_error

    rng = np.random.default_rng(11)
    n = 2000
    a = rng.random(n) < 0.75
    b = np.where(rng.random(n) < 0.4, a, rng.random(n) < 0.75)
    res = error_consistency(a, b, n_resamples=4000, n_sim=100, random_state=1)
    se = kappa_standard_error(res.kappa, res.accuracy_a, res.accuracy_b, n)
    assert (res.ci.high - res.ci.low) / 2 == pytest.approx(1.96 * se, rel=0.1)
