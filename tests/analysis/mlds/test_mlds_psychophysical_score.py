"""Psychophysical-Score: skewness of standard scales and its rank correlation with humans."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from humanlike.analysis.mlds.batch import fit_many
from humanlike.analysis.mlds.psychophysical import (
    psychophysical_score,
    random_observer_skewness,
    random_observer_triads,
    scale_skewness,
    score_table,
    skewness_frame,
    skewness_spread,
    skewness_variance,
)
from humanlike.analysis.mlds.simulate import simulate_responses
from humanlike.stimuli.mlds_design import all_triads


def test_skewness_is_zero_for_a_linear_scale_and_plus_minus_one_at_the_extremes():
    linear = np.arange(7) / 6
    late = np.r_[0, np.zeros(5), 1.0]  # nothing changes until the last step
    early = np.r_[0, np.ones(5), 1.0]
    assert scale_skewness(linear) == pytest.approx(0.0, abs=1e-15)
    assert scale_skewness(late) == pytest.approx(1.0)
    assert scale_skewness(early) == pytest.approx(-1.0)


def test_skewness_of_a_power_scale_has_the_closed_form():
    # sum_{i=0..6} (i/6)^2 = 91/36, so S = -2 ((91/36 - 1) / 5 - 1/2) = -2 (11/36 - 1/2) = 7/18
    assert scale_skewness((np.arange(7) / 6) ** 2) == pytest.approx(7 / 18)
    batch = np.stack([(np.arange(7) / 6) ** g for g in (0.5, 1.0, 2.0)])
    s = scale_skewness(batch)
    assert s.shape == (3,) and s[0] < 0 < s[2] and s[1] == pytest.approx(0.0, abs=1e-15)


def test_score_is_the_spearman_correlation_with_a_bootstrap_interval():
    rng = np.random.default_rng(0)
    human = rng.normal(size=80)
    model = human + rng.normal(scale=0.8, size=80)
    score = psychophysical_score(model, human, n_resamples=2000, random_state=1)
    rho, p = stats.spearmanr(model, human)
    assert score.rho == pytest.approx(rho)
    assert score.p_value == pytest.approx(p)
    assert score.ci.low < score.rho < score.ci.high
    assert score.bootstrap_distribution.shape == (2000,)
    # the bootstrap SD of Spearman's rho is close to the large-sample (1 - rho^2) / sqrt(n - 1)
    assert score.bootstrap_distribution.std() == pytest.approx((1 - rho**2) / np.sqrt(79),
                                                              rel=0.3)


@pytest.mark.filterwarnings("ignore::scipy.stats.DegenerateDataWarning")  # every resample rho = 1
def test_identical_skewness_orders_score_one_and_series_are_aligned_by_sequence():
    human = pd.Series([0.3, -0.2, 0.1, 0.5], index=["a", "b", "c", "d"])
    model = pd.Series([10.0, 3.0, -7.0, 2.0, 99.0], index=["d", "a", "b", "c", "extra"])
    score = psychophysical_score(model, human, n_resamples=200, random_state=0)
    assert score.rho == pytest.approx(1.0)
    assert score.n_sequences == 4


def test_resamples_with_undefined_rho_are_counted_not_turned_into_a_nan_interval():
    """With 4 sequences, 4 (1/4)^4 of resamples draw one sequence 4 times: rho is undefined there.
    scipy 1.17's percentile bootstrap then returns NaN limits (and a BCa warning): the demo's."""
    import warnings

    human = np.array([0.3, -0.2, 0.1, 0.5])
    model = np.array([2.0, -1.0, 0.5, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        score = psychophysical_score(model, human, n_resamples=4000, random_state=0)
    assert (score.ci.low, score.ci.high) == (1.0, 1.0)
    # resamples of one distinct sequence: 4 (1/4)^4 = 1/64 of them (binomial SE 0.002)
    assert score.n_undefined / 4000 == pytest.approx(1 / 64, abs=4 * np.sqrt(1 / 64 / 4000))
    assert np.isnan(score.bootstrap_distribution).sum() == score.n_undefined


def test_too_few_sequences_are_refused():
    with pytest.raises(ValueError, match="at least 3"):
        psychophysical_score(np.array([1.0, 2.0]), np.array([2.0, 1.0]))


@pytest.fixture(scope="module")
def observers() -> pd.DataFrame:
    """Skewness of 60 sequences for a human crowd, a model with the same scales but more noise,
    and a random observer answering the humans' trials."""
    rng = np.random.default_rng(3)
    n_seq, n_trials = 60, 700
    gamma = rng.uniform(0.5, 2.5, n_seq)
    psi = (np.arange(7) / 6)[None, :] ** gamma[:, None]
    levels = all_triads(7)[rng.integers(0, 35, n_seq * n_trials)]
    seq = np.repeat(np.arange(n_seq), n_trials)

    def trials(sigma):
        df = pd.DataFrame(levels, columns=["s1", "s2", "s3"]).assign(sequence=seq)
        df["response"] = simulate_responses(levels, psi, sigma, group=seq, random_state=rng)
        return df

    humans = trials(0.15)
    return pd.concat([
        skewness_frame(fit_many(humans), "human"),
        skewness_frame(fit_many(trials(0.3)), "model"),
        random_observer_skewness(humans, random_state=4),
    ], ignore_index=True)


