"""Parametric bootstrap of MLDS scales: coverage for known observers, published bootstrap SDs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.mlds.batch import fit_many
from humanlike.analysis.mlds.estimator import MLDS
from humanlike.analysis.mlds.simulate import simulate_responses
from humanlike.stimuli.mlds_design import all_quadruples, all_triads

TRUE_PSI = (np.arange(7) / 6) ** 2
TRUE_SIGMA = 0.1


@pytest.mark.parametrize("design", ["triads", "quadruples"])
def test_known_scale_lies_in_the_95_percent_interval_about_95_percent_of_the_time(design):
    """150 simulated observers (psi = (level/6)^2, sigma = 0.1, 20 x 35 trials each), each with
    a 300-replicate parametric bootstrap; all observers and replicates in one batched fit.
    (With 10 x 35 quadruples a few observers' responses are perfectly separated and have no
    maximum-likelihood scale at all.)"""
    universe = all_triads(7) if design == "triads" else all_quadruples(7)
    n_obs, reps = 150, 20
    levels = np.tile(universe, (n_obs * reps, 1))
    cols = ["s1", "s2", "s3", "s4"][: universe.shape[1]]
    df = pd.DataFrame(levels, columns=cols)
    df["observer"] = np.repeat(np.arange(n_obs), len(universe) * reps)
    df["response"] = simulate_responses(levels, TRUE_PSI, TRUE_SIGMA, design=design,
                                        random_state=11)
    fits = fit_many(df, by="observer", design=design, n_resamples=300, random_state=12)
    assert fits.converged.all()
    assert fits.n_failed.sum() < 0.01 * n_obs * 300  # separated replicates are rare
    inner = slice(1, -1)  # psi_1 = 0 and psi_7 = 1 by definition
    covered = (fits.ci.low[:, inner] <= TRUE_PSI[inner]) & (TRUE_PSI[inner] <= fits.ci.high[:,
                                                                                         inner])
    assert 0.91 <= covered.mean() <= 0.98
    assert (covered.mean(axis=0) >= 0.85).all()  # no level is badly covered
    assert np.median(fits.sigma) == pytest.approx(TRUE_SIGMA, rel=0.1)


def test_bootstrap_standard_deviations_match_the_published_kk_values():
    """Knoblauch & Maloney (2008), ``boot.mlds(kk.mlds, 10000)``: bt.sd of the standard scale
    at levels 2-5 = 0.0245, 0.0252, 0.0278, 0.0246."""
    df = pd.read_csv(shared_data_dir() / "mlds" / "data_kk_all_swapped.csv")
    boot = MLDS("quadruples").fit(df).bootstrap(2000, random_state=3)
    np.testing.assert_allclose(boot.standard_error[1:5], [0.0245, 0.0252, 0.0278, 0.0246],
                               rtol=0.08)
    assert boot.n_failed == 0
    assert boot.scale_std.shape == (2000, 11)


def test_bootstrap_is_reproducible_from_its_random_state_and_brackets_the_fit():
    df = pd.read_csv(shared_data_dir() / "mlds" / "data_kktriad.csv")
    fit = MLDS("triads").fit(df)
    a = fit.bootstrap(300, random_state=5)
    b = fit.bootstrap(300, random_state=5)
    np.testing.assert_array_equal(a.scale_std, b.scale_std)
    assert (a.ci.low[1:-1] < fit.scale_std_[1:-1]).all()
    assert (fit.scale_std_[1:-1] < a.ci.high[1:-1]).all()
    assert a.sigma_ci.low < fit.sigma_ < a.sigma_ci.high


def test_bootstrap_needs_a_fitted_model():
    with pytest.raises(ValueError, match="not fitted"):
        MLDS().bootstrap(10)
