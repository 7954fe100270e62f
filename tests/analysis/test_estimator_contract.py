"""MLDS and the rating calibration follow scikit-learn's estimator contract."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from humanlike.analysis.mlds import MLDS, runs_test, simulate_responses
from humanlike.analysis.ratings import RatingCalibration
from humanlike.stimuli.mlds_design import all_triads


def _triads() -> pd.DataFrame:
    levels = np.tile(all_triads(7), (6, 1))
    df = pd.DataFrame(levels, columns=["s1", "s2", "s3"])
    df["response"] = simulate_responses(levels, (np.arange(7) / 6) ** 2, 0.15, random_state=2)
    return df


def test_mlds_get_params_lists_the_constructor_parameters_and_clone_copies_them():
    est = MLDS("quadruples", method="irls", n_levels=7, random_state=5)
    assert est.get_params() == {
        "design": "quadruples",
        "method": "irls",
        "n_levels": 7,
        "random_state": 5,
    }
    copy = clone(est)
    assert copy is not est and copy.get_params() == est.get_params()


def test_mlds_init_only_stores_parameters_and_fit_validates_them():
    est = MLDS(design="pairs", method="nls")  # no error until fit
    assert est.design == "pairs" and not hasattr(est, "scale_")
    with pytest.raises(ValueError):
        est.fit(_triads())


def test_mlds_fit_returns_self_with_learned_attributes_ending_in_underscore():
    est = MLDS()
    assert est.fit(_triads()) is est
    assert est.scale_.shape == (7,) and est.sigma_ > 0 and est.converged_


def test_mlds_methods_that_need_a_fit_raise_not_fitted_error_before_fit():
    with pytest.raises(NotFittedError):
        MLDS().bootstrap(10)
    with pytest.raises(NotFittedError):
        runs_test(MLDS(), 10)


def test_mlds_bootstrap_draws_from_the_estimators_random_state():
    df = _triads()
    seeded = MLDS(random_state=11).fit(df).bootstrap(40)
    explicit = MLDS().fit(df).bootstrap(40, random_state=11)
    np.testing.assert_array_equal(seeded.sigma, explicit.sigma)
    refit = clone(MLDS(random_state=11)).fit(df).bootstrap(40)
    np.testing.assert_array_equal(refit.sigma, seeded.sigma)


def test_rating_calibration_needs_a_fit_before_transform_and_predict():
    cal = RatingCalibration()
    assert cal.get_params() == {} and clone(cal).get_params() == {}
    with pytest.raises(NotFittedError):
        cal.transform(np.zeros(3))
    with pytest.raises(NotFittedError):
        cal.predict(np.zeros(3))
    z = np.linspace(-2, 2, 9)
    ratings = np.clip(1 / (1 + np.exp(-(0.5 * z + 0.2))), 0, 1)
    assert cal.fit(z, ratings) is cal
    np.testing.assert_allclose(cal.predict(z), ratings, atol=1e-6)
