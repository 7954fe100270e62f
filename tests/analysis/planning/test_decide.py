"""The planning comparisons are the report's: same resample statistics, p-values and decisions."""

from __future__ import annotations

import numpy as np
import pandas as pd

from humanlike.analysis._resampling import bootstrap_p_value, holm_sidak
from humanlike.analysis.planning.decide import decide, draw_counts, resampled_scores
from humanlike.analysis.planning.simulate import draw_subsets, simulate_ratings
from humanlike.analysis.ratings.bootstrap import bootstrap_statistics
from humanlike.analysis.ratings.data import rating_array
from humanlike.analysis.ratings.scores import participant_scores
from humanlike.analysis.ratings.simulation import simulate_rating_experiment


def _study(seed=0):
    sim = simulate_rating_experiment(n_participants=9, n_natural=8, n_per_pair=3, n_models=3,
                                     missing=0.2, repeat_share=0.0, random_state=seed)
    ratings = rating_array(sim.ratings)
    models = sorted(sim.models["model"].unique())
    frame = sim.models.set_index(["model", "stimulus", "category"])["probability"]
    y = np.stack([frame.loc[m].unstack("category").loc[list(ratings.stimuli),
                                                       list(ratings.categories)].to_numpy()
                  for m in models])
    return ratings, y


def test_resampled_scores_equal_the_report_bootstrap_statistics():
    ratings, y = _study()
    rng = np.random.default_rng(3)
    w, c = draw_counts(ratings.strata, 1, len(ratings.participants), 50, rng)
    ours = resampled_scores(ratings.values[None], y, w, c)[0]
    report = bootstrap_statistics(ratings, y, w[0], c[0], subsets=["all"], metrics=["pearson_r"])
    np.testing.assert_allclose(ours, report["all", "pearson_r"][:, : y.shape[0]], rtol=1e-10)


def test_full_sample_scores_are_the_mean_participant_r():
    ratings, y = _study(1)
    r, _ = participant_scores(ratings, y)
    ones = np.ones((1, 1, len(ratings.participants))), np.ones((1, 1, len(ratings.stimuli)))
    np.testing.assert_allclose(resampled_scores(ratings.values[None], y, *ones)[0, 0],
                               np.nanmean(r, 1), rtol=1e-12)


def test_decisions_of_a_batch_equal_one_study_at_a_time():
    """Studies decided together give each study's p-values of bootstrap_p_value + holm_sidak."""
    ratings, y = _study(2)
    x = np.stack([ratings.values, ratings.values[::-1]])
    d = decide(x, y, ratings.strata, 200, 0.05, np.random.default_rng(5))
    w, c = draw_counts(ratings.strata, 2, len(ratings.participants), 200, np.random.default_rng(5))
    for i in range(2):
        dist = resampled_scores(x[i:i + 1], y, w[i:i + 1], c[i:i + 1])[0]
        p = [bootstrap_p_value(dist[:, a] - dist[:, b]) for a, b in d.pairs]
        expected = holm_sidak(p, 0.05)
        np.testing.assert_allclose(d.p_holm_sidak[i], expected.p_adjusted)
        np.testing.assert_array_equal(d.significant[i], expected.reject)


def test_winner_needs_significance_against_every_other_model():
    from humanlike.analysis.planning.decide import Decisions

    pairs = ((0, 1), (0, 2), (1, 2))
    scores = np.array([[0.9, 0.5, 0.4], [0.9, 0.5, 0.4], [0.3, 0.5, 0.8]])
    diff = scores[:, [0, 0, 1]] - scores[:, [1, 2, 2]]
    sig = np.array([[True, True, False], [True, False, True], [False, True, True]])
    d = Decisions(scores, diff, np.zeros_like(diff), sig, pairs)
    np.testing.assert_array_equal(d.winners(), [0, -1, 2])


def test_simulated_ratings_follow_the_generating_model_and_the_draw_is_exact():
    rng = np.random.default_rng(0)
    truth = rng.uniform(0, 1, (30, 4))
    shown = draw_subsets(np.r_[np.full(10, 9.0), np.ones(20)], 12, (200, 5), rng, random_share=0.5)
    assert (shown.sum(-1) == 12).all()
    x = simulate_ratings(truth, 200, 5, 0.1, rng, shown)
    assert np.isnan(x).sum() == 200 * 5 * 18 * 4
    assert pd.Series(np.nanmean(x, (0, 1)).ravel()).corr(pd.Series(truth.ravel())) > 0.98
    # the weighted half goes mostly to the first ten stimuli (9 times the weight of the others)
    assert shown[..., :10].mean() > 2 * shown[..., 10:].mean()


def test_pilot_noise_is_the_pooled_sd_around_each_entry_mean():
    from humanlike.analysis.planning.inputs import fit_noise

    sim = simulate_rating_experiment(n_participants=6, n_natural=6, n_per_pair=2, n_models=3,
                                     missing=0.1, repeat_share=0.0, random_state=4)
    rows = sim.ratings.dropna(subset=["rating"])
    groups = rows.groupby(["stimulus", "category"])["rating"]
    squares = (rows["rating"] - groups.transform("mean")) ** 2
    dof = (groups.count() - 1).clip(lower=0).sum()
    assert abs(fit_noise(sim.ratings) - np.sqrt(squares.sum() / dof)) < 1e-12


def test_the_random_share_is_exact_in_expectation_not_rounded_down():
    """0.25 of 10 trials: 2 or 3 uniform draws, 2.5 on average (randomised rounding; round() gave
    2 every time); an integer share (0.25 of 8) is exact in every draw."""
    from humanlike.analysis.planning.simulate import draw_split

    rng = np.random.default_rng(5)
    shown, uniform = draw_split(np.ones(30), 10, (20_000,), rng, random_share=0.25)
    counts = uniform.sum(-1)
    assert (shown.sum(-1) == 10).all() and set(np.unique(counts)) == {2, 3}
    assert abs(counts.mean() - 2.5) < 4 * 0.5 / np.sqrt(20_000)  # Bernoulli(0.5) SE
    _, whole = draw_split(np.ones(30), 8, (1_000,), rng, random_share=0.25)
    assert (whole.sum(-1) == 2).all()
