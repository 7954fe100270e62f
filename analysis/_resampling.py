"""The one bootstrap toolkit of the analyses: resample counts, intervals, p-values, Holm-Sidak.

A bootstrap resample of ``n`` units drawn with replacement is fully described by how often each
unit was drawn: a row of multinomial counts ``w`` (sum ``n``). Any statistic built from sums over
units (observed agreement, accuracies, weighted Pearson sums) is then ``w @ X`` for a
units-by-columns matrix ``X``, so a whole batch of resamples is one matrix product ``W @ X`` (the
"resampling vector" of Efron & Tibshirani 1993). Counts are integers below 2**24, so float32
products are exact. Every result that reports an interval holds a :class:`ConfidenceInterval`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import ArrayLike

#: Upper bound on ``resamples x units`` count entries held in memory at once (64 MB of float32).
MAX_BATCH_ELEMENTS = 2**24
#: Indices are turned into counts in pieces of this many entries, which stay in the CPU cache.
_COUNT_CHUNK_ELEMENTS = 2**18

Bound = TypeVar("Bound", float, np.ndarray)
RandomState = int | np.random.Generator | None


@dataclass(frozen=True)
class ConfidenceInterval(Generic[Bound]):
    """A two-sided interval ``[low, high]`` at confidence ``level`` (like scipy.stats' result).

    ``low``/``high`` are floats for one statistic or arrays for many; ``low, high = ci`` unpacks.
    """

    low: Bound
    high: Bound
    level: float

    def __iter__(self) -> Iterator[Bound]:
        """Yield ``low`` then ``high``."""
        yield self.low
        yield self.high


@dataclass(frozen=True)
class MultipleTestResult:
    """Holm-Sidak adjusted p-values and rejections at family-wise level ``alpha`` (NaN kept)."""

    p_adjusted: np.ndarray
    reject: np.ndarray
    alpha: float


# --------------------------------------------------------------------------- checks


@contextmanager
def quiet_nan_warnings() -> Iterator[None]:
    """Silence numpy's RuntimeWarnings for all-NaN means/quantiles (their result stays NaN)."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def as_rng(random_state: RandomState) -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from a seed, a generator, or ``None``."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        raise TypeError("pass an int seed or a numpy.random.Generator, not a legacy RandomState")
    return np.random.default_rng(random_state)


def check_n_resamples(n_resamples: int, name: str = "n_resamples") -> int:
    """Return ``n_resamples`` as int, or raise ``ValueError`` if it is not a positive integer."""
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError(f"{name} must be a positive integer, got {n_resamples!r}")
    return int(n_resamples)


def check_confidence_level(confidence_level: float) -> float:
    """Return ``confidence_level`` or raise ``ValueError`` unless it lies in (0, 1)."""
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must lie in (0, 1), got {confidence_level!r}")
    return float(confidence_level)


# --------------------------------------------------------------------------- resample counts


def batch_size(n_units: int, n_resamples: int, batch: int | None = None) -> int:
    """Return how many resamples to process at once so that ``batch x n_units`` stays bounded."""
    if batch is not None:
        if int(batch) != batch or batch < 1:
            raise ValueError(f"batch must be a positive integer, got {batch!r}")
        return int(min(batch, n_resamples))
    return int(max(1, min(n_resamples, MAX_BATCH_ELEMENTS // max(n_units, 1))))


def iter_batches(n_resamples: int, batch: int) -> Iterator[slice]:
    """Yield consecutive slices covering ``range(n_resamples)`` in steps of ``batch``."""
    for start in range(0, n_resamples, batch):
        yield slice(start, min(start + batch, n_resamples))


def resample_indices(
    n_units: int, size: int, rng: np.random.Generator, n_draws: int | None = None
) -> np.ndarray:
    """Return ``size x n_draws`` indices drawn uniformly from ``range(n_units)`` with replacement.

    ``n_draws`` defaults to ``n_units`` (an ordinary bootstrap resample).
    """
    n_draws = n_units if n_draws is None else n_draws
    dtype = np.int16 if n_units <= np.iinfo(np.int16).max else np.int64
    return rng.integers(0, n_units, size=(size, n_draws), dtype=dtype)


def _count_rows(indices: np.ndarray, n_units: int, out: np.ndarray) -> None:
    """Write per-row counts of ``indices`` (rows x draws) into ``out`` (rows x n_units)."""
    rows = indices.shape[0]
    offsets = np.arange(rows, dtype=np.intp)[:, None] * n_units
    flat = (indices + offsets).ravel()
    out[...] = np.bincount(flat, minlength=rows * n_units).reshape(rows, n_units)


def counts_from_indices(indices: np.ndarray, n_units: int) -> np.ndarray:
    """Return the ``resamples x n_units`` float32 matrix of how often each unit index was drawn."""
    indices = np.asarray(indices)
    if indices.ndim != 2:
        raise ValueError(
            f"indices must be a 2-D (resamples x draws) array, got shape {indices.shape}"
        )
    if indices.size and (indices.min() < 0 or indices.max() >= n_units):
        raise ValueError(f"indices must lie in [0, {n_units})")
    size = indices.shape[0]
    out = np.empty((size, n_units), dtype=np.float32)
    step = max(1, _COUNT_CHUNK_ELEMENTS // max(n_units, indices.shape[1], 1))
    for sl in iter_batches(size, step):
        _count_rows(indices[sl], n_units, out[sl])
    return out


def bootstrap_counts(n_units: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Return ``size`` multinomial resampling vectors of ``n_units`` units (float32 counts)."""
    out = np.empty((size, n_units), dtype=np.float32)
    step = max(1, _COUNT_CHUNK_ELEMENTS // max(n_units, 1))
    for sl in iter_batches(size, step):
        _count_rows(resample_indices(n_units, sl.stop - sl.start, rng), n_units, out[sl])
    return out


def draw_resample_counts(
    strata: Sequence[str],
    n_participants: int,
    n_resamples: int,
    random_state: RandomState = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Integer resample counts: participants (B, P) and stimuli stratified by ``strata`` (B, S).

    Row b of the participant counts is Multinomial(P, 1/P) -- P draws with replacement; within each
    stratum of n_g stimuli the counts are Multinomial(n_g, 1/n_g), so every resample keeps the
    stratum sizes.
    """
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    rng = np.random.default_rng(random_state)
    labels = np.asarray(strata, dtype=object)
    people = rng.multinomial(
        n_participants, np.full(n_participants, 1.0 / n_participants), size=n_resamples
    ).astype(np.int32)
    stimuli = np.zeros((n_resamples, labels.size), dtype=np.int32)
    for label in sorted(set(labels.tolist())):
        idx = np.flatnonzero(labels == label)
        stimuli[:, idx] = rng.multinomial(
            idx.size, np.full(idx.size, 1.0 / idx.size), size=n_resamples
        )
    return people, stimuli


# --------------------------------------------------------------------------- inference


def percentile_interval(
    distribution: ArrayLike, confidence_level: float = 0.95, axis: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Return the ``alpha/2`` and ``1 - alpha/2`` quantiles along ``axis``, ignoring NaN resamples.

    ``alpha = 1 - confidence_level``; all-NaN slices give NaN limits.
    """
    check_confidence_level(confidence_level)
    alpha = 1.0 - confidence_level
    q = [alpha / 2, 1 - alpha / 2]
    values = np.asarray(distribution, dtype=float)
    quantile = np.nanquantile if np.isnan(values).any() else np.quantile
    with quiet_nan_warnings():
        low, high = quantile(values, q, axis=axis)
    return low, high


def confidence_interval(
    distribution: ArrayLike, confidence_level: float = 0.95, axis: int = 0
) -> ConfidenceInterval:
    """Return the percentile :class:`ConfidenceInterval` of resamples along ``axis``."""
    low, high = percentile_interval(distribution, confidence_level, axis)
    if np.ndim(low) == 0:
        return ConfidenceInterval(float(low), float(high), float(confidence_level))
    return ConfidenceInterval(low, high, float(confidence_level))


def bootstrap_p_value(differences: ArrayLike) -> float:
    """Two-sided bootstrap p = min(1, 2 min(#(d <= 0) + 1, #(d >= 0) + 1) / (B + 1)), NaN-free d.

    The percentile test of Davison & Hinkley (1997, ch. 4) that a difference is zero.
    """
    d = np.asarray(differences, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan")
    below = (np.count_nonzero(d <= 0) + 1) / (d.size + 1)
    above = (np.count_nonzero(d >= 0) + 1) / (d.size + 1)
    return float(min(1.0, 2.0 * min(below, above)))


def null_p_value(null: np.ndarray, observed: np.ndarray, axis: int = -1) -> np.ndarray:
    """Return ``(1 + #{|null| >= |observed|}) / (1 + n_null)`` along ``axis`` (NaN nulls never count)."""
    n_null = null.shape[axis]
    tol = 1e-12  # equal statistics computed along different float paths still count as ties
    with np.errstate(invalid="ignore"):
        extreme = np.abs(null) >= np.abs(np.expand_dims(observed, axis)) - tol
    p = (1.0 + extreme.sum(axis=axis)) / (1.0 + n_null)
    return np.where(np.isfinite(observed), p, np.nan)


def holm_sidak(p_values: ArrayLike, alpha: float = 0.05) -> MultipleTestResult:
    """Holm-Sidak step-down adjusted p-values (statsmodels ``multipletests``); NaNs pass through."""
    from statsmodels.stats.multitest import multipletests  # imported on use: slow to import

    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    reject = np.zeros(p.shape, dtype=bool)
    finite = np.isfinite(p)
    if finite.any():
        with np.errstate(divide="ignore"):  # p = 1 gives log1p(-1) inside statsmodels
            rej, adj, _, _ = multipletests(p[finite], alpha=alpha, method="holm-sidak")
        adjusted[finite] = adj
        reject[finite] = rej
    return MultipleTestResult(p_adjusted=adjusted, reject=reject, alpha=alpha)
