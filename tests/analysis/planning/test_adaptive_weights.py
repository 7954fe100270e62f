"""Adaptive allocation weights: Neyman allocation of the undecided pairs' HT variance (the
moments of one rating's fit difference in closed form, checked by simulation; the allocation
checked against the variance it minimises)."""

from __future__ import annotations

import numpy as np

from humanlike.analysis.planning.adaptive import (
    neyman_weights,
    pair_moments,
    stimulus_noise,
    weights_hash,
)
from humanlike.analysis.planning.design import inclusion_probabilities


def _models():
    """3 models, 4 stimuli, 2 categories: stimulus 0 splits models 0 and 1, stimulus 1 splits 1
    and 2, stimuli 2 and 3 split nobody."""
    y = np.full((3, 4, 2), 0.5)
    y[0, 0], y[1, 0] = (0.9, 0.1), (0.1, 0.9)
    y[1, 1], y[2, 1] = (0.8, 0.2), (0.2, 0.8)
    return y


def test_pair_moments_match_a_simulation_of_the_fit_difference():
    rng = np.random.default_rng(3)
    y = rng.uniform(0, 1, (3, 5, 4))  # 3 models, 5 stimuli, 4 categories
    h = rng.uniform(0, 1, (5, 4))
    sigma = np.array([0.1, 0.2, 0.3, 0.2, 0.4])
    mean, second = pair_moments(y, h, sigma)
    x = h + sigma[:, None] * rng.standard_normal((200_000, 5, 4))  # no rounding: the closed form's case
    fit = -((x[:, None] - y) ** 2).mean(-1)  # (draws, M, S)
    d = np.stack([fit[:, a] - fit[:, b] for a, b in ((0, 1), (0, 2), (1, 2))], axis=1)
    se = d.std(0) / np.sqrt(len(d))
    assert np.all(np.abs(d.mean(0) - mean) < 4 * se)
    np.testing.assert_allclose((d**2).mean(0), second, rtol=0.02)


def test_neyman_weights_by_hand_and_uniform_with_nothing_undecided():
    y = _models()  # pairs (0, 1), (0, 2), (1, 2)
    h = np.full((4, 2), 0.5)  # a human at 0.5 everywhere
    sigma = 0.2
    # by hand, pair (1, 2): Var d = 4 sigma^2 sum_k delta_k^2 / K^2 = 0.04 sum_k delta_k^2 and
    # E d = mean_k delta_k (2 h_k - y1_k - y2_k). s1: delta = (0.6, -0.6), E d = 0, Var 0.0288;
    # s0: delta = (-0.4, 0.4), E d = (-0.4 * 0.4 + 0.4 * -0.4) / 2 = -0.16, Var 0.0128; else 0
    mean, second = pair_moments(y, h, sigma)
    np.testing.assert_allclose(mean[2], [-0.16, 0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(second[2], [0.0256 + 0.0128, 0.0288, 0, 0], atol=1e-12)
    only_12 = neyman_weights(y, [False, False, True], h, sigma, 2, 10)  # one pair: c cancels
    root = np.sqrt(np.array([0.0384, 0.0288]) / 0.0672)
    np.testing.assert_allclose(only_12, [*root / root.sum(), 0, 0], atol=1e-12)
    np.testing.assert_allclose(neyman_weights(y, [False, False, False], h, sigma, 2, 10), 0.25)
    # one weight row per study
    batch = neyman_weights(y, [[False, False, True], [True, True, True]], np.stack([h, h]), sigma,
                           2, np.array([10, 10]))
    np.testing.assert_allclose(batch[0], only_12)


def test_neyman_allocation_minimises_the_pairs_expected_participant_counts():
    rng = np.random.default_rng(5)
    y = rng.uniform(0, 1, (4, 12, 3))
    h = rng.uniform(0, 1, (12, 3))
    sigma = rng.uniform(0.1, 0.4, 12)
    undecided = np.array([True, False, True, True, False, True])
    mean, second = pair_moments(y, h, sigma)
    n, n_people, s = 4, 30, 12
    # each pair's participants needed ~ Var(pi) / E[Delta^2], E[Delta^2] = Delta^2 + v / N with v
    # the uniform design's variance (the docstring's c_ab)
    v = (s / n * second.sum(-1) - (mean**2).sum(-1)) / s**2
    c = 1 / (s**2 * (mean.mean(-1) ** 2 + v / n_people))
    cost = (c[:, None] * second)[undecided].sum(0)  # (S,)

    def variance(pi: np.ndarray) -> np.ndarray:  # the summed counts' pi-dependent part
        return (cost / pi).sum(-1)

    best = inclusion_probabilities(neyman_weights(y, undecided, h, sigma, n, n_people), n,
                                   floor_share=0.0)
    assert np.all(best < 1)  # no capping here: the Lagrange solution itself
    others = n * rng.dirichlet(np.ones(12), 2000)
    others = others[np.all(others < 1, axis=1)]
    assert len(others) > 100 and np.all(variance(others) >= variance(best) - 1e-12)
    near = best * np.exp(0.05 * rng.standard_normal((500, 12)))
    near = n * near / near.sum(1, keepdims=True)
    assert np.all(variance(near) >= variance(best) - 1e-12)


def test_noise_is_the_pooled_sd_per_stimulus_shrunk_towards_the_overall_sd():
    rng = np.random.default_rng(0)
    x = np.moveaxis(rng.normal(0.5, 1.0, (4000, 3, 2)) * [0.1, 0.3], 1, 2)  # (N, S=2, K=3)
    x[::2, 1] = np.nan  # half the participants did not rate stimulus 1
    # thousands of degrees of freedom per stimulus: the prior's 10 barely move the estimates
    np.testing.assert_allclose(stimulus_noise(x), [0.1, 0.3], rtol=0.05)
    # by hand: one stimulus with SD 0.1 on 2 dof (3 raters, one category), the other 0.3 on 2
    small = np.array([[[0.4], [0.2]], [[0.5], [0.5]], [[0.6], [0.8]]])  # (N=3, S=2, K=1)
    ss, pooled = np.array([0.02, 0.18]), 0.2 / 4
    np.testing.assert_allclose(stimulus_noise(small), np.sqrt((ss + 10 * pooled) / (2 + 10)))
    assert stimulus_noise(x[:1]).tolist() == [0.25, 0.25]  # one rater: the default, not 0


def test_weights_hash_is_stable_and_sensitive():
    w = np.array([0.5, 0.25, 0.25])
    assert weights_hash(["a", "b", "c"], w) == weights_hash(["a", "b", "c"], w.copy())
    assert weights_hash(["a", "b", "c"], w) != weights_hash(["a", "b", "c"], w[::-1])


def test_human_means_shrink_towards_the_models_average():
    from humanlike.analysis.planning.adaptive import human_means

    y = np.array([[[0.2]], [[0.6]]])  # 2 models, 1 stimulus, 1 category: prior 0.4, variance 0.04
    x = np.array([[[0.8]], [[0.8]], [[0.5]]])  # (N=3, S=1, K=1)
    # by hand: (2.1 / 0.25 + 0.4 * 25) / (3 / 0.25 + 25)
    np.testing.assert_allclose(human_means(x, y, 0.5), [[18.4 / 37]])
    np.testing.assert_allclose(human_means(x[:0], y, 0.5), [[0.4]])  # nobody yet: the prior
    many = np.full((10000, 1, 1), 0.9)
    np.testing.assert_allclose(human_means(many, y, 0.5), [[0.9]], atol=1e-3)
