"""Model scores: per-participant r and MSE, a model equal to the truth vs the bounds, calibration."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from humanlike.analysis.ratings.calibration import RatingCalibration
from humanlike.analysis.ratings.ceilings import noise_ceiling
from humanlike.analysis.ratings.data import RatingArray
from humanlike.analysis.ratings.scores import (
    ModelPredictions,
    model_predictions,
    model_scores,
    participant_scores,
)


def _array(values: np.ndarray) -> RatingArray:
    n_people, n_stimuli, n_cat = values.shape
    return RatingArray(
        values=values,
        participants=tuple(f"p{i}" for i in range(n_people)),
        stimuli=tuple(f"s{j:03d}" for j in range(n_stimuli)),
        categories=tuple(str(k) for k in range(n_cat)),
        kinds=("natural",) * n_stimuli,
        strata=("natural",) * n_stimuli,
    )


def _predictions(ratings: RatingArray, probabilities: np.ndarray, names) -> ModelPredictions:
    return ModelPredictions(
        probabilities, probabilities, tuple(names), ratings.stimuli, ratings.categories
    )


@pytest.fixture(scope="module")
def synthetic():
    """20 participants = true pattern + N(0, 1) noise on 300 stimuli x 10 categories."""
    rng = np.random.default_rng(10)
    truth = rng.normal(size=(300, 10))
    x = truth[None] + rng.normal(size=(20, 300, 10))
    noise_model = rng.normal(size=(300, 10))
    return _array(x), truth, noise_model


def test_model_equal_to_the_true_pattern_scores_between_the_bounds(synthetic):
    ratings, truth, noise_model = synthetic
    ceiling = noise_ceiling(ratings)
    scores = model_scores(ratings, _predictions(ratings, np.stack([truth, noise_model]), "tn"))
    true_r = scores.table.set_index("model").loc["t", "pearson_r"]
    var_t = truth.var()
    assert ceiling.lower < true_r < ceiling.upper
    assert true_r == pytest.approx(np.sqrt(var_t / (var_t + 1.0)), abs=0.008)


def test_noise_only_model_scores_about_zero(synthetic):
    ratings, _, noise_model = synthetic
    scores = model_scores(ratings, _predictions(ratings, noise_model[None], "n"))
    # SD of r between two independent 3,000-entry vectors is 1 / sqrt(3000) = 0.018.
    assert abs(scores.table["pearson_r"].iloc[0]) < 0.06


def test_scores_equal_numpy_corrcoef_and_mse_over_each_participants_rated_entries():
    rng = np.random.default_rng(11)
    x = rng.choice([0, 0.25, 0.5, 0.75, 1.0], size=(4, 15, 3))
    x[rng.random(x.shape) < 0.2] = np.nan
    y = rng.random((2, 15, 3))
    r, mse = participant_scores(x, y)
    for m in range(2):
        for i in range(4):
            seen = np.isfinite(x[i])
            assert r[m, i] == pytest.approx(np.corrcoef(x[i][seen], y[m][seen])[0, 1], abs=1e-12)
            assert mse[m, i] == pytest.approx(np.mean((x[i][seen] - y[m][seen]) ** 2), abs=1e-12)


def test_calibration_recovers_a_known_slope_and_intercept():
    rng = np.random.default_rng(12)
    z = rng.normal(scale=2.0, size=(1, 4000))
    ratings = rng.binomial(4, expit(1.5 * z - 0.7), size=(25, 4000)) / 4.0
    fit = RatingCalibration().fit(z, ratings)
    assert fit.slope_ == pytest.approx(1.5, abs=0.03)
    assert fit.intercept_ == pytest.approx(-0.7, abs=0.03)


def test_calibration_minimises_the_cross_entropy_to_the_ratings():
    rng = np.random.default_rng(13)
    z = rng.normal(size=(1, 200))
    ratings = rng.choice([0, 0.25, 0.5, 0.75, 1.0], size=(6, 200))
    ratings[rng.random(ratings.shape) < 0.1] = np.nan
    seen = np.isfinite(ratings)
    zz = np.broadcast_to(z, ratings.shape)[seen]
    xx = ratings[seen]

    def cross_entropy(theta):
        p = np.clip(expit(theta[0] * zz + theta[1]), 1e-12, 1 - 1e-12)
        return -np.mean(xx * np.log(p) + (1 - xx) * np.log(1 - p))

    direct = minimize(cross_entropy, [1.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-8})
    fit = RatingCalibration().fit(z, ratings)
    assert [fit.slope_, fit.intercept_] == pytest.approx(direct.x, abs=1e-4)
    assert fit.cross_entropy_ == pytest.approx(direct.fun, abs=1e-8)


def test_calibrated_scores_report_the_fitted_parameters(synthetic):
    ratings, truth, _ = synthetic
    probabilities = expit(truth)[None]
    predictions = _predictions(ratings, probabilities, "t")
    scores = model_scores(ratings, predictions, calibrate=True)
    assert list(scores.calibration.columns) == ["model", "slope", "intercept", "cross_entropy"]
    plain = model_scores(ratings, predictions).table["mse"].iloc[0]
    assert scores.table["mse"].iloc[0] <= plain  # the identity map is one of the candidates


def test_model_predictions_follow_the_rating_arrays_stimuli_and_use_the_logit_column():
    ratings = _array(np.zeros((2, 2, 2)))
    frame = pd.DataFrame(
        {
            "model": "m",
            "stimulus": ["s001", "s001", "s000", "s000"],
            "category": ["0", "1", "0", "1"],
            "probability": [0.1, 0.2, 0.3, 0.4],
            "logit": [-1.0, -2.0, -3.0, -4.0],
        }
    )
    pred = model_predictions(frame, ratings)
    np.testing.assert_allclose(pred.probabilities[0], [[0.3, 0.4], [0.1, 0.2]])
    np.testing.assert_allclose(pred.logits[0], [[-3.0, -4.0], [-1.0, -2.0]])


def test_missing_model_probabilities_raise_a_clear_error():
    ratings = _array(np.zeros((2, 2, 2)))
    frame = pd.DataFrame(
        {"model": "m", "stimulus": "s000", "category": ["0", "1"], "probability": [0.5, 0.5]}
    )
    with pytest.raises(ValueError, match="stimulus 's001'"):
        model_predictions(frame, ratings)


def test_probabilities_outside_zero_one_are_rejected():
    frame = pd.DataFrame({"model": "m", "stimulus": "a", "category": "0", "probability": [1.5]})
    with pytest.raises(ValueError, match="'probability'"):
        model_predictions(frame, _array(np.zeros((2, 1, 1))))
