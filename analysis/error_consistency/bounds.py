"""Attainable ranges of observed consistency and kappa, and the null band of independent observers.

Geirhos, Meding & Wichmann (2020, NeurIPS, "Beyond accuracy"), eqs. 5-6 and appendix S.3;
the bounds of kappa given two accuracies follow Klein, Meyen, Brendel, Wichmann & Meding (2025,
"Quantifying uncertainty in error consistency"). All functions accept arrays and broadcast.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from humanlike.analysis.error_consistency.kappa import (
    Degenerate,
    expected_consistency,
    kappa_from_rates,
)


def _check_unit(x: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if np.any(~np.isfinite(arr)) or np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"{name} must lie in [0, 1]")
    return arr


def c_obs_bounds(c_exp: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(low, high)`` of ``c_obs`` given ``c_exp`` (Geirhos et al. 2020, eqs. 5-6).

    For ``c_exp <= .5``: ``0 <= c_obs <= 1 - sqrt(1 - 2 c_exp)``; for ``c_exp >= .5``:
    ``sqrt(2 c_exp - 1) <= c_obs <= 1``.
    """
    c_exp = _check_unit(c_exp, "c_exp")
    low = np.where(c_exp <= 0.5, 0.0, np.sqrt(np.clip(2.0 * c_exp - 1.0, 0.0, None)))
    high = np.where(c_exp <= 0.5, 1.0 - np.sqrt(np.clip(1.0 - 2.0 * c_exp, 0.0, None)), 1.0)
    return low, high


