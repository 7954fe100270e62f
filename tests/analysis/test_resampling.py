"""The shared bootstrap toolkit: one interval type, one Holm-Sidak, one percentile interval."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from statsmodels.stats.multitest import multipletests

from humanlike.analysis import ConfidenceInterval, holm_sidak
from humanlike.analysis._resampling import (
    bootstrap_counts,
    confidence_interval,
    counts_from_indices,
    draw_resample_counts,
    null_p_value,
    percentile_interval,
    resample_indices,
)
from humanlike.analysis.error_consistency import equal_ec_test, error_consistency
from humanlike.analysis.mlds import MLDS, fit_many, psychophysical_score, simulate_responses
from humanlike.stimuli.mlds_design import all_triads


def test_confidence_interval_is_frozen_and_unpacks_to_low_then_high():
    ci = ConfidenceInterval(0.1, 0.4, 0.95)
    low, high = ci
    assert (low, high, ci.level) == (0.1, 0.4, 0.95)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ci.low = 0.0  # type: ignore[misc]


def test_percentile_interval_equals_numpy_quantiles_and_skips_nan_resamples():
    rng = np.random.default_rng(0)
    dist = rng.normal(size=(2001, 3))
    low, high = percentile_interval(dist, 0.9)
    alpha = 1 - 0.9
    np.testing.assert_array_equal(low, np.quantile(dist, alpha / 2, axis=0))
    np.testing.assert_array_equal(high, np.quantile(dist, 1 - alpha / 2, axis=0))
    with_nan = np.vstack([dist, np.full((5, 3), np.nan)])
    np.testing.assert_array_equal(percentile_interval(with_nan, 0.9, axis=0)[0], low)
    np.testing.assert_array_equal(percentile_interval(dist.T, 0.9, axis=1)[1], high)
    ci = confidence_interval(dist[:, 0], 0.9)
    assert isinstance(ci.low, float) and ci.level == 0.9 and ci.low == low[0]


def test_percentile_interval_rejects_a_confidence_level_outside_zero_one():
    with pytest.raises(ValueError, match="confidence_level"):
        percentile_interval(np.arange(10.0), 1.0)


def test_counts_from_the_same_indices_equal_the_drawn_bootstrap_counts():
    counts = bootstrap_counts(7, 50, np.random.default_rng(3))
    indices = resample_indices(7, 50, np.random.default_rng(3))
    np.testing.assert_array_equal(counts, counts_from_indices(indices, 7))
    assert (counts.sum(axis=1) == 7).all()


def test_stratified_counts_keep_every_stratum_size_in_every_resample():
    strata = ["a", "a", "b", "b", "b", "natural"]
    people, stimuli = draw_resample_counts(strata, 4, 200, random_state=1)
    assert (people.sum(axis=1) == 4).all()
    assert (stimuli[:, :2].sum(axis=1) == 2).all() and (stimuli[:, 2:5].sum(axis=1) == 3).all()
    assert (stimuli[:, 5] == 1).all()


def test_null_p_value_counts_the_observed_statistic_once():
    null = np.array([[-0.5, 0.1, 0.2, 0.6]])
    np.testing.assert_allclose(null_p_value(null, np.array([0.5])), [(1 + 2) / 5])
    assert np.isnan(null_p_value(null, np.array([np.nan]))[0])


def test_holm_sidak_matches_statsmodels_and_passes_nan_through():
    p = np.array([0.01, np.nan, 0.04, 0.03])
    res = holm_sidak(p, alpha=0.05)
    reject, adjusted, _, _ = multipletests(p[[0, 2, 3]], alpha=0.05, method="holm-sidak")
    np.testing.assert_allclose(res.p_adjusted[[0, 2, 3]], adjusted)
    np.testing.assert_array_equal(res.reject[[0, 2, 3]], reject)
    assert np.isnan(res.p_adjusted[1]) and not res.reject[1]


def _triads(seed: int = 0) -> pd.DataFrame:
    levels = np.tile(all_triads(7), (8, 1))
    df = pd.DataFrame(levels, columns=["s1", "s2", "s3"])
    df["sequence"] = np.repeat(["x", "y"], len(levels) // 2)
    psi = (np.arange(7) / 6) ** 1.5
    df["response"] = simulate_responses(levels, psi, 0.15, random_state=seed)
    return df


def test_every_reported_interval_is_a_confidence_interval_at_its_level():
    rng = np.random.default_rng(4)
    a, b, c = (rng.random(120) < 0.7 for _ in range(3))
    ec = error_consistency(a, b, n_resamples=200, n_sim=200, confidence_level=0.9, random_state=0)
    assert isinstance(ec.ci, ConfidenceInterval) and ec.ci.level == 0.9
    eq = equal_ec_test(a, b, c, n_resamples=200, random_state=0)
    assert isinstance(eq.ci, ConfidenceInterval) and eq.ci.level == 0.95
    df = _triads()
    fits = fit_many(df, n_resamples=50, confidence_level=0.8, random_state=0)
    assert fits.ci is not None and fits.sigma_ci is not None
    assert fits.ci.low.shape == fits.scale.shape and fits.sigma_ci.low.shape == fits.sigma.shape
    assert fits.ci.level == fits.sigma_ci.level == 0.8
    frame = fits.to_frame()
    np.testing.assert_array_equal(frame["ci_low"], fits.ci.low.ravel())
    boot = MLDS().fit(df[df["sequence"] == "x"]).bootstrap(50, random_state=0)
    assert isinstance(boot.sigma_ci.low, float) and boot.ci.low.shape == (7,)
    score = psychophysical_score(
        np.arange(6.0), np.array([0, 2, 1, 3, 5, 4.0]), n_resamples=200, random_state=0
    )
    assert isinstance(score.ci, ConfidenceInterval) and score.ci.level == 0.95


def test_cli_options_say_n_resamples_and_still_accept_n_boot(tmp_path):
    from humanlike.cli import analyze_ec, analyze_mlds

    data = tmp_path / "data.csv"
    data.write_text("x\n")
    for command in (analyze_ec.command, analyze_mlds.command):
        help_text = CliRunner().invoke(command, ["--help"]).output
        assert "--n-resamples" in help_text and "--n-boot" not in help_text
        for flag in ("--n-resamples", "--n-boot"):
            ctx = command.make_context("x", [str(data), "--out", "o", flag, "7"])
            assert ctx.params["n_resamples"] == 7