def test_score_table_ranks_a_faithful_model_far_above_a_random_observer(observers):
    table = score_table(observers, n_resamples=1000, random_state=0).set_index("observer")
    assert table.loc["model", "rho"] > 0.8
    assert table.loc["model", "ci_low"] > 0.6
    assert abs(table.loc["random", "rho"]) < 0.35
    assert table.loc["random", "ci_low"] < 0 < table.loc["random", "ci_high"]
    assert np.isnan(table.loc["human", "rho"])


def test_random_observer_has_far_more_variable_skewness(observers):
    var = skewness_variance(observers).set_index("observer")["skewness_variance"]
    assert var["random"] > 10 * var["human"]
    assert var["model"] == pytest.approx(var["human"], rel=0.5)


def test_random_observer_keeps_the_trials_and_flips_fair_coins():
    df = pd.DataFrame({"sequence": "s", "s1": 1, "s2": 2, "s3": 3, "response": np.ones(4000)})
    out = random_observer_triads(df, random_state=0)
    assert out[["sequence", "s1", "s2", "s3"]].equals(df[["sequence", "s1", "s2", "s3"]])
    assert out["response"].mean() == pytest.approx(0.5, abs=0.03)
    assert (out["participant"] == "random").all()


def _coin_flip_triads(n_seq: int, repeats: int) -> pd.DataFrame:
    """Every triad of 7 levels ``repeats`` times in each of ``n_seq`` sequences."""
    levels = np.tile(all_triads(7), (repeats * n_seq, 1))
    df = pd.DataFrame(levels, columns=["s1", "s2", "s3"])
    df["sequence"] = np.repeat(np.arange(n_seq), len(levels) // n_seq)
    df["response"] = 0
    return df


def test_random_baseline_spread_is_robust_while_its_variance_is_not():
    # the coin-flip observer's standard scales are noise over a near-zero psi_N: a ratio with a
    # heavy tail, so its variance jumps by orders of magnitude between runs; the IQR does not
    out = {}
    for repeats in (5, 30):
        runs = [random_observer_skewness(_coin_flip_triads(60, repeats), random_state=seed)
                for seed in range(8)]
        out[repeats] = (
            np.array([skewness_variance(r)["skewness_variance"].iloc[0] for r in runs]),
            np.array([skewness_spread(r)["skewness_iqr"].iloc[0] for r in runs]),
        )
    for var, iqr in out.values():
        assert iqr.std() / iqr.mean() < 0.35  # 20 runs each: CV .16-.17
        assert var.max() / var.min() > 10  # 20 runs each: 3 to 336,599
    iqr_5, iqr_30 = out[5][1].mean(), out[30][1].mean()
    assert 0.5 < iqr_5 < 1.5 and 0.5 < iqr_30 < 1.5  # 20 runs each: .93 and .84 (SE .03)
    assert iqr_30 == pytest.approx(iqr_5, rel=0.3)


def test_score_table_reports_the_interquartile_range_of_skewness(observers):
    table = score_table(observers, n_resamples=200, random_state=0).set_index("observer")
    spread = skewness_spread(observers).set_index("observer")
    skew = observers.set_index("observer")["skewness"]
    assert table.loc["human", "skewness_iqr"] == pytest.approx(stats.iqr(skew["human"]))
    assert "skewness_variance" not in table.columns
    assert spread.loc["random", "skewness_iqr"] > 2 * spread.loc["human", "skewness_iqr"]
    assert spread.loc["model", "skewness_iqr"] == pytest.approx(
        spread.loc["human", "skewness_iqr"], rel=0.5)
