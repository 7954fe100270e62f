"""Cadieu et al. (2013) subset protocol: class-balanced 80% subsets, per-subset curves, AUC mean/SD."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humanlike.analysis.kernel.curves import kernel_analysis
from humanlike.analysis.kernel.protocol import balanced_subsets, kernel_analysis_protocol


def data(seed: int = 0, per_class=(30, 30, 30, 30)):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(len(per_class)), per_class)
    X = rng.standard_normal((y.size, 12)) + 0.7 * np.eye(12)[y]
    return X, y


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    counts=st.lists(st.integers(2, 40), min_size=2, max_size=6),
    fraction=st.floats(0.5, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_subset_holds_the_same_number_of_images_of_every_class(counts, fraction, seed):
    labels = np.random.default_rng(seed).permutation(np.repeat(np.arange(len(counts)), counts))
    subsets = balanced_subsets(labels, n_subsets=7, fraction=fraction, random_state=seed)
    k = int(np.floor(fraction * min(counts)))
    assert subsets.shape == (7, k * len(counts))
    for row in subsets:
        assert len(np.unique(row)) == row.size  # no image twice
        np.testing.assert_array_equal(np.bincount(labels[row], minlength=len(counts)), k)


def test_default_subsets_take_80_percent_of_a_balanced_set():
    labels = np.repeat(np.arange(7), 280)  # the Cadieu et al. image set: 7 x 280 = 1,960 images
    subsets = balanced_subsets(labels)
    assert subsets.shape == (10, 1568)


def test_subsets_are_reproducible_from_the_seed_and_differ_between_seeds():
    _, y = data()
    a = balanced_subsets(y, random_state=3)
    np.testing.assert_array_equal(a, balanced_subsets(y, random_state=3))
    assert not np.array_equal(a, balanced_subsets(y, random_state=4))
    assert len({tuple(row) for row in a}) == a.shape[0]  # the subsets differ from each other


def test_protocol_results_are_reproducible_from_the_seed():
    X, y = data()
    first = kernel_analysis_protocol(X, y, n_subsets=4, random_state=11)
    again = kernel_analysis_protocol(X, y, n_subsets=4, random_state=11)
    np.testing.assert_array_equal(first.subsets, again.subsets)
    np.testing.assert_allclose(first.curves, again.curves, atol=1e-12)
    assert first.auc_mean == pytest.approx(again.auc_mean, abs=1e-12)
    assert first.auc_sd == pytest.approx(again.auc_sd, abs=1e-12)
    other = kernel_analysis_protocol(X, y, n_subsets=4, random_state=12)
    assert abs(other.auc_mean - first.auc_mean) > 1e-6  # the seed matters


def test_each_subset_curve_is_kernel_analysis_of_that_subset_alone():
    X, y = data(per_class=(25, 20, 30))
    res = kernel_analysis_protocol(X, y, n_subsets=3, random_state=5, n_jobs=1)
    threaded = kernel_analysis_protocol(X, y, n_subsets=3, random_state=5, n_jobs=2)
    for s, rows in enumerate(res.subsets):
        alone = kernel_analysis(X[rows], y[rows])
        np.testing.assert_allclose(res.curves[s], alone.curve, atol=1e-12)
        assert res.aucs[s] == pytest.approx(alone.auc, abs=1e-12)
        np.testing.assert_allclose(res.sigma[s], alone.sigma, rtol=1e-12)
    np.testing.assert_allclose(threaded.curves, res.curves, atol=1e-12)


def test_auc_summary_is_mean_and_population_sd_over_subsets():
    X, y = data()
    res = kernel_analysis_protocol(X, y, n_subsets=5, random_state=0)
    assert res.auc_mean == pytest.approx(np.mean(res.aucs))
    assert res.auc_sd == pytest.approx(np.std(res.aucs, ddof=0))
    assert res.auc_sd > 0
    assert np.all(res.curve_min <= res.curve_mean) and np.all(res.curve_mean <= res.curve_max)


def test_predefined_subsets_as_masks_or_indices_give_the_same_result():
    X, y = data()
    index = balanced_subsets(y, n_subsets=3, random_state=2)
    mask = np.zeros((3, y.size), dtype=bool)
    mask[np.arange(3)[:, None], index] = True
    by_index = kernel_analysis_protocol(X, y, subsets=index)
    by_mask = kernel_analysis_protocol(X, y, subsets=mask)
    np.testing.assert_array_equal(by_index.subsets, by_mask.subsets)
    np.testing.assert_allclose(by_index.curves, by_mask.curves, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fraction": 0.0}, "fraction"),
        ({"fraction": 0.01}, "less than one image"),
        ({"n_subsets": 0}, "n_subsets"),
        ({"subsets": np.array([[0, 200]])}, "outside"),
        ({"subsets": np.ones((2, 5), dtype=bool)}, "boolean subsets"),
    ],
)
def test_bad_protocol_settings_raise_value_error(kwargs, message):
    X, y = data()
    with pytest.raises(ValueError, match=message):
        kernel_analysis_protocol(X, y, **kwargs)
