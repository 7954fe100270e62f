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
