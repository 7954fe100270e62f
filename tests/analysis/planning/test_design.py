"""The adaptive sampling design and its estimates: the inclusion probabilities are exact (the
design enumerated by hand on 4 stimuli), the Horvitz-Thompson mean equals the pool mean in
expectation exactly, the draws' frequencies match, and the additive score ranks models as the mean
Pearson r does on uniformly allocated data."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from humanlike.analysis.planning.design import (
    additive_scores,
    hajek_mean,
    horvitz_thompson_mean,
    inclusion_probabilities,
    systematic_draw,
    systematic_pps,
)


def exact_design(pi: np.ndarray) -> dict[frozenset[int], float]:
    """Every sample of randomised systematic PPS with its probability: each of the S! orders
    (equally likely), and within an order the start u's interval between consecutive breakpoints
    (the fractional parts of the cumulative probabilities), each of its length."""
    s = len(pi)
    samples: dict[frozenset[int], float] = {}
    orders = list(itertools.permutations(range(s)))
    for order in orders:
        cuts = np.sort(np.unique(np.r_[0.0, np.mod(np.cumsum(pi[list(order)]), 1.0), 1.0]))
        for a, b in itertools.pairwise(cuts):
            if b - a < 1e-15:
                continue
            drawn = systematic_draw(pi, np.array(order), np.array([(a + b) / 2]))
            key = frozenset(np.flatnonzero(drawn).tolist())
            samples[key] = samples.get(key, 0.0) + (b - a) / len(orders)
    return samples


def test_the_floored_proportional_probabilities_sum_to_n_and_are_capped_at_one():
    pi = inclusion_probabilities(np.array([10.0, 1, 1, 1, 1]), 3, floor_share=0.2)
    assert pi.sum() == pytest.approx(3) and pi.max() == pytest.approx(1.0)
    assert np.all(pi >= 0.2 * 3 / 5 - 1e-12)  # the uniform share's floor, n f / S
    # the uncapped stimuli keep their proportions: (1 - f) w / W + f / S, equal here
    assert pi[1:] == pytest.approx(np.full(4, 0.5))
    with pytest.raises(ValueError, match="n: must be between"):
        inclusion_probabilities(np.ones(3), 4)


def test_the_enumerated_design_has_the_stated_inclusion_probabilities_and_an_unbiased_mean():
    pi = inclusion_probabilities(np.array([4.0, 2.0, 1.0, 1.0]), 2, floor_share=0.25)
    samples = exact_design(pi)
    assert sum(samples.values()) == pytest.approx(1.0, abs=1e-12)
    assert all(len(k) == 2 for k in samples)  # fixed size
    inclusion = np.zeros(4)
    for sample, prob in samples.items():
        inclusion[list(sample)] += prob
    np.testing.assert_allclose(inclusion, pi, atol=1e-12)
    values = np.array([0.3, -1.2, 2.5, 0.7])
    expected = 0.0
    for sample, prob in samples.items():
        drawn = np.isin(np.arange(4), list(sample))
        expected += prob * horvitz_thompson_mean(values, drawn, pi)
    assert expected == pytest.approx(values.mean(), abs=1e-12)


def test_draws_hit_each_stimulus_as_often_as_its_probability():
    rng = np.random.default_rng(0)
    pi = inclusion_probabilities(rng.gamma(1.0, size=12), 5, floor_share=0.25)
    drawn = systematic_pps(pi, rng, (40_000,))
    assert (drawn.sum(-1) == 5).all()
    se = np.sqrt(pi * (1 - pi) / 40_000)
    assert np.all(np.abs(drawn.mean(0) - pi) <= 4 * se + 1e-12)
    values = rng.normal(size=12)
    ht = horvitz_thompson_mean(values, drawn, pi)
    assert abs(ht.mean() - values.mean()) < 4 * ht.std() / np.sqrt(40_000)
    assert np.isfinite(hajek_mean(values, drawn, pi)).all()


def test_the_additive_score_ranks_models_as_the_mean_pearson_r_on_uniform_data():
    from humanlike.analysis.planning.recovery import participant_r
    from humanlike.analysis.planning.simulate import draw_subsets, simulate_ratings

    rng = np.random.default_rng(2)
    truth = rng.uniform(0.05, 0.95, (40, 4))
    models = np.stack([np.clip(truth + rng.normal(0, sd, truth.shape), 0.01, 0.99)
                       for sd in (0.02, 0.1, 0.2, 0.35)])
    shown = draw_subsets(np.ones(40), 16, (1, 60), rng)
    x = simulate_ratings(truth, 1, 60, 0.15, rng, shown)
    pi = np.full((1, 60, 40), 16 / 40)
    additive = additive_scores(x, models, pi)[0].mean(0)
    pearson = np.nanmean(participant_r(x, models)[0], axis=0)
    assert list(np.argsort(-additive)) == list(np.argsort(-pearson)) == [0, 1, 2, 3]


def test_uniform_subsample_keeps_every_stimulus_with_the_same_probability():
    from humanlike.analysis.planning.design import uniform_subsample

    rng = np.random.default_rng(11)
    pi = inclusion_probabilities(rng.gamma(0.7, size=10), 4, floor_share=0.25)
    drawn = systematic_pps(pi, rng, (60_000,))
    kept = uniform_subsample(drawn, pi, rng)
    assert not np.any(kept & ~drawn)
    share = kept.mean(0)  # each stimulus: P(drawn) P(kept | drawn) = pi_s min(pi) / pi_s
    se = np.sqrt(pi.min() * (1 - pi.min()) / len(kept))
    assert np.all(np.abs(share - pi.min()) < 4 * se), (share, pi.min())
    uniform = np.full(10, 0.4)  # a uniform draw: all of it kept
    drawn = systematic_pps(uniform, rng, (100,))
    assert np.array_equal(uniform_subsample(drawn, uniform, rng), drawn)
