"""Six-point test and runs test of MLDS fits, against the R package's published results."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import special

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.mlds.diagnostics import runs_test, six_point_conditions, six_point_test
from humanlike.analysis.mlds.estimator import MLDS
from humanlike.analysis.mlds.simulate import simulate_responses
from humanlike.stimuli.mlds_design import quadruple_design


@pytest.fixture(scope="module")
def kk() -> MLDS:
    df = pd.read_csv(shared_data_dir() / "mlds" / "data_kk_all_swapped.csv")
    return MLDS("quadruples").fit(df)


def test_kk_six_point_likelihood_matches_the_published_value(kk):
    """Knoblauch & Maloney (2008): ``simu.6pt(kk.mlds, 10000)`` gives lik6pt = -425, p = 0.848."""
    result = six_point_test(kk, 1000, random_state=0)
    assert result.n_conditions == 462  # C(11, 6): a < b < c < a' < b' < c'
    assert round(result.loglik) == -425
    assert result.loglik_p_value == pytest.approx(0.848, abs=0.04)
    assert result.p_value > 0.05  # no excess of six-point violations either
    assert 0 < result.n_violations < result.n_applicable <= result.n_conditions


def test_kk_runs_test_matches_the_published_number_of_runs_and_p_value(kk):
    """Knoblauch & Maloney (2008): ``binom.diagnostics(kk.mlds, 10000)`` gives ObsRuns = 173
    sign changes (174 runs) and p = 0.0159 for the probit link."""
    result = runs_test(kk, 4000, random_state=0)
    assert result.n_runs == 174
    assert result.p_value == pytest.approx(0.0159, abs=0.006)


def _curve_observer(seed: int, additive: bool, sigma: float) -> MLDS:
    """Quadruple judgements (noise ``sigma``) of chordal distances between points on a plane
    curve: 10 levels, 5 replications of the 210 quadruples. ``additive``: the points lie on a
    line, a difference scale. Otherwise levels 1-5 curl with 1.2 rad turns and unit steps and
    levels 6-10 run straight with 0.9 steps, so two short intervals can each beat their partners
    while their union loses: six-point violations (chords on a curve of varying curvature, as in
    Knoblauch & Maloney 2008, "The six-point test")."""
    rng = np.random.default_rng(seed)
    turn = np.r_[0.0, np.full(4, 0.0 if additive else 1.2), np.zeros(5)]
    steps = np.r_[0.0, np.ones(4), np.full(5, 0.9)]
    angle = np.cumsum(turn)
    points = np.cumsum(np.column_stack([steps * np.cos(angle), steps * np.sin(angle)]), axis=0)
    points /= np.linalg.norm(points[-1] - points[0])
    trials = quadruple_design(10, replications=5, rng=rng)
    q = trials[["s1", "s2", "s3", "s4"]].to_numpy() - 1
    delta = (np.linalg.norm(points[q[:, 3]] - points[q[:, 2]], axis=1)
             - np.linalg.norm(points[q[:, 1]] - points[q[:, 0]], axis=1))
    trials["response"] = (rng.random(len(trials)) < special.ndtr(delta / sigma)).astype(int)
    return MLDS("quadruples").fit(trials)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_six_point_test_rejects_an_observer_that_violates_additivity(seed):
    model = _curve_observer(seed, additive=False, sigma=0.01)
    result = six_point_test(model, 300, random_state=seed)
    assert result.p_value < 0.05


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_six_point_test_passes_an_observer_with_a_difference_scale(seed):
    model = _curve_observer(seed, additive=True, sigma=0.05)
    result = six_point_test(model, 300, random_state=seed)
    assert result.p_value > 0.05


def test_six_point_test_passes_a_simulated_mlds_observer():
    rng = np.random.default_rng(4)
    trials = quadruple_design(9, replications=3, rng=rng)
    psi = (np.arange(9) / 8) ** 1.7
    trials["response"] = simulate_responses(trials[["s1", "s2", "s3", "s4"]].to_numpy(), psi,
                                            0.08, design="quadruples", random_state=rng)
    assert six_point_test(MLDS("quadruples").fit(trials), 300, random_state=5).p_value > 0.05


def test_six_point_conditions_use_the_first_presentation_of_each_quadruple(kk):
    cond = six_point_conditions(kk)
    data = kk.data_[["S1", "S2", "S3", "S4"]].to_numpy()
    a, b, e = data[cond[:, 0]], data[cond[:, 1]], data[cond[:, 2]]
    np.testing.assert_array_equal(a[:, 1], b[:, 0])  # (a, b; a', b') and (b, c; b', c')
    np.testing.assert_array_equal(e[:, [0, 2]], a[:, [0, 2]])  # (a, c; a', c')
    np.testing.assert_array_equal(e[:, [1, 3]], b[:, [1, 3]])
    assert (cond < 330).all()  # kk repeats the 330 quadruples; the first run comes first


def test_six_point_test_needs_quadruples():
    tri = pd.read_csv(shared_data_dir() / "mlds" / "data_kktriad.csv")
    with pytest.raises(ValueError, match="quadruple"):
        six_point_test(MLDS("triads").fit(tri), 10)
