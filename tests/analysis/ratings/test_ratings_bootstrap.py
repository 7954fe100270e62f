"""Bootstrap of rating scores: vectorised resample statistics, CIs, corrected tests, coverage."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import expit
from statsmodels.stats.multitest import multipletests

from humanlike.analysis._resampling import bootstrap_p_value, draw_resample_counts, holm_sidak
from humanlike.analysis.ratings.bootstrap import bootstrap_ratings, bootstrap_statistics
from humanlike.analysis.ratings.calibration import clipped_logit
from humanlike.analysis.ratings.ceilings import (
    leave_one_out_calibration,
    masked_mse,
    masked_r,
    noise_ceiling,
    upper_bound_closed_form,
)
from humanlike.analysis.ratings.data import RatingArray
from humanlike.analysis.ratings.scores import ModelPredictions, participant_scores


def _experiment(
    rng, n_people=6, n_natural=4, pairs=2, per_pair=3, n_cat=3, missing=0.0, trial=True
):
    """Random ratings (5-point scale), kinds and strata, plus two models."""
    n_stim = n_natural + pairs * per_pair
    truth = rng.random((n_stim, n_cat))
    x = np.clip(truth + rng.normal(0, 0.3, size=(n_people, n_stim, n_cat)), 0, 1)
    x = np.round(x * 4) / 4
    if missing:
        mask = rng.random((n_people, n_stim) if trial else x.shape) < missing
        x[mask if not trial else np.broadcast_to(mask[..., None], x.shape)] = np.nan
    kinds = ("natural",) * n_natural + ("controversial",) * (pairs * per_pair)
    strata = ("natural",) * n_natural + tuple(
        f"m{g} vs m{g + 1}" for g in range(pairs) for _ in range(per_pair)
    )
    ratings = RatingArray(
        x,
        tuple(f"p{i}" for i in range(n_people)),
        tuple(f"s{j:02d}" for j in range(n_stim)),
        tuple(str(k) for k in range(n_cat)),
        kinds,
        strata,
    )
    y = np.clip(truth[None] + rng.normal(0, 0.2, size=(2, n_stim, n_cat)), 0.01, 0.99)
    return ratings, ModelPredictions(
        y, clipped_logit(y), ("a", "b"), ratings.stimuli, ratings.categories
    )


def _brute_force(ratings, y, w, c, subset_mask, calibration=None):
    """Statistics recomputed on the explicitly resampled data (copies of rows and columns)."""
    stim = np.repeat(np.flatnonzero(subset_mask), c[subset_mask])
    people = np.repeat(np.arange(len(w)), w)
    x = ratings.values[:, stim].reshape(len(w), -1)
    xs = x[people]
    ys = y[:, stim].reshape(len(y), -1)
    r, mse = participant_scores(xs, ys)
    loo = np.empty_like(xs)
    for row, person in enumerate(people):
        others = xs[people != person]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # entries no other copy rated
            loo[row] = np.nanmean(others, axis=0) if len(others) else np.nan
    if calibration is not None:
        loo = expit(calibration[0] * clipped_logit(loo) + calibration[1])
    upper = upper_bound_closed_form(xs).value
    best = noise_ceiling(xs, method="closed_form").upper_mse
    return np.r_[np.nanmean(r, 1), np.nanmean(masked_r(xs, loo)), upper], np.r_[
        np.nanmean(mse, 1), np.nanmean(masked_mse(xs, loo)), best
    ]


@pytest.mark.parametrize(
    "missing, trial, calibrate",
    [(0.0, True, False), (0.2, True, False), (0.2, False, False), (0.2, True, True)],
    ids=["complete", "trial-level missing", "entry-level missing", "calibrated"],
)
def test_resample_statistics_equal_recomputation_on_the_explicitly_resampled_data(
    missing, trial, calibrate
):
    rng = np.random.default_rng(20)
    ratings, predictions = _experiment(rng, missing=missing, trial=trial)
    calibration = leave_one_out_calibration(ratings) if calibrate else None
    w, c = draw_resample_counts(ratings.strata, len(ratings.participants), 6, rng)
    stats = bootstrap_statistics(
        ratings,
        predictions.probabilities,
        w,
        c,
        lower_calibration=calibration,
        n_jobs=2,
        max_chunk_elements=100,
    )
    kinds = np.array(ratings.kinds)
    for subset, mask in {
        "all": kinds != "",
        "natural": kinds == "natural",
        "controversial": kinds == "controversial",
    }.items():
        for b in range(len(w)):
            r, mse = _brute_force(ratings, predictions.probabilities, w[b], c[b], mask, calibration)
            np.testing.assert_allclose(stats[subset, "pearson_r"][b], r, atol=1e-10)
            np.testing.assert_allclose(stats[subset, "mse"][b], mse, atol=1e-12)


@pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning")  # resamples nobody rated
@pytest.mark.parametrize("missing", [0.0, 0.3], ids=["complete", "sole raters"])
def test_leave_one_out_sums_over_stimulus_slices_equal_recomputation(missing, monkeypatch):
    """The trial-level leave-one-out sums run over stimulus slices with per-count tables; one
    stimulus per slice here, and with a third of the trials missing some trials' only resampled rater is
    the participant left out (those trials drop out of its sums)."""
    from humanlike.analysis.ratings import bootstrap

    monkeypatch.setattr(bootstrap, "_CACHE_ELEMENTS", 1)
    rng = np.random.default_rng(24)
    ratings, predictions = _experiment(rng, n_people=5, missing=missing)
    w, c = draw_resample_counts(ratings.strata, len(ratings.participants), 12, rng)
    observed = np.isfinite(ratings.values[:, :, 0])
    sole = ((w[:, :, None] > 0) & observed[None]).sum(1) == 1  # (resample, stimulus)
    assert sole.any() == bool(missing)
    stats = bootstrap_statistics(ratings, predictions.probabilities, w, c, n_jobs=1)
    kinds = np.array(ratings.kinds)
    for subset, mask in {"all": kinds != "", "natural": kinds == "natural",
                         "controversial": kinds == "controversial"}.items():
        for b in range(len(w)):
            r, mse = _brute_force(ratings, predictions.probabilities, w[b], c[b], mask)
            np.testing.assert_allclose(stats[subset, "pearson_r"][b], r, atol=1e-10)
            np.testing.assert_allclose(stats[subset, "mse"][b], mse, atol=1e-12)


def test_unit_counts_reproduce_the_full_sample_point_estimates():
    ratings, predictions = _experiment(np.random.default_rng(21), missing=0.15)
    ones_w = np.ones((1, len(ratings.participants)), int)
    ones_c = np.ones((1, len(ratings.stimuli)), int)
    stats = bootstrap_statistics(ratings, predictions.probabilities, ones_w, ones_c)
    result = bootstrap_ratings(ratings, predictions, n_resamples=50, random_state=0)
    ceiling = noise_ceiling(ratings)
    est = result.scores.query("subset == 'all' and metric == 'pearson_r'")["estimate"]
    np.testing.assert_allclose(stats["all", "pearson_r"][0, :2], est, atol=1e-12)
    assert stats["all", "pearson_r"][0, 2] == pytest.approx(ceiling.lower, abs=1e-12)
    assert stats["all", "pearson_r"][0, 3] == pytest.approx(upper_bound_closed_form(ratings).value)
    assert stats["all", "mse"][0, 3] == pytest.approx(ceiling.upper_mse, abs=1e-12)
    # The reported upper bound is the optimised one; the resamples are shifted by the gap.
    upper = result.ceilings.query("subset == 'all' and metric == 'pearson_r' and bound == 'upper'")
    assert upper["estimate"].iloc[0] == pytest.approx(ceiling.upper, abs=1e-12)
    assert result.upper_bound_shift["all"] == pytest.approx(
        ceiling.upper - upper_bound_closed_form(ratings).value
    )


def test_bound_distributions_are_recentred_on_their_estimates_and_the_bias_reported():
    ratings, predictions = _experiment(np.random.default_rng(26), n_people=8, missing=0.1)
    raw = bootstrap_ratings(
        ratings, predictions, n_resamples=300, random_state=1, bias_correct_bounds=False
    )
    fixed = bootstrap_ratings(ratings, predictions, n_resamples=300, random_state=1)
    for (subset, metric), dist in fixed.distributions.items():
        table = fixed.ceilings.query("subset == @subset and metric == @metric").set_index("bound")
        for bound in ("lower", "upper"):
            assert dist[bound].mean() == pytest.approx(table.loc[bound, "estimate"], abs=1e-12)
            raw_mean = raw.distributions[subset, metric][bound].mean()
            bias = raw_mean - table.loc[bound, "estimate"]
            assert table.loc[bound, "bootstrap_bias"] == pytest.approx(bias, abs=1e-12)
    # With fewer distinct participants per resample the leave-one-out r drops on average.
    lower = raw.ceilings.query("metric == 'pearson_r' and bound == 'lower'")["bootstrap_bias"]
    assert (lower < 0).all()
    assert fixed.scores.equals(raw.scores)  # model scores are untouched


def test_stratified_resampling_keeps_every_stratum_size():
    strata = ["natural"] * 5 + ["a vs b"] * 3 + ["a vs c"] * 4
    people, stimuli = draw_resample_counts(strata, 7, 200, random_state=1)
    assert people.shape == (200, 7) and np.all(people.sum(1) == 7)
    strata = np.array(strata)
    for label in set(strata):
        assert np.all(stimuli[:, strata == label].sum(1) == (strata == label).sum())
    assert np.any(stimuli > 1) and np.any(stimuli == 0)  # with replacement


def test_same_random_state_gives_identical_results_and_another_differs():
    ratings, predictions = _experiment(np.random.default_rng(22))
    first = bootstrap_ratings(ratings, predictions, n_resamples=100, random_state=5)
    again = bootstrap_ratings(ratings, predictions, n_resamples=100, random_state=5, n_jobs=1)
    other = bootstrap_ratings(ratings, predictions, n_resamples=100, random_state=6)
    assert first.scores.equals(again.scores)
    assert first.comparisons.equals(again.comparisons)
    assert not first.scores["ci_low"].equals(other.scores["ci_low"])


def test_resampling_one_metric_gives_that_metrics_results_unchanged():
    ratings, predictions = _experiment(np.random.default_rng(25), missing=0.1)
    both = bootstrap_ratings(ratings, predictions, n_resamples=80, random_state=4)
    r_only = bootstrap_ratings(ratings, predictions, n_resamples=80, random_state=4,
                               metrics=("pearson_r",))
    for name in ("scores", "ceilings", "comparisons"):
        table = getattr(both, name)
        expected = table[table["metric"] == "pearson_r"].reset_index(drop=True)
        assert getattr(r_only, name).reset_index(drop=True).equals(expected), name
    with pytest.raises(ValueError, match="metrics"):
        bootstrap_ratings(ratings, predictions, n_resamples=10, metrics=("kendall",))


def test_results_cover_all_controversial_and_natural_stimuli_and_every_comparison():
    ratings, predictions = _experiment(np.random.default_rng(23))
    result = bootstrap_ratings(ratings, predictions, n_resamples=60, random_state=0)
    assert set(result.scores["subset"]) == {"all", "controversial", "natural"}
    family = result.comparisons.query("subset == 'natural' and metric == 'pearson_r'")
    assert sorted(family["comparison"]) == ["model vs lower bound"] * 2 + ["model vs model"]
    assert len(result.ceilings) == 3 * 2 * 2


def test_holm_sidak_column_equals_statsmodels_on_the_raw_p_values():
    ratings, predictions = _experiment(np.random.default_rng(24), pairs=3)
    result = bootstrap_ratings(ratings, predictions, n_resamples=200, random_state=0)
    for _, family in result.comparisons.groupby(["subset", "metric"]):
        reject, adjusted, _, _ = multipletests(family["p_value"], alpha=0.05, method="holm-sidak")
        np.testing.assert_allclose(family["p_holm_sidak"], adjusted)
        np.testing.assert_array_equal(family["significant"], reject)


def test_holm_sidak_equals_the_step_down_formula():
    p = np.array([0.01, 0.04, 0.03, 0.20])
    corrected = holm_sidak(p)
    adjusted, reject = corrected.p_adjusted, corrected.reject
    # Sorted p: .01, .03, .04, .20 with m = 4: 1 - (1 - p_(j))^(m - j + 1), running maximum.
    steps = [1 - (1 - 0.01) ** 4, 1 - (1 - 0.03) ** 3, 1 - (1 - 0.04) ** 2, 0.20]
    expected = np.maximum.accumulate(steps)
    np.testing.assert_allclose(adjusted[[0, 2, 1, 3]], expected)
    np.testing.assert_array_equal(reject, [True, False, False, False])


def test_bootstrap_p_value_counts_both_tails():
    assert bootstrap_p_value(np.r_[np.full(99, 1.0), -1.0]) == pytest.approx(2 * 2 / 101)
    assert bootstrap_p_value(np.full(999, 0.5)) == pytest.approx(2 / 1000)
    assert bootstrap_p_value(np.r_[np.full(50, -1.0), np.full(50, 1.0)]) == 1.0


def test_percentile_intervals_cover_the_true_score_in_about_95_percent_of_experiments():
    """120 simulated experiments (10 participants, 4 strata x 8 stimuli x 4 categories).

    x_isk = t_sk + sd_i e_isk with sd_i drawn from {0.5, 1, 1.5}; model a = t + N(0, 1), model
    b = t + N(0, 0.5^2), both fresh per stimulus. True scores r_i = 1 / sqrt((1 + su^2)(1 + sd_i^2))
    averaged over sd_i; the leave-one-out bound's truth is the mean over sd draws of
    1 / sqrt((1 + sd_i^2)(1 + sum_{j != i} sd_j^2 / (P - 1)^2)). Coverage must lie in the central
    99.9% binomial range around 0.95 widened for the conservative two-way bootstrap: below 0.87 or
    at 100% the test fails.
    """
    rng = np.random.default_rng(25)
    sds, n_people, n_strata, per, n_cat = (0.5, 1.0, 1.5), 10, 4, 8, 4
    n_stim = n_strata * per
    true = {su: np.mean([1 / np.sqrt((1 + su**2) * (1 + s**2)) for s in sds]) for su in (1.0, 0.5)}
    strata = tuple(f"m{g} vs m{g + 1}" for g in range(n_strata) for _ in range(per))
    draws = rng.choice(sds, size=(100_000, n_people)) ** 2
    others = (draws.sum(1, keepdims=True) - draws) / (n_people - 1) ** 2
    true_lower = float(np.mean(1 / np.sqrt((1 + draws) * (1 + others))))
    hits = {"a": 0, "b": 0, "a - b": 0, "lower bound": 0}
    n_experiments = 120
    for _ in range(n_experiments):
        t = rng.normal(size=(n_stim, n_cat))
        sd = rng.choice(sds, size=n_people)[:, None, None]
        x = t[None] + sd * rng.normal(size=(n_people, n_stim, n_cat))
        y = np.stack([t + su * rng.normal(size=t.shape) for su in (1.0, 0.5)])
        ratings = RatingArray(
            x,
            tuple(map(str, range(n_people))),
            tuple(map(str, range(n_stim))),
            tuple(map(str, range(n_cat))),
            ("controversial",) * n_stim,
            strata,
        )
        predictions = ModelPredictions(y, y, ("a", "b"), ratings.stimuli, ratings.categories)
        result = bootstrap_ratings(
            ratings, predictions, n_resamples=300, subsets=("all",), random_state=rng, n_jobs=1
        )
        scores = result.scores.query("metric == 'pearson_r'").set_index("model")
        for name, su in (("a", 1.0), ("b", 0.5)):
            hits[name] += scores.loc[name, "ci_low"] <= true[su] <= scores.loc[name, "ci_high"]
        diff = result.comparisons.query("metric == 'pearson_r' and comparison == 'model vs model'")
        hits["a - b"] += diff["ci_low"].iloc[0] <= true[1.0] - true[0.5] <= diff["ci_high"].iloc[0]
        lower = result.ceilings.query("metric == 'pearson_r' and bound == 'lower'").iloc[0]
        hits["lower bound"] += lower["ci_low"] <= true_lower <= lower["ci_high"]
    for name, count in hits.items():
        coverage = count / n_experiments
        assert 0.87 <= coverage < 1.0, f"{name}: coverage {coverage:.3f}"
