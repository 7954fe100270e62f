"""Cadieu et al. (2013) kernel-analysis protocol: KA curves and KA-AUC over class-balanced subsets.

Each subset holds ``floor(fraction * m_min)`` images of every class (``m_min``: size of the
smallest class), 80% by default as in Cadieu et al. (2013); the KA curve and AUC are
computed on every subset, and the AUC is summarised by its mean and standard deviation over
subsets (``ddof=0``, as the released benchmark code prints it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from humanlike.analysis.kernel.curves import (
    DEFAULT_QUANTILES,
    _check_quantiles,
    _encode_labels,
    best_width_curves,
    distance_matrix,
    ka_loss,
    one_vs_all_targets,
)


@dataclass(frozen=True)
class KAProtocolResult:
    """KA over S subsets of m images (Cadieu et al. 2013).

    ``curves`` (S x (m + 1)): 1 - e(d) on ``complexity`` d/m; ``aucs`` (S,) and their
    ``auc_mean`` and ``auc_sd`` (ddof=0); ``subsets`` (S x m image indices into X); ``sigma``
    (S x widths, k = exp(-||x - x'||^2 / (2 sigma^2))); ``loss`` (S x widths x (m + 1)): e(d)
    per width; ``best_width`` (S x (m + 1)); ``rank`` (S x widths): non-null components.
    """

    complexity: np.ndarray
    curves: np.ndarray
    aucs: np.ndarray
    auc_mean: float
    auc_sd: float
    subsets: np.ndarray
    sigma: np.ndarray
    loss: np.ndarray
    best_width: np.ndarray
    rank: np.ndarray
    quantiles: tuple[float, ...]

    @property
    def curve_mean(self) -> np.ndarray:
        """Mean accuracy curve over subsets."""
        return self.curves.mean(axis=0)

    @property
    def curve_min(self) -> np.ndarray:
        """Pointwise minimum over subsets (lower edge of the Cadieu et al. Fig. 3 band)."""
        return self.curves.min(axis=0)

    @property
    def curve_max(self) -> np.ndarray:
        """Pointwise maximum over subsets (upper edge of the band)."""
        return self.curves.max(axis=0)


def balanced_subsets(
    labels: np.ndarray,
    *,
    n_subsets: int = 10,
    fraction: float = 0.8,
    random_state: int | np.random.Generator | None = 0,
) -> np.ndarray:
    """Indices (n_subsets x C k) of subsets with k = floor(fraction * smallest class size) per class.

    All subsets are drawn at once: random keys per (subset, image), images grouped by class and
    ordered by key inside each class, and the first k of every class kept; rows come out sorted.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    if int(n_subsets) < 1:
        raise ValueError(f"n_subsets must be at least 1, got {n_subsets!r}")
    labels = np.asarray(labels)
    codes, n_classes = _encode_labels(labels, labels.shape[0] if labels.ndim else -1)
    counts = np.bincount(codes, minlength=n_classes)
    k = int(np.floor(fraction * counts.min()))
    if k < 1:
        raise ValueError(
            f"fraction {fraction} of the smallest class ({counts.min()} images) is less than one image"
        )
    rng = np.random.default_rng(random_state)
    keys = rng.random((int(n_subsets), codes.shape[0]))
    order = np.argsort(codes[None, :] + keys, axis=1)  # class blocks, random order inside
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    take = (starts[:, None] + np.arange(k)[None, :]).ravel()
    return np.sort(order[:, take], axis=1)


def _as_subsets(subsets: np.ndarray, n: int) -> np.ndarray:
    subsets = np.asarray(subsets)
    if subsets.dtype == bool:
        if subsets.ndim != 2 or subsets.shape[1] != n:
            raise ValueError(f"boolean subsets must be (n_subsets x {n}), got {subsets.shape}")
        sizes = subsets.sum(axis=1)
        if np.any(sizes != sizes[0]):
            raise ValueError("boolean subsets must all select the same number of images")
        return np.nonzero(subsets)[1].reshape(subsets.shape[0], -1)
    if subsets.ndim != 2 or not np.issubdtype(subsets.dtype, np.integer):
        raise ValueError("subsets must be a 2-D integer index array or a boolean mask")
    if subsets.min() < 0 or subsets.max() >= n:
        raise ValueError(f"subsets index images outside 0..{n - 1}")
    return subsets


def kernel_analysis_protocol(
    X: np.ndarray,
    labels: np.ndarray,
    *,
    n_subsets: int = 10,
    fraction: float = 0.8,
    subsets: np.ndarray | None = None,
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES,
    random_state: int | np.random.Generator | None = 0,
    metric: Literal["sqeuclidean", "precomputed"] = "sqeuclidean",
    null_rtol: float | None = None,
    dtype: type = np.float64,
    n_jobs: int = -1,
    progress: bool = False,
) -> KAProtocolResult:
    """KA curve and KA-AUC per class-balanced subset, AUC mean and SD (Cadieu et al. 2013).

    Distances are computed once for all images and sliced per subset; the subsets x widths
    eigendecompositions run in ``n_jobs`` threads (-1: all cores), each holding about 4 m^2
    numbers. ``subsets`` (index rows or boolean masks) replaces the random draw, e.g. for a
    benchmark's predefined splits.
    """
    q = _check_quantiles(quantiles)
    X = np.asarray(X)
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.number) or not np.all(np.isfinite(X)):
        raise ValueError(f"X must be a finite numeric 2-D array, got shape {X.shape}")
    n = X.shape[0]
    codes, n_classes = _encode_labels(labels, n)
    if subsets is None:
        index = balanced_subsets(
            codes, n_subsets=n_subsets, fraction=fraction, random_state=random_state
        )
    else:
        index = _as_subsets(subsets, n)
    D2 = distance_matrix(X, metric)

    Y = one_vs_all_targets(codes[index], n_classes)  # (S, m, C)
    loss, s, rank = ka_loss(
        D2, Y, q, index=index, null_rtol=null_rtol, dtype=dtype, n_jobs=n_jobs, progress=progress
    )
    complexity, best, curves, aucs = best_width_curves(loss)
    return KAProtocolResult(
        complexity=complexity,
        curves=curves,
        aucs=aucs,
        auc_mean=float(aucs.mean()),
        auc_sd=float(aucs.std()),
        subsets=index,
        sigma=np.sqrt(s / 2.0),
        loss=loss,
        best_width=best,
        rank=rank,
        quantiles=q,
    )
