"""Kernel analysis of one representation (Montavon et al. 2011; Cadieu et al. 2013)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist
from scipy.stats import ortho_group
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import KernelCenterer

from humanlike.analysis.kernel.curves import (
    kernel_analysis,
    one_vs_all_targets,
    squared_distances,
)


def clustered(n_classes: int, per_class: int, noise: float, seed: int = 0):
    """One-hot features of the labels plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(n_classes), per_class)
    X = np.eye(n_classes)[labels] + noise * rng.standard_normal((labels.size, n_classes))
    return X, labels


def test_one_hot_features_give_zero_loss_from_d_equal_number_of_classes_on():
    X, y = clustered(n_classes=7, per_class=40, noise=1e-3)
    res = kernel_analysis(X, y)
    assert np.all(1.0 - res.curve[7:] < 1e-4)
    # Closed form for balanced, perfectly separated clusters: the centred targets span C - 1
    # kernel components carrying equal energy, so 1 - e(d) = d / (C - 1) for d < C.
    np.testing.assert_allclose(res.curve[:7], np.arange(7) / 6, atol=1e-4)


def test_one_hot_auc_matches_closed_form_and_is_near_one():
    X, y = clustered(n_classes=7, per_class=40, noise=1e-3)
    n, c = y.size, 7
    # Trapezoid of the ramp 0..1 over d = 0..C-1, then 1 up to d = n: 1 - (C - 1) / (2 n).
    assert kernel_analysis(X, y).auc == pytest.approx(1 - (c - 1) / (2 * n), abs=1e-4)


def test_features_independent_of_labels_have_markedly_lower_auc():
    X, y = clustered(n_classes=7, per_class=40, noise=1e-3)
    rng = np.random.default_rng(1)
    noise_auc = kernel_analysis(rng.standard_normal((y.size, 50)), y).auc
    # Under independence E[1 - e(d)] = d / (n - 1) (random basis of the centred space): AUC ~ 0.5;
    # keeping the best of three widths per d can only lift it a little.
    assert 0.45 < noise_auc < 0.6
    assert kernel_analysis(X, y).auc - noise_auc > 0.35


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**31 - 1),
    scale=st.floats(1e-3, 1e3),
    shift=st.floats(-100, 100),
)
def test_rotated_scaled_or_shifted_features_give_the_same_curve(seed, scale, shift):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=45)
    y[:3] = [0, 1, 2]
    X = rng.standard_normal((45, 6)) + y[:, None]
    R = ortho_group.rvs(6, random_state=seed)
    base = kernel_analysis(X, y)
    moved = kernel_analysis(scale * X @ R + shift, y)
    np.testing.assert_allclose(moved.curve, base.curve, atol=1e-6)
    np.testing.assert_allclose(moved.sigma, scale * base.sigma, rtol=1e-7)
    # Width by width; the widest kernel's last components are ill-conditioned, hence 1e-5.
    np.testing.assert_allclose(moved.loss, base.loss, atol=1e-5)


def test_width_kept_at_each_d_is_the_best_of_the_candidates():
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(4), 30)
    X = rng.standard_normal((120, 8)) + 0.8 * np.eye(8)[y]
    quantiles = (0.05, 0.3, 0.6, 0.95)
    both = kernel_analysis(X, y, quantiles=quantiles)
    singles = np.stack([kernel_analysis(X, y, quantiles=(q,)).curve for q in quantiles])
    np.testing.assert_allclose(both.curve, singles.max(axis=0), atol=1e-12)
    np.testing.assert_allclose(both.loss, 1.0 - singles, atol=1e-12)
    chosen = singles[both.best_width, np.arange(singles.shape[1])]
    np.testing.assert_allclose(chosen, singles.max(axis=0), atol=1e-12)
    assert len(set(both.best_width[1:].tolist())) > 1  # the choice really varies with d here


def test_sigma_is_root_half_of_the_squared_distance_order_statistic():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 4))
    y = np.arange(30) % 2
    res = kernel_analysis(X, y, quantiles=(0.1, 0.5, 0.9))
    # All n^2 squared distances (zeros on the diagonal, each pair twice), sorted ascending.
    d2 = pdist(X, "sqeuclidean")
    everything = np.sort(np.concatenate([np.zeros(30), d2, d2]))
    expected = everything[[int(0.1 * 900), int(0.5 * 900), int(0.9 * 900)]]
    np.testing.assert_allclose(res.sigma, np.sqrt(expected / 2), rtol=1e-10)


