"""Pearson r and mean squared error from weighted sufficient sums (shared by the ratings analyses)."""

from __future__ import annotations

import numpy as np


def pearson_from_sums(
    n: np.ndarray, sx: np.ndarray, sy: np.ndarray, sxx: np.ndarray, syy: np.ndarray, sxy: np.ndarray
) -> np.ndarray:
    """Weighted Pearson r = (n Sxy - Sx Sy) / sqrt((n Sxx - Sx^2)(n Syy - Sy^2)); NaN if a side is constant.

    Each argument holds sums of the (integer or real) weights times 1, x, y, x^2, y^2 and x*y, so the
    same formula gives the plain r (unit weights) and the r of a bootstrap resample (count weights).
    """
    n, sx, sy, sxx, syy, sxy = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (n, sx, sy, sxx, syy, sxy))
    )
    var_x = n * sxx - sx * sx
    var_y = n * syy - sy * sy
    cov = n * sxy - sx * sy
    # Cancellation can leave tiny positive variances for constant vectors: treat them as zero.
    tol_x = 1e-12 * np.maximum(n * sxx, 1e-300)
    tol_y = 1e-12 * np.maximum(n * syy, 1e-300)
    ok = (var_x > tol_x) & (var_y > tol_y) & (n > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(ok, cov / np.sqrt(np.where(ok, var_x * var_y, 1.0)), np.nan)
    return np.clip(r, -1.0, 1.0)


def mse_from_sums(n: np.ndarray, sxx: np.ndarray, syy: np.ndarray, sxy: np.ndarray) -> np.ndarray:
    """Weighted mean squared error (Sxx - 2 Sxy + Syy) / n; NaN where the weights sum to zero."""
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (sxx - 2.0 * sxy + syy) / np.where(n > 0, n, 1.0), np.nan)

