"""Each authenticity signal against a value computed by hand on a small case."""

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.authenticity import model_agreement, repeats, stimulus_dependence, timing


def _trials(participant, responses, categories, rts=None, conditions=None):
    n = len(responses)
    frame = pd.DataFrame({"participant": participant, "trial_index": range(n),
                          "stimulus": [f"s{i}" for i in range(n)], "response": responses,
                          "category": categories,
                          "rt_ms": rts if rts is not None else np.linspace(500, 900, n)})
    frame["correct"] = frame["response"] == frame["category"]
    if conditions is not None:
        frame["condition"] = conditions
    return frame


def test_response_truth_kappa_by_hand():
    # 20 trials, classes a/b half each; answers right on 16 (8 a->a, 8 b->b), 2 a->b, 2 b->a
    cats = ["a"] * 10 + ["b"] * 10
    resp = ["a"] * 8 + ["b"] * 2 + ["b"] * 8 + ["a"] * 2
    out = stimulus_dependence.response_truth_kappa(_trials("p", resp, cats))
    # p_o 0.8, f = g = (0.5, 0.5): p_e 0.5, kappa 0.6
    assert out.loc["p", "stimulus_kappa"] == pytest.approx(0.6)
    # var0 = (0.5 + 0.25 - 2 * 0.25 * 1.0) / (20 * 0.25) = 0.05
    assert out.loc["p", "stimulus_z"] == pytest.approx(0.6 / np.sqrt(0.05))


def test_a_fixed_key_has_kappa_zero_and_no_evidence():
    cats = ["a", "b", "c", "d"] * 6
    out = stimulus_dependence.response_truth_kappa(_trials("lazy", ["a"] * 24, cats))
    assert out.loc["lazy", "stimulus_kappa"] == pytest.approx(0.0)
    assert out.loc["lazy", "stimulus_z"] == 0.0


def test_too_few_known_trials_are_not_measured():
    out = stimulus_dependence.response_truth_kappa(_trials("p", ["a"] * 5, ["a"] * 5))
    assert np.isnan(out.loc["p", "stimulus_z"])


def test_difficulty_slope_by_hand():
    # levels 1, 2, 3 (condition names c1..c3), 10 trials each, accuracy 0.2, 0.5, 0.8
    correct = [1] * 2 + [0] * 8 + [1] * 5 + [0] * 5 + [1] * 8 + [0] * 2
    frame = pd.DataFrame({"participant": "p", "correct": np.array(correct, bool),
                          "condition": ["c1"] * 10 + ["c2"] * 10 + ["c3"] * 10})
    out = stimulus_dependence.difficulty_slope(frame)
    x = (np.repeat([1.0, 2.0, 3.0], 10) - 2.0) / np.std(np.repeat([1.0, 2.0, 3.0], 10), ddof=1)
    slope = (x * np.array(correct)).sum() / (x ** 2).sum()
    se = np.sqrt(0.5 * 0.5 / (x ** 2).sum())
    assert out.loc["p", "difficulty_slope"] == pytest.approx(slope)
    assert out.loc["p", "difficulty_z"] == pytest.approx(slope / se)


def test_rt_shape_by_hand():
    rts = np.array([400.0, 500, 600, 700, 1200] * 4 + [50.0])  # 21 timed trials, one anticipation
    out = timing.rt_shape(_trials("p", ["a"] * 21, ["a"] * 21, rts=rts))
    mean, sd = rts.mean(), rts.std(ddof=1)
    assert out.loc["p", "rt_cv"] == pytest.approx(sd / mean)
    assert out.loc["p", "anticipation_share"] == pytest.approx(1 / 21)
    skew = pd.Series(rts).skew()
    tau = sd * (min(skew, 2) / 2) ** (1 / 3)
    assert out.loc["p", "exg_tau_ms"] == pytest.approx(tau)
    assert out.loc["p", "exg_mu_ms"] == pytest.approx(mean - tau)
    assert out.loc["p", "exg_sigma_ms"] == pytest.approx(np.sqrt(sd ** 2 - tau ** 2))


def test_ex_gaussian_moments_invert_the_ex_gaussian_moments():
    # mu 500, sigma 50, tau 150: mean mu + tau, variance sigma^2 + tau^2,
    # skewness 2 tau^3 / (sigma^2 + tau^2)^1.5 (Heathcote 1996)
    var = 50.0 ** 2 + 150.0 ** 2
    mu, sigma, tau = timing.ex_gaussian_moments(np.array([650.0]), np.array([np.sqrt(var)]),
                                                np.array([2 * 150.0 ** 3 / var ** 1.5]))
    assert (mu[0], sigma[0], tau[0]) == pytest.approx((500, 50, 150))


def test_repeat_consistency_by_hand():
    frame = pd.DataFrame({"participant": "p", "trial_index": range(6),
                          "stimulus": ["x", "y", "x", "y", "x", "z"],
                          "response": ["a", "b", "a", "c", "b", "a"]})
    out = repeats.repeat_consistency(frame)
    # repeats: x (a == a), y (c != b), x (b != a): 1 of 3
    assert out.loc["p", "n_repeats"] == 3
    assert out.loc["p", "repeat_agreement"] == pytest.approx(1 / 3)


