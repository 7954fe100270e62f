"""Adaptive allocation weights: the undecided pairs' disagreement over the human noise."""

from __future__ import annotations

import numpy as np

from humanlike.analysis.planning.adaptive import (
    allocation_weights,
    disagreement,
    stimulus_noise,
    weights_hash,
)


def _models():
    """3 models, 4 stimuli, 2 categories: stimulus 0 splits models 0 and 1, stimulus 1 splits 1
    and 2, stimuli 2 and 3 split nobody."""
    y = np.full((3, 4, 2), 0.5)
    y[0, 0], y[1, 0] = (0.9, 0.1), (0.1, 0.9)
    y[1, 1], y[2, 1] = (0.8, 0.2), (0.2, 0.8)
    return y


def test_weights_follow_the_undecided_pairs_disagreement():
    y = _models()
    # pairs in order (0, 1), (0, 2), (1, 2); by hand: D_01(s0) = 0.64, D_02(s0) = 0.16,
    # D_12(s0) = 0.16, D_12(s1) = 0.36, D_01(s1) = D_02(s1) = 0.09
    np.testing.assert_allclose(disagreement(y)[:, :2], [[0.64, 0.09], [0.16, 0.09], [0.16, 0.36]])
    only_12 = allocation_weights(y, np.array([False, False, True]), 0.2)
    np.testing.assert_allclose(only_12, [0.16 / 0.52, 0.36 / 0.52, 0, 0])
    only_01 = allocation_weights(y, np.array([True, False, False]), 0.2)
    assert only_01[0] > only_01[1] > 0 and only_01[2] == 0


def test_noisier_stimuli_weigh_less_and_nothing_undecided_is_uniform():
    y = _models()
    w = allocation_weights(y, np.array([True, True, True]), np.array([0.1, 0.2, 0.2, 0.2]))
    info = disagreement(y).sum(0) / np.array([0.01, 0.04, 0.04, 0.04])
    np.testing.assert_allclose(w, info / info.sum())
    np.testing.assert_allclose(allocation_weights(y, np.zeros(3, bool), 0.2), 0.25)
    # a batch of studies at once: one weight row per study
    batch = allocation_weights(y, np.array([[False, False, True], [True, False, False]]), 0.2)
    np.testing.assert_allclose(batch[0], allocation_weights(y, np.array([0, 0, 1], bool), 0.2))


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


def test_discrimination_weights_follow_the_side_the_comparison_leans_to():
    from humanlike.analysis.planning.adaptive import discrimination_weights

    # 2 models, 3 stimuli, 2 categories: s0 a = (1, 0), b = (0, 1); s1 the reverse; s2 both equal
    y = np.array([[[1, 0], [0, 1], [0.5, 0.5]], [[0, 1], [1, 0], [0.5, 0.5]]], dtype=float)
    human = np.array([[1, 0], [1, 0], [0.5, 0.5]])  # sides with a on s0, with b on s1
    # by hand (centred over the pool): signal s0 = +1, s1 = -1, s2 = 0; variance 0.5^2 * 2 on s0, s1
    np.testing.assert_allclose(discrimination_weights(y, [True], [1], human, 0.5), [1, 0, 0])
    np.testing.assert_allclose(discrimination_weights(y, [True], [-1], human, 0.5), [0, 1, 0])
    # no lean yet: the symmetric disagreement |Delta|^2 / sigma^2 = 8, 8, 0
    np.testing.assert_allclose(discrimination_weights(y, [True], [0], human, 0.5), [0.5, 0.5, 0])
    np.testing.assert_allclose(discrimination_weights(y, [False], [1], human, 0.5), 1 / 3)
    # a noisier stimulus carries less: sigma 0.5 on s0, 1.0 on s1 -> 8 against 2
    np.testing.assert_allclose(
        discrimination_weights(y, [True], [0], human, np.array([0.5, 1.0, 0.5])), [0.8, 0.2, 0])


def test_each_undecided_comparison_gets_an_equal_share():
    from humanlike.analysis.planning.adaptive import discrimination_weights

    y = _models()  # pairs (0, 1), (0, 2), (1, 2)
    h = np.full((4, 2), 0.5)
    w = discrimination_weights(y, [True, False, True], [0, 0, 0], h, 0.2)
    # by hand (pool-centred Delta): (0, 1) |Delta|^2 1.28 on s0, 0.18 on s1; (1, 2) 0.32 and 0.72
    share_01, share_12 = np.array([1.28, 0.18]) / 1.46, np.array([0.32, 0.72]) / 1.04
    np.testing.assert_allclose(w, [*(share_01 + share_12) / 2, 0, 0], atol=1e-12)
    # one weight row per study, studies in a batch
    batch = discrimination_weights(y, [[True, False, True], [True, False, False]],
                                   np.zeros((2, 3)), np.stack([h, h]), 0.2)
    np.testing.assert_allclose(batch[0], w)
    np.testing.assert_allclose(batch[1], [*share_01, 0, 0], atol=1e-12)


def test_human_means_shrink_towards_the_models_average():
    from humanlike.analysis.planning.adaptive import human_means

    y = np.array([[[0.2]], [[0.6]]])  # 2 models, 1 stimulus, 1 category: prior 0.4, variance 0.04
    x = np.array([[[0.8]], [[0.8]], [[0.5]]])  # (N=3, S=1, K=1)
    # by hand: (2.1 / 0.25 + 0.4 * 25) / (3 / 0.25 + 25)
    np.testing.assert_allclose(human_means(x, y, 0.5), [[18.4 / 37]])
    np.testing.assert_allclose(human_means(x[:0], y, 0.5), [[0.4]])  # nobody yet: the prior
    many = np.full((10000, 1, 1), 0.9)
    np.testing.assert_allclose(human_means(many, y, 0.5), [[0.9]], atol=1e-3)