def test_loss_equals_least_squares_fit_on_leading_components_of_the_centred_rbf_kernel():
    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(3), 20)
    X = rng.standard_normal((60, 5)) + np.eye(5)[y]
    res = kernel_analysis(X, y, quantiles=(0.5,))
    # Independent route: scikit-learn's RBF kernel and kernel centering, numpy's eigh and lstsq.
    K = KernelCenterer().fit_transform(rbf_kernel(X, gamma=1.0 / (2 * res.sigma[0] ** 2)))
    lam, U = np.linalg.eigh(K)
    U = U[:, np.argsort(lam)[::-1]]
    T = np.where(y[:, None] == np.arange(3), 1.0, -1.0)
    T = (T - T.mean(0)) / (T - T.mean(0)).std()
    for d in (1, 2, 5, 17, 40):
        theta = np.linalg.lstsq(U[:, :d], T, rcond=None)[0]
        mse = np.mean((T - U[:, :d] @ theta) ** 2)
        assert res.loss[0, d] == pytest.approx(mse, abs=1e-10)


def test_targets_are_centred_per_class_and_have_unit_mean_square():
    Y = one_vs_all_targets(np.array([0, 0, 1, 2, 2, 2]), 3)
    np.testing.assert_allclose(Y.mean(axis=0), 0.0, atol=1e-15)
    assert np.mean(Y**2) == pytest.approx(1.0)


def test_curve_starts_at_zero_never_decreases_and_auc_is_its_trapezoidal_area():
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(5), 12)
    res = kernel_analysis(rng.standard_normal((60, 10)) + np.eye(10)[y], y)
    assert res.curve[0] == 0.0
    assert np.all(np.diff(res.curve) >= -1e-12)
    np.testing.assert_array_equal(res.complexity, np.arange(61) / 60)
    assert res.auc == pytest.approx(np.sum((res.curve[1:] + res.curve[:-1]) / 2) / 60)


def test_precomputed_squared_distances_give_the_same_result():
    rng = np.random.default_rng(6)
    X, y = rng.standard_normal((40, 7)), np.arange(40) % 4
    np.testing.assert_allclose(
        squared_distances(X)[np.triu_indices(40, 1)], pdist(X, "sqeuclidean"), rtol=1e-9
    )
    direct = kernel_analysis(X, y)
    pre = kernel_analysis(squared_distances(X), y, metric="precomputed")
    np.testing.assert_array_equal(pre.curve, direct.curve)


def test_float32_eigendecomposition_agrees_with_float64():
    rng = np.random.default_rng(7)
    y = np.repeat(np.arange(4), 50)
    X = rng.standard_normal((200, 30)) + 0.5 * np.eye(30)[y]
    r64 = kernel_analysis(X, y)
    r32 = kernel_analysis(X, y, dtype=np.float32)
    np.testing.assert_allclose(r32.curve, r64.curve, atol=1e-4)
    assert r32.auc == pytest.approx(r64.auc, abs=1e-5)


def test_duplicate_rows_use_the_zero_width_limit_instead_of_nan():
    X, y = clustered(n_classes=3, per_class=10, noise=0.0)  # 1/3 of all distances are 0
    res = kernel_analysis(X, y, quantiles=(0.1, 0.9))
    assert res.sigma[0] == 0.0
    assert np.all(np.isfinite(res.curve))
    assert res.curve[2] == pytest.approx(1.0)


def test_string_labels_work_like_integer_codes():
    X, y = clustered(n_classes=3, per_class=10, noise=0.1)
    names = np.array(["cat", "dog", "car"])[y]
    np.testing.assert_allclose(
        kernel_analysis(X, names).curve, kernel_analysis(X, y).curve, atol=1e-12
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"labels": np.zeros(10)}, "at least two classes"),
        ({"labels": np.arange(9)}, "one entry per row"),
        ({"X": np.full((10, 2), np.nan)}, "finite"),
        ({"X": np.ones(10)}, "2-D"),
        ({"quantiles": (0.5, 1.5)}, "quantiles"),
        ({"metric": "cosine"}, "metric"),
        ({"metric": "precomputed"}, "square"),
        ({"dtype": np.float16}, "dtype"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(kwargs, message):
    args = {"X": np.random.default_rng(0).standard_normal((10, 3)), "labels": np.arange(10) % 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        kernel_analysis(args.pop("X"), args.pop("labels"), **args)


def test_numerically_null_components_explain_nothing():
    # A wide Gaussian kernel on 1-D data has eigenvalues decaying geometrically: most of its
    # components are numerical noise, which must not be allowed to fit the labels.
    rng = np.random.default_rng(8)
    X, y = rng.uniform(0, 1, (120, 1)), rng.integers(0, 2, 120)
    res = kernel_analysis(X, y, quantiles=(0.9,))
    assert res.rank[0] < 30
    np.testing.assert_array_equal(res.curve[res.rank[0] :], res.curve[-1])
    assert res.curve[-1] < 0.6  # would be 1 if all n components counted