def _pair(n_both, n_first_only, n_second_only, n_neither):
    first = [True] * n_both + [True] * n_first_only + [False] * (n_second_only + n_neither)
    second = [True] * n_both + [False] * n_first_only + [True] * n_second_only + [False] * n_neither
    return np.array(first), np.array(second)


def test_model_kappa_its_test_and_the_best_model_by_hand():
    mine, model = _pair(40, 10, 20, 30)  # kappa 0.4 (tests/analysis/authenticity/test_kappa.py)
    n = len(mine)
    cats = np.array(["a"] * n)
    trials = pd.DataFrame({"participant": "p", "trial_index": range(n),
                           "stimulus": [f"s{i}" for i in range(n)], "category": cats,
                           "response": np.where(mine, "a", "b"), "rt_ms": 600.0})
    trials["correct"] = mine
    models = pd.concat([
        pd.DataFrame({"model": "m1", "stimulus": trials["stimulus"], "response": np.where(model, "a", "b")}),
        pd.DataFrame({"model": "m2", "stimulus": trials["stimulus"], "response": trials["response"]}),
    ])
    out = model_agreement.model_agreement(trials, models, reference=0.3)
    # m2 answers exactly as p does: kappa 1 beats m1's 0.4; its z uses the variance at the table
    # with margins (0.5, 0.5) and kappa 0.3: both-correct share (0.65 - 1 + 0.5 + 0.5) / 2 = 0.325
    from humanlike.analysis.authenticity.kappa import kappa_2x2

    assert out.loc["p", "ec_model"] == "m2" and out.loc["p", "ec_model_kappa"] == 1.0
    _, var_m2 = kappa_2x2([32.5], [50], [50], [100])
    assert out.loc["p", "ec_model_z"] == pytest.approx(0.7 / np.sqrt(var_m2[0]))
    only_m1 = model_agreement.model_agreement(trials, models[models["model"] == "m1"], reference=0.3)
    # the score test's variance: at the table with these margins (0.5, 0.6) whose kappa is 0.3:
    # p_e 0.5, p_o 0.5 + 0.3 * 0.5 = 0.65, both-correct share (0.65 - 1 + 0.5 + 0.6) / 2 = 0.375
    _, var = kappa_2x2([37.5], [50], [60], [100])
    z = (0.4 - 0.3) / np.sqrt(var[0])
    assert only_m1.loc["p", "ec_model_kappa"] == pytest.approx(0.4)
    assert only_m1.loc["p", "ec_model_z"] == pytest.approx(z)
    from scipy import stats

    assert only_m1.loc["p", "ec_model_p"] == pytest.approx(stats.norm.sf(z))


def test_model_kappa_averages_conditions_weighted_by_trials():
    # condition A: 100 trials with kappa 0.4; condition B: 50 trials identical answers (kappa 1)
    a_mine, a_model = _pair(40, 10, 20, 30)
    b_mine = np.array([True] * 30 + [False] * 20)
    mine, model = np.r_[a_mine, b_mine], np.r_[a_model, b_mine]
    n = len(mine)
    trials = pd.DataFrame({"participant": "p", "trial_index": range(n),
                           "stimulus": [f"s{i}" for i in range(n)], "category": "a",
                           "response": np.where(mine, "a", "b"), "rt_ms": 600.0,
                           "condition": ["A"] * 100 + ["B"] * 50})
    trials["correct"] = mine
    models = pd.DataFrame({"model": "m", "stimulus": trials["stimulus"],
                           "response": np.where(model, "a", "b")})
    out = model_agreement.model_agreement(trials, models, reference=0.4)
    assert out.loc["p", "ec_model_kappa"] == pytest.approx((100 * 0.4 + 50 * 1.0) / 150)


def test_human_agreement_is_the_pairwise_kappa():
    a, b = _pair(40, 10, 20, 30)
    c = a.copy()
    n = len(a)
    rows = []
    for name, correct in (("p1", a), ("p2", b), ("p3", c)):
        rows.append(pd.DataFrame({"participant": name, "trial_index": range(n),
                                  "stimulus": [f"s{i}" for i in range(n)], "category": "a",
                                  "response": np.where(correct, "a", "b"), "correct": correct}))
    out = model_agreement.human_agreement(pd.concat(rows))
    # p1-p2 0.4, p1-p3 1, p2-p3 0.4
    assert out.loc["p1", "ec_human_max"] == pytest.approx(1.0)
    assert out.loc["p1", "ec_human_mean"] == pytest.approx(0.7)
    assert out.loc["p2", "ec_human_max"] == pytest.approx(0.4)


def test_numeric_levels_read_the_number_in_each_condition_name():
    levels = stimulus_dependence.numeric_levels(pd.Series(["c30", "c05", None, "natural", "0.2", "c30"]))
    assert levels.tolist()[:2] == [30.0, 5.0] and levels.tolist()[4:] == [0.2, 30.0]
    assert np.isnan(levels.iloc[2]) and np.isnan(levels.iloc[3])
    assert stimulus_dependence.numeric_levels(pd.Series([np.nan, np.nan])).isna().all()
