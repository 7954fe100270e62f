"""Running one-sample statistics of (R, N, K) score differences at every prefix, from cumulative sums."""

from __future__ import annotations

import numpy as np


def running_moments(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, mean, sample SD) of each prefix along axis 1, NaNs left out (SD with ddof 1)."""
    observed = np.isfinite(d)
    d0 = np.where(observed, d, 0.0)
    n = np.cumsum(observed, axis=1)
    total = np.cumsum(d0, axis=1)
    squares = np.cumsum(d0 * d0, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = total / n
        var = (squares - n * mean * mean) / (n - 1)
    return n, mean, np.sqrt(np.maximum(var, 0.0))


def running_t(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One-sample t = mean / (SD / sqrt(n)) of each prefix and its n (Student 1908); 0 where the
    prefix has no spread and mean 0, +-inf where it has no spread and a nonzero mean."""
    n, mean, sd = running_moments(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean * np.sqrt(n) / sd
    t = np.where((sd == 0) & (mean == 0), 0.0, t)
    return np.where(n >= 2, t, np.nan), n


def holm_sidak_adjust(p: np.ndarray) -> np.ndarray:
    """Holm-Sidak step-down adjusted p-values along the last axis: max_{i<=j} 1 - (1 - p_(i))^(K-i+1)
    (Holm 1979; Sidak 1967), vectorised over leading axes (as statsmodels ``multipletests``)."""
    p = np.asarray(p, dtype=float)
    k = p.shape[-1]
    order = np.argsort(p, axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1)
    adjusted = np.maximum.accumulate(1.0 - (1.0 - ranked) ** np.arange(k, 0, -1), axis=-1)
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, np.minimum(adjusted, 1.0), axis=-1)
    return out
