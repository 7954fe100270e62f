"""The copy model (Klein et al. 2025, Prop. 2), kappa's standard error, and trial planning."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humanlike.analysis.error_consistency import (
    copy_model_params,
    joint_table,
    kappa,
    kappa_from_rates,
    kappa_max,
    kappa_min,
    kappa_standard_error,
    simulate_copy_model,
    simulated_ci_halfwidth,
    trials_needed,
)


def test_copy_probability_is_kappa_when_accuracies_are_equal():
    params = copy_model_params(0.3, 0.7, 0.7)
    assert params.copy_probability == pytest.approx(0.3)
    assert params.copier_marginal == pytest.approx(0.7)


def test_kappa_max_needs_a_copier_that_is_always_wrong_on_its_own():
    # acc .8 / .6 at kappa_max = 6/11: p_copy = (6/11)(.44)/(.32) = .75 and q = (.6 - .6) / .25 = 0
    params = copy_model_params(6 / 11, 0.8, 0.6)
    assert params.copy_probability == pytest.approx(0.75)
    assert params.copier_marginal == pytest.approx(0.0, abs=1e-12)


def test_negative_kappa_copies_the_opposite_correctness():
    params = copy_model_params(kappa_min(0.8, 0.6), 0.8, 0.6)
    # kappa_min = -4/11: p_copy = -(4/11)(.44)/(.32) = -.5 and q = (.6 - .5 * .2) / .5 = 1
    assert params.copy_probability == pytest.approx(-0.5)
    assert params.copier_marginal == pytest.approx(1.0)


def test_impossible_kappa_is_rejected_with_its_attainable_range():
    with pytest.raises(ValueError, match="kappa_max"):
        copy_model_params(0.9, 0.8, 0.6)
    with pytest.raises(ValueError, match="acc1"):
        copy_model_params(0.1, 1.0, 0.6)


@st.composite
def copy_settings(draw):
    acc1 = draw(st.floats(0.1, 0.9))
    acc2 = draw(st.floats(0.1, 0.9))
    t = draw(st.floats(0.0, 1.0))
    lo, hi = kappa_min(acc1, acc2), kappa_max(acc1, acc2)
    return lo + t * (hi - lo), acc1, acc2


@settings(max_examples=30, deadline=None)
@given(copy_settings(), st.integers(0, 2**32 - 1))
def test_copy_model_simulations_recover_the_target_kappa(setting, seed):
    target, acc1, acc2 = setting
    n = 200_000
    x, y = simulate_copy_model(target, acc1, acc2, n, np.random.default_rng(seed))
    se = kappa_standard_error(target, acc1, acc2, n)
    assert kappa(x, y) == pytest.approx(target, abs=5 * se + 1e-3)
    assert x.mean() == pytest.approx(acc1, abs=5 * np.sqrt(acc1 * (1 - acc1) / n))
    assert y.mean() == pytest.approx(acc2, abs=5 * np.sqrt(acc2 * (1 - acc2) / n))


def test_simulate_copy_model_draws_many_experiments_at_once_reproducibly():
    x, y = simulate_copy_model(0.2, 0.7, 0.6, 50, 3, size=4)
    assert x.shape == y.shape == (4, 50) and x.dtype == bool
    x2, _ = simulate_copy_model(0.2, 0.7, 0.6, 50, 3, size=4)
    np.testing.assert_array_equal(x, x2)


def test_joint_table_has_the_right_marginals_and_kappa():
    p = joint_table(0.25, 0.8, 0.65)
    assert p.sum() == pytest.approx(1.0)
    assert p.sum(axis=1)[0] == pytest.approx(0.8) and p.sum(axis=0)[0] == pytest.approx(0.65)
    assert kappa_from_rates(np.trace(p), 0.8, 0.65) == pytest.approx(0.25)


def _fleiss_1969_variance(p: np.ndarray) -> float:
    """Fleiss, Cohen & Everitt (1969) large-sample variance of kappa times n, written out."""
    r, c = p.sum(axis=1), p.sum(axis=0)
    po, pe = np.trace(p), float(r @ c)
    first = sum(p[i, i] * ((1 - pe) - (r[i] + c[i]) * (1 - po)) ** 2 for i in range(2))
    second = (1 - po) ** 2 * sum(
        p[i, j] * (c[i] + r[j]) ** 2 for i in range(2) for j in range(2) if i != j
    )
    third = (po * pe - 2 * pe + po) ** 2
    return (first + second - third) / (1 - pe) ** 4


@pytest.mark.parametrize(("k", "a1", "a2"), [(0.3, 0.8, 0.6), (0.0, 0.5, 0.9), (-0.2, 0.6, 0.6)])
def test_standard_error_equals_the_fleiss_cohen_everitt_formula(k, a1, a2):
    expected = np.sqrt(_fleiss_1969_variance(joint_table(k, a1, a2)) / 500)
    assert kappa_standard_error(k, a1, a2, 500) == pytest.approx(expected, rel=1e-10)


def test_standard_error_matches_the_spread_of_simulated_experiments():
    rng = np.random.default_rng(12)
    x, y = simulate_copy_model(0.35, 0.75, 0.65, 800, rng, size=3000)
    sims = kappa_from_rates((x == y).mean(axis=1), x.mean(axis=1), y.mean(axis=1))
    assert np.std(sims) == pytest.approx(kappa_standard_error(0.35, 0.75, 0.65, 800), rel=0.06)


def test_trials_needed_gives_the_requested_half_width_in_simulation():
    n = trials_needed(0.3, 0.8, 0.6, 0.05)
    half = simulated_ci_halfwidth(0.3, 0.8, 0.6, n, n_sim=4000, random_state=0)[0]
    assert half == pytest.approx(0.05, rel=0.08)
    # and it is the smallest n meeting the large-sample criterion
    assert 1.959964 * kappa_standard_error(0.3, 0.8, 0.6, n) <= 0.05
    assert 1.959964 * kappa_standard_error(0.3, 0.8, 0.6, n - 1) > 0.05


def test_simulation_and_analytic_planning_agree():
    analytic = trials_needed(0.2, 0.7, 0.7, 0.08)
    simulated = trials_needed(0.2, 0.7, 0.7, 0.08, method="simulation", n_sim=2000, random_state=1)
    assert simulated == pytest.approx(analytic, rel=0.12)


def test_halving_the_half_width_quadruples_the_trials():
    assert trials_needed(0.4, 0.85, 0.8, 0.05) == pytest.approx(
        4 * trials_needed(0.4, 0.85, 0.8, 0.1), rel=0.01
    )


def test_trials_needed_rejects_bad_arguments():
    with pytest.raises(ValueError, match="ci_halfwidth"):
        trials_needed(0.3, 0.8, 0.6, 0.0)
    with pytest.raises(ValueError, match="method"):
        trials_needed(0.3, 0.8, 0.6, 0.1, method="guess")


def test_fixed_count_copying_centres_on_kappa_and_gives_narrower_intervals():
    # Klein et al.'s released simulator copies exactly round(p_copy n) trials; ours copies each
    # trial with probability p_copy. Same population kappa, but the binomial spread of the number
    # copied widens our intervals: measured 2-32% over kappa .1-.6, accuracies .6-.9, n 100-1600
    # (docs/error-consistency.md), about 14% at kappa .4 with both observers 70% correct.
    from humanlike.analysis.error_consistency.copy_model import (
        _fixed_copy_tables,
        simulated_ci_halfwidth,
    )
    from humanlike.analysis.error_consistency.kappa import kappa_from_rates

    rng = np.random.default_rng(5)
    table = _fixed_copy_tables(0.4, 0.7, 0.7, np.array([4000]), 4000, rng)[0]
    n = table.sum(axis=1)
    assert (n == 4000).all()
    kappas = kappa_from_rates((table[:, 0] + table[:, 3]) / n, (table[:, 0] + table[:, 1]) / n,
                              (table[:, 0] + table[:, 2]) / n)
    assert abs(kappas.mean() - 0.4) < 0.005
    ours = simulated_ci_halfwidth(0.4, 0.7, 0.7, 400, n_sim=20000, random_state=1)[0]
    theirs = simulated_ci_halfwidth(0.4, 0.7, 0.7, 400, n_sim=20000, random_state=2,
                                    copies="fixed")[0]
    assert 1.07 < ours / theirs < 1.22
    with pytest.raises(ValueError, match="copies"):
        simulated_ci_halfwidth(0.4, 0.7, 0.7, 400, copies="exact")
