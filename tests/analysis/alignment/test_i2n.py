"""I2n (Rajalingham et al. 2018) on synthetic designs with a closed form."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from humanlike.analysis.alignment import i2n, i2n_consistency


def trials(design: dict[tuple[str, str], dict[str, int]]) -> pd.DataFrame:
    """Trials from {(image, class): {response: count}}."""
    rows = [(image, category, response)
            for (image, category), answers in design.items()
            for response, count in answers.items() for _ in range(count)]
    return pd.DataFrame(rows, columns=["stimulus", "category", "response"])


def test_i2n_is_z_of_the_hit_rate_minus_its_class_mean_when_rates_are_symmetric():
    # class A images answered A on 84, 50, 16 of 100 trials: Z(.84), 0, Z(.16) = -Z(.84), mean 0,
    # and the false-alarm rate (from class B images) cancels in the normalisation.
    design = {("a1", "A"): {"A": 84, "B": 16}, ("a2", "A"): {"A": 50, "B": 50},
              ("a3", "A"): {"A": 16, "B": 84}, ("b1", "B"): {"B": 70, "A": 30},
              ("b2", "B"): {"B": 90, "A": 10}}
    result = i2n(trials(design)).set_index("stimulus")["i2n"]
    z = norm.ppf(0.84)
    assert result["a1"] == pytest.approx(z, abs=1e-12)
    assert result["a2"] == pytest.approx(0.0, abs=1e-12)
    assert result["a3"] == pytest.approx(-z, abs=1e-12)
    half = (norm.ppf(0.9) - norm.ppf(0.7)) / 2
    assert result["b2"] == pytest.approx(half, abs=1e-12)
    assert result["b1"] == pytest.approx(-half, abs=1e-12)


def test_a_three_way_design_reads_each_distractor_from_its_two_responses():
    # image x of class A: 60 A, 30 B, 10 C -> HR vs B = 60/90, vs C = 60/70; class B and C images
    # never answer A, so FAR is clipped at 1/(2n) and cancels; two A images give +-half the gap.
    design = {("x", "A"): {"A": 60, "B": 30, "C": 10}, ("y", "A"): {"A": 60, "B": 10, "C": 30},
              ("p", "B"): {"B": 100}, ("q", "C"): {"C": 100}}
    result = i2n(trials(design)).set_index(["stimulus", "distractor"])["i2n"]
    gap = (norm.ppf(60 / 90) - norm.ppf(60 / 70)) / 2
    assert result[("x", "B")] == pytest.approx(gap, abs=1e-12)
    assert result[("x", "C")] == pytest.approx(-gap, abs=1e-12)
    assert result[("y", "B")] == pytest.approx(-gap, abs=1e-12)


def test_one_trial_per_image_is_refused_with_the_count():
    with pytest.raises(ValueError, match="at least 10 trials per image"):
        i2n(trials({("a", "A"): {"A": 1}, ("b", "B"): {"B": 1}}))


def test_i2n_consistency_is_one_for_identical_tables_and_its_ci_covers_the_truth():
    rng = np.random.default_rng(3)
    n = 60
    truth = rng.normal(size=n)
    table = pd.DataFrame({"stimulus": [f"s{i}" for i in range(n)], "distractor": "B", "i2n": truth})
    same = i2n_consistency(table, table, n_resamples=200, random_state=0)
    assert same.r == pytest.approx(1.0) and same.n_cells == n
    # two noisy measurements with known correlation rho = 1 / (1 + s^2) = 0.8 (s^2 = 0.25)
    covered = 0
    for seed in range(40):
        g = np.random.default_rng(seed)
        latent = g.normal(size=200)
        names = [f"s{i}" for i in range(200)]
        a = pd.DataFrame({"stimulus": names, "distractor": "B",
                          "i2n": latent + g.normal(scale=0.5, size=200)})
        b = a.assign(i2n=latent + g.normal(scale=0.5, size=200))
        result = i2n_consistency(a, b, n_resamples=300, random_state=seed)
        covered += result.ci.low <= 0.8 <= result.ci.high
    assert covered >= 34  # nominal 95%: 38 of 40 expected; binomial 1% tail at 34
