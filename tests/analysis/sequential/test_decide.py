"""decide(): family-wise error under the null at every look, and what a decision reports."""

import numpy as np
import pytest
from scipy.stats import t as student_t

from humanlike.analysis.sequential import decide
from humanlike.analysis.sequential.closure import closed_decision_times
from humanlike.analysis.sequential.running import holm_sidak_adjust, running_t
from humanlike.analysis.sequential.simulate import score_differences, skewed_null
from humanlike.analysis.sequential.spending import obrien_fleming_boundaries

ALPHA = 0.05
STUDIES = 300
LOOKS = np.arange(4, 121)  # a look after every participant from N = 4 to 120
CEILING = ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / STUDIES)  # alpha + 3 binomial SE = 0.088


@pytest.fixture(scope="module")
def nulls():
    """300 null studies of K = 3 pairs, two bounded generators with mean-0 differences."""
    rng = np.random.default_rng(2026)
    return {"exchangeable models": score_differences(STUDIES, 120, [0.5, 0.5, 0.5], rng),
            "skewed": skewed_null(STUDIES, 120, 3, rng)}


def _family_wise(result):
    return result.decided.any(axis=-1).mean()


@pytest.mark.parametrize("generator", ["exchangeable models", "skewed"])
@pytest.mark.parametrize("method", ["betting_mixture", "betting", "safe_t"])
def test_continuous_monitoring_holds_family_wise_error_at_every_look(nulls, generator, method):
    result = decide(nulls[generator], "continuous", ALPHA, looks=LOOKS, method=method)
    assert result.statistic.shape == (STUDIES, LOOKS.size, 3)
    assert _family_wise(result) <= CEILING


@pytest.mark.parametrize("generator", ["exchangeable models", "skewed"])
def test_fixed_n_holds_its_level_at_its_one_look(nulls, generator):
    assert _family_wise(decide(nulls[generator], "fixed_n", ALPHA, looks=[120])) <= CEILING


def test_the_simulation_detects_the_inflation_of_a_fixed_n_test_repeated_at_every_look(nulls):
    # the same t-test + Holm-Sidak as fixed_n, read after every participant: far above alpha
    t, n = running_t(nulls["exchangeable models"])
    p = holm_sidak_adjust(np.where(np.isfinite(t), 2 * student_t.sf(np.abs(t), np.maximum(n - 1, 1)), 1.0))
    assert (p[:, LOOKS - 1] <= ALPHA).any(axis=(1, 2)).mean() > CEILING + 0.05


@pytest.mark.parametrize("generator", ["exchangeable models", "skewed"])
def test_group_sequential_holds_family_wise_error_over_its_declared_looks(nulls, generator):
    result = decide(nulls[generator], "group_sequential", ALPHA, looks=[24, 48, 72, 96, 120])
    assert result.critical == pytest.approx(obrien_fleming_boundaries(np.arange(1, 6) / 5, ALPHA / 3))
    assert _family_wise(result) <= CEILING


def test_a_clear_difference_is_decided_for_the_better_model_under_every_scheme():
    d = score_differences(1, 200, [0.6, 0.3, 0.3], np.random.default_rng(5))[0]  # pairs 01, 02, 12
    for scheme, looks in (("continuous", None), ("fixed_n", None), ("group_sequential", [50, 100, 150, 200])):
        result = decide(d, scheme, ALPHA, looks=looks)
        assert result.decided[:2].all() and (result.direction[:2] == 1).all(), scheme
        assert result.decided_at[:2].max() <= 200
    continuous = decide(d)
    assert not continuous.met() or continuous.decided[2]
    at = continuous.decided_look[0]
    first_step = np.argmax(continuous.statistic[:, 0] >= 3 / ALPHA)  # alone, pair 0 needs K/alpha
    assert continuous.statistic[at, 0] >= 1 / ALPHA and at <= first_step
    assert continuous.decided_at[0] == continuous.looks[at]


def test_closed_testing_lowers_a_pairs_threshold_only_as_other_pairs_are_decided():
    inf = np.inf
    # first look at which each pair (columns) crosses its alpha/s test, rows s = 1, 2, 3
    # pair 1 clears alpha/3 at look 2; pair 0 clears alpha at 5 and alpha/2 at 7; pair 2 never
    first = np.array([[[5, 1, inf], [7, 2, inf], [inf, 2, inf]]])
    assert closed_decision_times(first).tolist() == [[7, 2, inf]]  # pair 0 waits for alpha/2
    alone = np.array([[[2, inf, inf], [3, inf, inf], [4, inf, inf]]])
    assert closed_decision_times(alone).tolist() == [[4, inf, inf]]  # Bonferroni's first step


def test_the_confidence_sequence_holds_the_running_mean_shrinks_and_agrees_with_the_decision():
    d = score_differences(1, 150, [0.6, 0.4], np.random.default_rng(6))[0]
    result = decide(d)
    assert np.all(result.lower <= result.estimate) and np.all(result.estimate <= result.upper)
    width = result.upper - result.lower
    assert np.all(np.diff(width, axis=0) <= 1e-12) and width[-1, 0] < 0.5 * width[9, 0]
    excludes_zero = result.lower[:, 0] > 0  # the CS at level alpha/K leaves 0 behind ...
    assert excludes_zero[-1] and result.decided[0] and result.direction[0] == 1
    assert result.decided_look[0] <= np.argmax(excludes_zero)  # ... never before the e-value crossed


def test_the_guarantee_names_the_scheme_and_the_level():
    d = np.zeros((20, 2))
    assert decide(d).guarantee.startswith("family-wise error <= 0.05 at any number of looks")
    assert "one declared look N = 20" in decide(d, "fixed_n").guarantee
    assert "2 declared looks" in decide(d, "group_sequential", looks=[10, 20]).guarantee


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"scheme": "sometimes"}, "monitoring"), ({"alpha": 1.5}, "alpha"),
    ({"scheme": "fixed_n", "looks": [10, 20]}, "looks"), ({"looks": [30]}, "looks"),
    ({"scheme": "group_sequential"}, "looks"), ({"method": "bayes"}, "method"),
])
def test_bad_arguments_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        decide(np.zeros((20, 2)), **kwargs)


def test_differences_outside_the_bound_are_refused():
    with pytest.raises(ValueError, match="differences"):
        decide(np.full((5, 1), 2.5))


@pytest.mark.parametrize(("method", "studies", "n"), [("betting", STUDIES, 120),
                                                      ("betting_mixture", 100, 60)])
def test_the_confidence_sequence_covers_the_true_mean_at_every_look_at_once(method, studies, n):
    # a skewed difference with known mean 0.1: 2 (Beta(2, 6) - 1/4) + 0.1, within [-0.4, 1.6]
    # (the mixture's sequence costs its 16 nodes per grid point: fewer, shorter studies)
    d = skewed_null(studies, n, 1, np.random.default_rng(7)) + 0.1
    result = decide(d, bounds=True, method=method)
    missed = ((result.lower > 0.1) | (result.upper < 0.1)).any(axis=(1, 2))
    assert missed.mean() <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / studies)
    assert np.median(result.upper[:, -1, 0] - result.lower[:, -1, 0]) < 0.4 * np.sqrt(120 / n)
