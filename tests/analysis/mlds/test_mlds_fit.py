"""MLDS scale fits on the R package's own data sets, checked against independent routes.

Published numbers: Knoblauch & Maloney (2008, J. Stat. Softw. 25(2); MLDS vignette), data set
``kk`` = SwapOrder(rbind(kk1, kk2, kk3)) (990 trials): sigma from ``optim`` 0.175 and
1 / max(glm scale) = 0.179, AIC (probit) 633, deviance accounted for (probit) 0.55.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.mlds.data import design_matrix
from humanlike.analysis.mlds.estimator import MLDS

QUADRUPLE_SETS = ["kk1", "kk2", "kk3", "kk_all_swapped", "AutumnLab"]


def load(name: str) -> pd.DataFrame:
    return pd.read_csv(shared_data_dir() / "mlds" / f"data_{name}.csv")


def design_of(name: str) -> str:
    return "triads" if name == "kktriad" else "quadruples"


def test_kk_scale_matches_published_sigma_aic_and_deviance_accounted_for():
    fit = MLDS("quadruples").fit(load("kk_all_swapped"))
    assert fit.n_trials_ == 990
    assert fit.sigma_ == pytest.approx(0.179, abs=0.0005)  # 1 / max(glm scale), vignette
    assert round(fit.aic_) == 633  # Table "Goodness of fit", probit
    assert round(fit.daf_, 2) == 0.55
    assert fit.scale_[0] == 0.0 and fit.scale_std_[-1] == pytest.approx(1.0)


def test_direct_likelihood_maximisation_gives_the_published_optim_sigma_region():
    # R's optim constrains the scale to [0, 1] and reports 0.175; unconstrained it is the MLE
    fit = MLDS("quadruples", method="optim").fit(load("kk_all_swapped"))
    assert 0.174 < fit.sigma_ < 0.180


@pytest.mark.parametrize("name", [*QUADRUPLE_SETS, "kktriad"])
def test_glm_and_direct_likelihood_maximisation_agree_to_1e6(name):
    glm = MLDS(design_of(name), method="glm").fit(load(name))
    optim = MLDS(design_of(name), method="optim").fit(load(name))
    assert glm.converged_ and optim.converged_
    np.testing.assert_allclose(optim.scale_, glm.scale_, atol=1e-6)
    assert optim.loglik_ == pytest.approx(glm.loglik_, abs=1e-9)


@pytest.mark.parametrize("name", [*QUADRUPLE_SETS, "kktriad"])
def test_fit_equals_statsmodels_probit_glm_on_the_raw_trials(name):
    """Independent route: one Bernoulli row per trial, design built here from the README rules."""
    df = load(name)
    k = 3 if name == "kktriad" else 4
    levels = df[[f"S{j + 1}" for j in range(k)]].to_numpy()
    resp = df["resp"].to_numpy()
    if k == 3:  # README: rows with S1 > S3 are reversed with resp -> 1 - resp
        flip = levels[:, 0] > levels[:, 2]
        levels[flip] = levels[flip][:, ::-1]
    else:  # README: rows with S1 > S4 have their pairs swapped with resp -> 1 - resp
        flip = levels[:, 0] > levels[:, 3]
        levels[flip] = levels[flip][:, [2, 3, 0, 1]]
    resp = np.where(flip, 1 - resp, resp)
    X = design_matrix(levels, int(levels.max()), design_of(name))
    ref = sm.GLM(resp, X, family=sm.families.Binomial(sm.families.links.Probit())).fit(
        tol=1e-12, tol_criterion="params")
    fit = MLDS(design_of(name), method="irls").fit(df)
    np.testing.assert_allclose(fit.scale_[1:], ref.params, atol=1e-7)
    np.testing.assert_allclose(fit.se_[1:], ref.bse, rtol=1e-5)
    assert fit.loglik_ == pytest.approx(ref.llf, abs=1e-7)
    np.testing.assert_allclose(fit.fitted_, ref.fittedvalues, atol=1e-8)


def test_r_layout_and_tidy_layout_give_the_same_scale():
    r_layout = load("kktriad")
    tidy = r_layout.rename(columns={"resp": "response", "S1": "s1", "S2": "s2", "S3": "s3"})
    a = MLDS("triads").fit(r_layout)
    b = MLDS("triads").fit(tidy.drop(columns="invord"))
    np.testing.assert_allclose(a.scale_, b.scale_, atol=1e-12)


def test_swapping_display_order_leaves_the_fit_unchanged():
    df = load("kk1")  # raw display order: pairs swapped on invord rows
    swapped = df.copy()
    swap = np.arange(len(df)) % 3 == 0
    swapped.loc[swap, ["S1", "S2", "S3", "S4"]] = df.loc[swap, ["S3", "S4", "S1", "S2"]].to_numpy()
    swapped.loc[swap, "resp"] = 1 - df.loc[swap, "resp"]
    a, b = MLDS("quadruples").fit(df), MLDS("quadruples").fit(swapped)
    np.testing.assert_allclose(a.scale_, b.scale_, atol=1e-10)
    assert a.loglik_ == pytest.approx(b.loglik_, abs=1e-10)


def test_triads_in_descending_order_are_reversed_with_inverted_response():
    tri = load("kktriad")
    assert (tri["S1"] > tri["S3"]).any()
    fit = MLDS("triads").fit(tri)
    data = fit.data_
    assert (data["S1"] < data["S2"]).all() and (data["S2"] < data["S3"]).all()
    flipped = (tri["S1"] > tri["S3"]).to_numpy()
    np.testing.assert_array_equal(data["resp"].to_numpy()[flipped], 1 - tri["resp"][flipped])


def test_fitted_probabilities_and_standard_scale_are_consistent():
    fit = MLDS("quadruples").fit(load("AutumnLab"))
    assert fit.scale_std_ == pytest.approx(fit.scale_ / fit.scale_[-1])
    assert fit.sigma_ == pytest.approx(1 / fit.scale_[-1])
    y = fit.data_["resp"].to_numpy()
    assert fit.loglik_ == pytest.approx(
        np.sum(y * np.log(fit.fitted_) + (1 - y) * np.log1p(-fit.fitted_)))


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"resp": [1], "S1": [1], "S2": [2]}), "S3"),
        (pd.DataFrame({"x": [1]}), "response, s1, s2, s3"),
        (pd.DataFrame({"resp": [2, 0], "S1": [1, 1], "S2": [2, 2], "S3": [3, 3]}), "'resp'"),
        (pd.DataFrame({"resp": [1], "S1": [0], "S2": [2], "S3": [3]}), "'S1'"),
        (pd.DataFrame({"resp": [1], "S1": [1], "S2": [3], "S3": [2]}), "middle"),
        (pd.DataFrame({"resp": [1], "S1": [1], "S2": [2], "S3": [3], "S4": [4]}), "quadruples"),
    ],
)
def test_bad_trial_frames_raise_value_errors_naming_the_problem(frame, message):
    with pytest.raises(ValueError, match=message):
        MLDS("triads").fit(frame)


def test_several_sequences_are_refused_by_the_single_scale_estimator():
    df = pd.DataFrame({"sequence": ["a", "b", "a"], "s1": [1, 1, 2], "s2": [2, 2, 3],
                       "s3": [3, 3, 4], "response": [1, 0, 1]})
    with pytest.raises(ValueError, match="fit_many"):
        MLDS().fit(df)


def test_a_level_that_never_occurs_is_reported_as_unidentified():
    df = pd.DataFrame({"s1": [1, 1, 2], "s2": [2, 2, 3], "s3": [3, 3, 5], "response": [1, 0, 1]})
    with pytest.raises(ValueError, match=r"level\(s\) \[4\]"):
        MLDS().fit(df)


def test_unknown_method_and_design_are_rejected():
    with pytest.raises(ValueError, match="method"):
        MLDS(method="nls").fit(load("kktriad"))
    with pytest.raises(ValueError, match="design"):
        MLDS(design="pairs").fit(load("kktriad"))
