"""Double-pass internal noise (Burgess & Colborne 1988; Neri 2010) and individual noise ceilings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal, norm

from humanlike.analysis.alignment.double_pass import (
    ceiling_agreement,
    double_pass,
    double_pass_by_observer,
    internal_noise,
    pass_agreement,
)


def both(h: float, k: float, r: float) -> float:
    """Phi2(h, k; r) + Phi2(-h, -k; r) from scipy's bivariate normal (an independent route)."""
    mvn = multivariate_normal(cov=[[1.0, r], [r, 1.0]])
    return float(mvn.cdf([h, k]) + mvn.cdf([-h, -k]))


@pytest.mark.parametrize(("d", "gamma"), [(1.0, 1.0), (0.5, 0.5), (2.0, 1.5)])
def test_agreement_and_its_inverse_match_the_bivariate_normal(d, gamma):
    a = d / np.sqrt(1 + gamma**2)
    rho = 1 / (1 + gamma**2)
    expected = both(a, a, rho)
    assert pass_agreement(a, gamma) == pytest.approx(expected, abs=1e-6)
    assert internal_noise(norm.cdf(a), expected) == pytest.approx(gamma, abs=1e-5)
    # noise-free model d + e > 0 against the observer d + e + i > 0: correlation 1/sqrt(1+g^2)
    assert ceiling_agreement(norm.cdf(a), gamma) == pytest.approx(
        both(a, d, 1 / np.sqrt(1 + gamma**2)), abs=1e-6)


def test_no_internal_noise_means_perfect_agreement_and_chance_agreement_means_infinite_noise():
    assert internal_noise(0.8, 1.0) == 0.0
    assert internal_noise(0.8, 0.8**2 + 0.2**2 - 0.01) == np.inf


def simulate(seed: int, n: int = 400, d: float = 1.0, gamma: float = 1.0) -> tuple[np.ndarray, ...]:
    """One observer seeing n trials twice: external noise repeats, internal noise does not."""
    rng = np.random.default_rng(seed)
    external = rng.normal(size=n)
    first = d + external + gamma * rng.normal(size=n) > 0
    second = d + external + gamma * rng.normal(size=n) > 0
    return first, second


def test_a_simulated_observer_with_internal_noise_ratio_one_is_recovered_within_its_ci():
    result = double_pass(*simulate(0), n_resamples=500, random_state=0)
    assert result.ci["internal_noise"].low <= 1.0 <= result.ci["internal_noise"].high
    assert result.ceiling_agreement > result.p_agree  # a noise-free model agrees more than a repeat
    covered = sum(
        (ci := double_pass(*simulate(seed), n_resamples=300, random_state=seed).ci[
            "internal_noise"]).low <= 1.0 <= ci.high
        for seed in range(1, 41))
    assert covered >= 34  # nominal 38 of 40; 1% binomial tail at 34


def test_per_observer_estimates_come_from_first_and_repeated_trials():
    rows = []
    for participant, gamma in (("p1", 0.5), ("p2", 2.0)):
        first, second = simulate(7, n=300, gamma=gamma)
        for i, (c1, c2) in enumerate(zip(first, second, strict=True)):
            rows.append({"participant": participant, "stimulus": i, "correct": c1,
                         "is_repeat": False})
            rows.append({"participant": participant, "stimulus": i, "correct": c2,
                         "is_repeat": True})
    rows.append({"participant": "p3", "stimulus": 0, "correct": True, "is_repeat": False})
    table = double_pass_by_observer(pd.DataFrame(rows), n_resamples=200, random_state=0)
    assert table["participant"].tolist() == ["p1", "p2"]  # p3 has no repeats
    assert (table["n"] == 300).all()
    low, high = table.set_index("participant")["internal_noise"].loc[["p1", "p2"]]
    assert low < high
    with pytest.raises(ValueError, match="is_repeat"):
        double_pass_by_observer(pd.DataFrame(rows).drop(columns="is_repeat"))
