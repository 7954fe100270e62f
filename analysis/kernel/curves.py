"""Kernel analysis: accuracy of the leading kernel principal components versus complexity.

Montavon, Braun & Mueller (2011, JMLR 12, "Kernel analysis of deep networks"), as used by
Cadieu et al. (2013, ICLR workshop, "The neural representation benchmark and its evaluation on
brain and machine"). For features ``X`` (n x D) and class labels:

1. Squared Euclidean distances ``D2[i, j] = ||x_i - x_j||^2``.
2. Kernel widths from quantiles of those distances. For each quantile ``q``, ``s_q`` is the order
   statistic at 0-based position ``floor(q * n**2)`` of all ``n**2`` entries of ``D2`` sorted
   ascending (the ``n`` self-distances of zero and both ``(i, j)`` and ``(j, i)`` included), as in
   Cadieu et al.'s released code. The kernel is ``K = exp(-D2 / s_q) = exp(-D2 / (2 sigma_q**2))``,
   so ``sigma_q = sqrt(s_q / 2)``. If ``s_q = 0`` (many duplicate rows) the limit
   ``K[i, j] = 1 if D2[i, j] == 0 else 0`` is used.
3. Centred kernel ``Kc = H K H`` with ``H = I - 11^T / n`` (feature-space centring); its
   eigenvectors ``u_1..u_n`` are sorted by decreasing eigenvalue. Components with eigenvalue
   ``<= null_rtol * lambda_1`` (default 1e-8 in float64, 1e-5 in float32, about 20 times the
   float32 eigenvalue error) are numerically null and contribute nothing, like the reference
   code's "null-space correction" (which drops components once the cumulative sum of squared
   eigenvalues stops growing in float64); otherwise arbitrary null-space vectors would fit the
   labels. The constant vector is always null, so at most n - 1 components count.
4. Targets: one-versus-all codes ``T[i, c] = 1`` if image ``i`` is in class ``c`` else ``-1``
   (0/1 codes give the same result), each column centred to mean 0, then the whole matrix
   divided by its overall standard deviation, so ``mean(Y**2) = 1`` and ``e(0) = 1``.
5. For ``d = 0..n`` the least-squares fit of ``Y`` on ``U_d`` is ``U_d Theta`` with
   ``Theta = U_d^T Y``; its loss, the squared error averaged over images and classes, is
   ``e(d) = (||Y||_F^2 - sum_{k<=d} ||u_k^T Y||^2) / (n C)`` because ``U`` is orthonormal, so the
   whole curve is a cumulative sum of squared projections.
6. Per ``d`` the width with the lowest ``e(d)`` is kept; the accuracy curve is ``1 - e(d)`` over
   the normalised complexity ``d / n`` and KA-AUC is its trapezoidal area on ``[0, 1]``.
   (The released code averages the ``n + 1`` points instead; the two differ by less than ``1/n``.)
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import scipy.linalg
from scipy.integrate import trapezoid
from threadpoolctl import threadpool_limits

DEFAULT_QUANTILES = (0.1, 0.5, 0.9)


@dataclass(frozen=True)
class KAResult:
    """Kernel-analysis curve of one representation (Montavon et al. 2011; Cadieu et al. 2013).

    ``complexity``: d / n for d = 0..n; ``curve``: 1 - e(d) with the best width per d; ``auc``:
    trapezoidal area under ``curve``; ``sigma``: Gaussian width per quantile
    (k = exp(-||x - x'||^2 / (2 sigma^2))); ``loss``: e(d) per width (widths x (n + 1));
    ``best_width``: index into ``quantiles``/``sigma`` of the width kept at each d;
    ``rank``: number of non-null kernel components per width.
    """

    complexity: np.ndarray
    curve: np.ndarray
    auc: float
    sigma: np.ndarray
    quantiles: tuple[float, ...]
    loss: np.ndarray
    best_width: np.ndarray
    rank: np.ndarray
    n_samples: int
    n_classes: int


def distance_matrix(X: np.ndarray, metric: str) -> np.ndarray:
    """Squared distances of features X (``"sqeuclidean"``), or X itself (``"precomputed"``)."""
    if metric == "precomputed":
        if X.ndim != 2 or X.shape[0] != X.shape[1]:
            raise ValueError(f"precomputed X must be square (n x n distances), got {X.shape}")
        return np.asarray(X, dtype=np.float64)
    if metric == "sqeuclidean":
        return squared_distances(X)
    raise ValueError(f"metric must be 'sqeuclidean' or 'precomputed', got {metric!r}")


def squared_distances(X: np.ndarray) -> np.ndarray:
    """Pairwise squared Euclidean distances ``||x_i||^2 + ||x_j||^2 - 2 x_i.x_j`` (float64, >= 0)."""
    X = np.asarray(X, dtype=np.float64)
    sq = np.einsum("ij,ij->i", X, X)
    D2 = X @ X.T
    D2 *= -2.0
    D2 += sq[:, None]
    D2 += sq[None, :]
    np.maximum(D2, 0.0, out=D2)
    np.fill_diagonal(D2, 0.0)
    return D2


def one_vs_all_targets(codes: np.ndarray, n_classes: int) -> np.ndarray:
    """One-vs-all +-1 codes (..., n, C), columns centred, divided by the SD over all n C entries.

    Afterwards mean(Y**2) = 1 per problem; leading axes of ``codes`` are a batch of problems.
    """
    T = np.where(codes[..., None] == np.arange(n_classes), 1.0, -1.0)
    T -= T.mean(axis=-2, keepdims=True)
    sd = T.std(axis=(-2, -1), keepdims=True)
    if np.any(sd == 0):
        raise ValueError("labels: every (sub)set of images must contain at least two classes")
    return T / sd


def width_quantiles(D2: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    """``s_q``: entry ``floor(q n^2)`` of the ascending n^2 squared distances; batched over axis 0."""
    n = D2.shape[-1]
    flat = D2.reshape(*D2.shape[:-2], n * n)
    kth = np.minimum((np.asarray(quantiles) * n * n).astype(np.int64), n * n - 1)
    return np.partition(flat, kth, axis=-1)[..., kth]


def _check_quantiles(quantiles) -> tuple[float, ...]:
    q = tuple(float(v) for v in np.atleast_1d(quantiles))
    if not q or not all(0.0 <= v <= 1.0 for v in q):
        raise ValueError(f"quantiles must be non-empty and within [0, 1], got {quantiles!r}")
    return q


def _encode_labels(labels, n: int) -> tuple[np.ndarray, int]:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(
            f"labels must be 1-D with one entry per row of X ({n}), got {labels.shape}"
        )
    if labels.dtype.kind == "f" and not np.all(np.isfinite(labels)):
        raise ValueError("labels contain NaN or infinite values")
    _, codes = np.unique(labels, return_inverse=True)
    n_classes = int(codes.max()) + 1
    if n_classes < 2:
        raise ValueError("labels must contain at least two classes")
    return codes.reshape(-1), n_classes


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _submatrix(D2: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    return D2 if rows is None else D2[np.ix_(rows, rows)]


def _label_energy(
    D2: np.ndarray, rows: np.ndarray | None, s: float, Y: np.ndarray, dtype, null_rtol: float
) -> tuple[np.ndarray, int]:
    """``||u_k^T Y||^2`` for the centred kernel's components by decreasing eigenvalue (0 for
    numerically null components), and the number of non-null components."""
    D = _submatrix(D2, rows)
    if s > 0:
        K = np.multiply(D, -1.0 / s, dtype=dtype)
        np.exp(K, out=K)
    else:  # zero width: the limit of exp(-D2 / s) as s -> 0
        K = (D == 0).astype(dtype)
    K -= K.mean(axis=1, keepdims=True)
    K -= K.mean(axis=0, keepdims=True)
    lam, U = scipy.linalg.eigh(K, driver="evd", overwrite_a=True, check_finite=False)
    del K
    lam = lam[::-1]
    P = U[:, ::-1].T @ Y.astype(dtype)
    keep = (lam > null_rtol * lam[0]) & (lam[0] > 0)  # all-null if every point coincides
    return np.einsum("kc,kc->k", P, P, dtype=np.float64) * keep, int(keep.sum())


def ka_loss(
    D2: np.ndarray,
    Y: np.ndarray,
    quantiles: tuple[float, ...],
    *,
    index: np.ndarray | None = None,
    null_rtol: float | None = None,
    dtype: type = np.float64,
    n_jobs: int = -1,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Loss curves e(d) of B problems -> loss (B, W, m + 1), quantiles ``s`` (B, W), rank (B, W).

    Problem b uses the images ``index[b]`` (m of them) of the squared distances ``D2`` and the
    targets ``Y[b]`` (m x C); ``index=None`` means one problem on all of ``D2``. The B x W
    eigendecompositions (LAPACK ``syevd``) run in ``n_jobs`` threads (-1: all cores) with one
    BLAS thread each: multithreaded BLAS inside one eigensolver stalls badly when the cores are
    shared (a 1568 x 1568 ``syevd`` took 8x longer with 2 BLAS threads than with 1 on a busy
    2-core machine). Memory: about 4 m^2 numbers per running job.
    """
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {np.dtype(dtype)}")
    if null_rtol is None:
        null_rtol = 1e-8 if np.dtype(dtype) == np.float64 else 1e-5
    rows = [None] if index is None else list(index)
    B, W = len(rows), len(quantiles)
    jobs = [(b, w) for b in range(B) for w in range(W)]
    workers = max(1, min(len(jobs), _cpu_count() if n_jobs == -1 else int(n_jobs)))
    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
        s = np.array(list(pool.map(lambda r: width_quantiles(_submatrix(D2, r), quantiles), rows)))
        spectra = pool.map(
            lambda bw: _label_energy(
                D2, rows[bw[0]], cast(float, s[bw]), Y[bw[0]], dtype, null_rtol
            ),
            jobs,
        )
        if progress:
            from tqdm import tqdm

            spectra = tqdm(spectra, total=len(jobs), desc="kernel analysis", unit="eigh")
        energy, rank = zip(*spectra)
    m = Y.shape[1]
    energy = np.reshape(energy, (B, W, m))
    total = np.einsum("bnc,bnc->b", Y, Y)[:, None, None]
    explained = np.concatenate([np.zeros((B, W, 1)), np.cumsum(energy, axis=-1)], axis=-1)
    loss = np.clip(1.0 - explained / total, 0.0, None)
    return loss, s, np.reshape(rank, (B, W))


def best_width_curves(loss: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """From loss (..., W, n + 1): complexity d/n, best width per d, curve 1 - min_w e_w(d), AUC."""
    n = loss.shape[-1] - 1
    best = np.argmin(loss, axis=-2)
    curve = 1.0 - np.take_along_axis(loss, best[..., None, :], axis=-2)[..., 0, :]
    complexity = np.arange(n + 1) / n
    return complexity, best, curve, trapezoid(curve, complexity, axis=-1)


def result_from_loss(
    loss: np.ndarray, s: np.ndarray, rank: np.ndarray, quantiles: tuple[float, ...], n_classes: int
) -> KAResult:
    """Keep the lowest-loss width per d and integrate 1 - e(d) over d/n (one problem)."""
    n = loss.shape[-1] - 1
    complexity, best, curve, auc = best_width_curves(loss)
    return KAResult(
        complexity=complexity,
        curve=curve,
        auc=float(auc),
        sigma=np.sqrt(s / 2.0),
        quantiles=quantiles,
        loss=loss,
        best_width=best,
        rank=rank,
        n_samples=n,
        n_classes=n_classes,
    )


def kernel_analysis(
    X: np.ndarray,
    labels: np.ndarray,
    *,
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES,
    metric: Literal["sqeuclidean", "precomputed"] = "sqeuclidean",
    null_rtol: float | None = None,
    dtype: type = np.float64,
    n_jobs: int = -1,
) -> KAResult:
    """KA curve 1 - e(d) vs d/n and KA-AUC of features X (n x D) for class labels.

    Montavon, Braun & Mueller (2011) sec. 3; widths and target coding as Cadieu et al. (2013);
    the exact kernel and target normalisation are in this module's docstring. With
    ``metric="precomputed"`` X is an n x n matrix of squared distances. ``dtype=np.float32``
    roughly halves the eigendecomposition time (distances stay float64); the widths are
    eigendecomposed in ``n_jobs`` threads (-1: all cores).
    """
    q = _check_quantiles(quantiles)
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be a 2-D array with at least two rows, got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or not np.all(np.isfinite(X)):
        raise ValueError("X must be numeric and finite (found NaN, infinite or non-numeric values)")
    D2 = distance_matrix(X, metric)
    codes, n_classes = _encode_labels(labels, X.shape[0])
    Y = one_vs_all_targets(codes, n_classes)
    loss, s, rank = ka_loss(D2, Y[None], q, null_rtol=null_rtol, dtype=dtype, n_jobs=n_jobs)
    return result_from_loss(loss[0], s[0], rank[0], q, n_classes)