def kappa_bounds(c_exp: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(low, high)`` of kappa given ``c_exp``: the c_obs bounds mapped through eq. 3.

    Where ``c_exp = 1`` kappa is undefined and both bounds are NaN.
    """
    c_exp = _check_unit(c_exp, "c_exp")
    low, high = c_obs_bounds(c_exp)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = np.where(c_exp < 1.0, 1.0 - c_exp, np.nan)
        return (low - c_exp) / denom, (high - c_exp) / denom


def c_obs_max(acc1: ArrayLike, acc2: ArrayLike) -> np.ndarray:
    """Return the largest possible ``c_obs`` for accuracies ``acc1, acc2``: ``min(a1, a2) + min(1 - a1, 1 - a2)``."""
    a1 = _check_unit(acc1, "acc1")
    a2 = _check_unit(acc2, "acc2")
    return np.minimum(a1, a2) + np.minimum(1.0 - a1, 1.0 - a2)


def c_obs_min(acc1: ArrayLike, acc2: ArrayLike) -> np.ndarray:
    """Return the smallest possible ``c_obs``: ``1 - [min(a1, 1 - a2) + min(1 - a1, a2)]``."""
    a1 = _check_unit(acc1, "acc1")
    a2 = _check_unit(acc2, "acc2")
    return 1.0 - (np.minimum(a1, 1.0 - a2) + np.minimum(1.0 - a1, a2))


def kappa_max(
    acc1: ArrayLike, acc2: ArrayLike, *, degenerate: Degenerate = "mvh"
) -> np.ndarray | float:
    """Return the largest kappa two observers with accuracies ``acc1, acc2`` can reach (Klein et al. 2025).

    ``c_obs = min(a1, a2) + min(1 - a1, 1 - a2)`` put into eq. 3; e.g. ``kappa_max(.8, .6) = 6/11``.
    """
    out = kappa_from_rates(c_obs_max(acc1, acc2), acc1, acc2, degenerate=degenerate)
    return float(out) if out.ndim == 0 else out


def kappa_min(
    acc1: ArrayLike, acc2: ArrayLike, *, degenerate: Degenerate = "mvh"
) -> np.ndarray | float:
    """Return the smallest kappa for accuracies ``acc1, acc2`` (Klein et al. 2025).

    ``c_obs = 1 - [min(a1, 1 - a2) + min(1 - a1, a2)]`` put into eq. 3.
    """
    out = kappa_from_rates(c_obs_min(acc1, acc2), acc1, acc2, degenerate=degenerate)
    return float(out) if out.ndim == 0 else out


def accuracy_range(acc1: ArrayLike, kappa: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(low, high)``: the accuracies a second observer can have when the first has
    ``acc1`` and their kappa is ``kappa`` (Klein et al. 2025's bounds read the other way round:
    the ``acc2`` with ``kappa_min(acc1, acc2) <= kappa <= kappa_max(acc1, acc2)``).

    For ``kappa >= 0``, solving ``kappa = kappa_max`` on either side of ``acc2 = acc1`` gives
    ``low = kappa a1 / (2 - kappa - 2 a1 (1 - kappa))`` and
    ``high = a1 (2 - kappa) / (kappa + 2 a1 (1 - kappa))``; for ``kappa < 0``, solving
    ``kappa = kappa_min`` on either side of ``acc2 = 1 - acc1`` gives
    ``low = -kappa a1 / (kappa + 2 a1 (1 - kappa))`` and
    ``high = 1 + kappa (1 - a1) / (kappa + 2 (1 - a1)(1 - kappa))``. Both are NaN where no accuracy
    reaches ``kappa`` (a negative kappa far below what ``acc1`` allows); e.g. ``kappa = 1`` pins
    ``acc2 = acc1`` and ``kappa = 0`` allows every accuracy."""
    a1 = _check_unit(acc1, "acc1")
    k = np.asarray(kappa, dtype=float)
    if np.any(~np.isfinite(k)) or np.any((k < -1) | (k > 1)):
        raise ValueError("kappa must lie in [-1, 1]")
    a1, k = np.broadcast_arrays(a1, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        pos_low = k * a1 / (2.0 - k - 2.0 * a1 * (1.0 - k))
        pos_high = a1 * (2.0 - k) / (k + 2.0 * a1 * (1.0 - k))
        d_low = k + 2.0 * a1 * (1.0 - k)
        d_high = k + 2.0 * (1.0 - a1) * (1.0 - k)
        neg_low = np.where(d_low > 0, -k * a1 / d_low, np.inf)
        neg_high = np.where(d_high > 0, 1.0 + k * (1.0 - a1) / d_high, -np.inf)
    low = np.where(k >= 0, pos_low, neg_low)
    high = np.where(k >= 0, pos_high, neg_high)
    # a negative kappa is reached on the low side only up to acc2 = 1 - acc1, and on the high side
    # only from there: where a side is unreachable its end moves to the pivot (or the range is empty)
    pivot = 1.0 - a1
    low = np.where((k < 0) & (low > pivot), np.where(high <= pivot, np.nan, pivot), low)
    high = np.where((k < 0) & (high < pivot), np.where(np.isnan(low), np.nan, pivot), high)
    empty = np.isnan(low) | np.isnan(high) | (low > high)
    low = np.where(empty, np.nan, np.clip(low, 0.0, 1.0))
    high = np.where(empty, np.nan, np.clip(high, 0.0, 1.0))
    return low, high


#: The accuracies of Geirhos et al.'s simulated observer pairs (appendix S.3, their R script): a
#: third of the grid in each of [0, .15], [.15, .85] and [.85, 1], independently for both observers.
PAPER_ACCURACY_SEGMENTS = ((0.0, 0.15), (0.15, 0.85), (0.85, 1.0))
#: Their bins of the recomputed c_exp: 100 of width 1/99 from 0.
PAPER_N_BINS = 100
NULL_BAND_METHODS = ("simulated", "binomial")


def _check_band_args(n: int, confidence_level: float) -> None:
    if int(n) != n or n < 1:
        raise ValueError(f"n (number of trials) must be a positive integer, got {n!r}")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must lie in (0, 1), got {confidence_level!r}")


@lru_cache(maxsize=32)
def _simulated_band_table(
    n: int, confidence_level: float, n_sim: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per c_exp bin: (mean recomputed c_exp, low, high quantile of c_obs) of simulated pairs."""
    rng = np.random.default_rng(seed)
    # correct trials of each observer: Binomial(n, p) with p uniform on a random segment, drawn
    # from its closed-form marginal,
    # int_a^b Bin(k; n, p) dp = [I_b - I_a](k + 1, n - k + 1) / (n + 1)
    k_all = np.arange(n + 1)
    weights = sum(
        (stats.beta.cdf(b, k_all + 1, n - k_all + 1) - stats.beta.cdf(a, k_all + 1, n - k_all + 1))
        / (b - a)
        for a, b in PAPER_ACCURACY_SEGMENTS
    )
    k = rng.choice(k_all, size=(2, n_sim), p=weights / weights.sum())
    # independent trials: given both counts, the trials both got right are hypergeometric
    both = rng.hypergeometric(k[0], n - k[0], k[1])
    agree = 2 * both + n - k[0] - k[1]  # trials both right or both wrong
    acc = k / n
    c_exp = acc[0] * acc[1] + (1.0 - acc[0]) * (1.0 - acc[1])
    edges = np.linspace(0.0, 1.0 + 1.0 / (PAPER_N_BINS - 1), PAPER_N_BINS + 1)
    bins = np.clip(np.searchsorted(edges, c_exp, side="right") - 1, 0, PAPER_N_BINS - 1)
    # c_obs takes n + 1 values: a (bin x agreements) histogram replaces sorting the draws
    hist = np.bincount(bins * (n + 1) + agree, minlength=PAPER_N_BINS * (n + 1))
    hist = hist.reshape(PAPER_N_BINS, n + 1)
    counts = hist.sum(axis=1)
    filled = counts > 0
    cdf = np.cumsum(hist[filled], axis=1) / counts[filled, None]
    centre = np.bincount(bins, weights=c_exp, minlength=PAPER_N_BINS)[filled] / counts[filled]
    alpha = 1.0 - confidence_level

    def quantile(q: float) -> np.ndarray:
        # the smallest c_obs whose within-bin CDF reaches q (the inverted-CDF quantile)
        return (cdf < q - 1e-12).sum(axis=1) / n

    return centre, quantile(alpha / 2), quantile(1 - alpha / 2)


def null_band(
    c_exp: ArrayLike,
    n: int,
    *,
    confidence_level: float = 0.95,
    method: str = "simulated",
    n_sim: int = 400_000,
    random_state: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the central ``confidence_level`` range of ``c_obs`` of independent observers at c_exp.

    ``method="simulated"`` (Geirhos et al. 2020, appendix S.3 and Fig. SF.1): ``n_sim`` pairs of
    independent observers with accuracies from the paper's grid, ``c_exp`` recomputed from each
    pair's simulated trials, the quantiles of ``c_obs`` per bin of that ``c_exp`` (100 bins),
    interpolated. Trials are drawn as counts (correct counts binomial, the agreements given both
    hypergeometric), which is the same distribution as simulating every trial.
    ``method="binomial"``: Binomial(n, c_exp) quantiles / n, the interval S.3 calls wrong (it
    ignores that c_exp is itself estimated: about twice as wide at n = 160, c_exp = .8).
    """
    c_exp = _check_unit(c_exp, "c_exp")
    _check_band_args(n, confidence_level)
    if method not in NULL_BAND_METHODS:
        raise ValueError(f"method must be one of {NULL_BAND_METHODS}, got {method!r}")
    if method == "binomial":
        alpha = 1.0 - confidence_level
        low = stats.binom.ppf(alpha / 2, n, c_exp) / n
        high = stats.binom.ppf(1 - alpha / 2, n, c_exp) / n
        return np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    if int(n_sim) != n_sim or n_sim < 1000:
        raise ValueError(f"n_sim must be an integer of at least 1000, got {n_sim!r}")
    centre, low, high = _simulated_band_table(
        int(n), float(confidence_level), int(n_sim), int(random_state)
    )
    return np.interp(c_exp, centre, low), np.interp(c_exp, centre, high)


def pair_null_band(
    k_a: ArrayLike, k_b: ArrayLike, n: ArrayLike, *, confidence_level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Return the exact central range of ``c_obs`` of independent observers given both counts.

    Conditional on ``k_a`` and ``k_b`` correct of ``n`` trials, the trials both got right are
    Hypergeometric(n, k_a, k_b) under independence (Fisher's exact test), so
    ``c_obs = (2 x + n - k_a - k_b) / n``; the band is its ``alpha/2`` and ``1 - alpha/2`` quantiles
    (at least the nominal coverage, as the counts are discrete). Vectorised over pairs.
    """
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must lie in (0, 1), got {confidence_level!r}")
    k_a, k_b, n_arr = np.broadcast_arrays(
        np.asarray(k_a, dtype=float), np.asarray(k_b, dtype=float), np.asarray(n, dtype=float)
    )
    if np.any(n_arr < 1) or np.any((k_a < 0) | (k_a > n_arr) | (k_b < 0) | (k_b > n_arr)):
        raise ValueError("counts must satisfy 0 <= k_a, k_b <= n with n >= 1")
    alpha = 1.0 - confidence_level
    x_low = stats.hypergeom.ppf(alpha / 2, n_arr, k_a, k_b)
    x_high = stats.hypergeom.ppf(1 - alpha / 2, n_arr, k_a, k_b)
    return (2 * x_low + n_arr - k_a - k_b) / n_arr, (2 * x_high + n_arr - k_a - k_b) / n_arr


__all__ = [
    "accuracy_range",
    "c_obs_bounds",
    "c_obs_max",
    "c_obs_min",
    "expected_consistency",
    "kappa_bounds",
    "kappa_max",
    "kappa_min",
    "null_band",
    "pair_null_band",
]
