"""Kappa of near-ceiling experiments: how many simulated experiments or resamples each convention
drops (closed forms from the copy model's 2x2 table), and Klein et al. 2025's convention by name."""

from __future__ import annotations

import numpy as np
import pytest

from humanlike.analysis.error_consistency import (
    error_consistency,
    joint_table,
    kappa,
    simulated_kappa,
)


def test_klein2025_scores_one_constant_observer_zero_and_two_equal_constant_ones_undefined():
    # Klein et al.'s released calculate_kappa: NaN only where c_exp = 1, else the formula
    other = np.array([1, 0, 1, 1, 0, 0, 1], dtype=bool)
    assert kappa(np.ones(7), other, degenerate="klein2025") == 0.0
    assert kappa(np.zeros(7), other, degenerate="klein2025") == 0.0
    assert np.isnan(kappa(np.ones(7), np.ones(7), degenerate="klein2025"))
    assert kappa(np.ones(7), np.zeros(7), degenerate="klein2025") == 0.0  # c_exp = 0
    assert np.isnan(kappa(np.ones(7), other))  # the default leaves the pair undefined


def _dropped_share(kap: float, acc: float, n: int) -> tuple[float, float]:
    """P(either observer constant) and P(both constant and equal) over n i.i.d. trials."""
    p11, p10, p01, p00 = joint_table(kap, acc, acc).ravel()
    a_const = (p11 + p10) ** n + (p01 + p00) ** n
    b_const = (p11 + p01) ** n + (p10 + p00) ** n
    both_equal = p11**n + p00**n
    both = both_equal + p10**n + p01**n
    return a_const + b_const - both, both_equal


def test_near_ceiling_simulation_reports_what_each_convention_drops_and_how_it_biases():
    # the case: true kappa .5, both observers 97% correct, 30 trials
    n_sim = 40_000
    either, both_equal = _dropped_share(0.5, 0.97, 30)
    undefined = simulated_kappa(0.5, 0.97, 0.97, 30, n_sim=n_sim, random_state=1)
    klein = simulated_kappa(0.5, 0.97, 0.97, 30, n_sim=n_sim, degenerate="klein2025",
                            random_state=1)
    se = np.sqrt(either * (1 - either) / n_sim)
    assert undefined.dropped[0] / n_sim == pytest.approx(either, abs=4 * se)  # .545
    assert klein.dropped[0] / n_sim == pytest.approx(both_equal, abs=4 * se)  # .254
    assert undefined.n_sim == n_sim and undefined.distribution.shape == (1, n_sim)
    # dropping biases the centre up, scoring 0 pulls it down (200,000 experiments: .651 / .348)
    assert undefined.median[0] > 0.6
    assert klein.median[0] < 0.4
    # with enough trials neither drops anything and both centre on the truth
    far = simulated_kappa(0.5, 0.97, 0.97, 2000, n_sim=2000, random_state=2)
    assert far.dropped[0] == 0
    assert far.median[0] == pytest.approx(0.5, abs=0.03)


def test_error_consistency_counts_the_resamples_it_leaves_out_of_the_ci():
    # one error each, on different trials of 30: a resample misses a given trial with
    # probability (29/30)^30 and both with (28/30)^30
    a = np.ones(30, dtype=bool)
    b = np.ones(30, dtype=bool)
    a[0], b[1] = False, False
    n_res = 20_000
    res = error_consistency(a, b, n_resamples=n_res, n_sim=200, random_state=0)
    either = 2 * (29 / 30) ** 30 - (28 / 30) ** 30
    se = np.sqrt(either * (1 - either) / n_res)
    assert res.n_resamples_dropped / n_res == pytest.approx(either, abs=4 * se)  # .598
    res_k = error_consistency(a, b, n_resamples=n_res, n_sim=200, degenerate="klein2025",
                              random_state=0)
    assert res_k.n_resamples_dropped / n_res == pytest.approx((28 / 30) ** 30, abs=4 * se)


def test_kappa_matrix_and_the_printed_summary_count_the_resamples_each_ci_left_out():
    import pandas as pd

    from humanlike.analysis.error_consistency.analysis import analyze_error_consistency

    # two humans, 30 stimuli, one error each on different stimuli (as above: .598 of resamples
    # leave one of them at 100%)
    correct = np.ones((2, 30), dtype=bool)
    correct[0, 0] = correct[1, 1] = False
    frame = pd.DataFrame({
        "observer": np.repeat(["h1", "h2"], 30), "stimulus": np.tile(np.arange(30), 2),
        "correct": correct.ravel(), "group": "human", "condition": "c", "experiment": "e",
    })
    n_res = 4000
    res = analyze_error_consistency(frame, n_resamples=n_res, n_sim=100, random_state=0)
    dropped = int(res.kappa.pairs["ci_dropped"].iloc[0])
    assert dropped == int(np.isnan(res.kappa.pair_distribution[:, 0]).sum())
    either = 2 * (29 / 30) ** 30 - (28 / 30) ** 30
    assert dropped / n_res == pytest.approx(either, abs=4 * np.sqrt(either * (1 - either) / n_res))
    assert f"1 pair(s) with a kappa lost bootstrap resamples to an observer at 0% or 100% (up to " \
        f"{dropped} of {n_res})" in res.summary()
