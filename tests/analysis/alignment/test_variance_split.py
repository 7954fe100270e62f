"""Shared, individual and internal-noise shares per observer on simulated observers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from humanlike.analysis.alignment.variance_split import agreement, variance_split


@pytest.mark.parametrize(("h", "k", "r"), [(0.5, 1.0, 0.3), (-0.4, 0.8, 0.6), (0.7, -0.2, -0.5)])
def test_agreement_equals_the_bivariate_normal_on_both_sides(h, k, r):
    mvn = multivariate_normal(cov=[[1.0, r], [r, 1.0]])
    assert agreement(h, k, r) == pytest.approx(mvn.cdf([h, k]) + mvn.cdf([-h, -k]), abs=1e-6)


def test_known_shared_and_individual_shares_are_recovered_within_their_cis():
    # e_o = shared (var .6) + individual (var .4); internal noise var 1: explainable .5,
    # shared .5 * .6 = .3, individual .2, noise .5
    rng = np.random.default_rng(0)
    n_obs, n = 6, 800
    shared = rng.normal(scale=np.sqrt(0.6), size=n)
    first, second = [], []
    for _ in range(n_obs):
        external = shared + rng.normal(scale=np.sqrt(0.4), size=n)
        first.append(1.0 + external + rng.normal(size=n) > 0)
        second.append(1.0 + external + rng.normal(size=n) > 0)
    table = variance_split(np.array(first), np.array(second), n_resamples=300,
                           random_state=0).table
    truth = {"explainable": 0.5, "shared": 0.3, "individual": 0.2, "noise": 0.5}
    covered = sum(((table[f"{k}_low"] <= v) & (v <= table[f"{k}_high"])).sum()
                  for k, v in truth.items())
    assert covered >= 21  # 24 intervals at nominal 95%
    assert table["shared"].mean() == pytest.approx(0.3, abs=0.04)
    assert table["individual"].mean() == pytest.approx(0.2, abs=0.04)
    np.testing.assert_allclose(table[["shared", "individual", "noise"]].sum(axis=1), 1.0)


def test_observers_without_a_partner_are_refused():
    with pytest.raises(ValueError, match="at least 2 observers"):
        variance_split(np.ones((1, 5), bool), np.ones((1, 5), bool))
