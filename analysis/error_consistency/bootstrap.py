"""Vectorised nonparametric bootstrap over trials: resample counts and percentile intervals.

A bootstrap resample of ``n`` trials drawn with replacement is fully described by how often each
trial was drawn: a row of multinomial counts ``w`` (sum ``n``). Any statistic built from sums over
trials (observed agreement, accuracies) is then ``w @ X`` for a trials-by-columns matrix ``X``, so
a whole batch of resamples is one matrix product ``W @ X`` (the "resampling vector" of Efron &
Tibshirani 1993). Counts are integers below 2**24, so float32 products are exact.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

#: Upper bound on ``resamples x trials`` count entries held in memory at once (64 MB of float32).
MAX_BATCH_ELEMENTS = 2**24
#: Indices are turned into counts in pieces of this many entries, which stay in the CPU cache.
_COUNT_CHUNK_ELEMENTS = 2**18


@dataclass(frozen=True)
class ConfidenceInterval:
    """A two-sided interval ``[low, high]`` (percentile bootstrap unless stated otherwise)."""

    low: float
    high: float


@contextmanager
def quiet_nan_warnings() -> Iterator[None]:
    """Silence numpy's RuntimeWarnings for all-NaN means/quantiles (their result stays NaN)."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def as_rng(random_state: int | np.random.Generator | None) -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from a seed, a generator, or ``None``."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        raise TypeError("pass an int seed or a numpy.random.Generator, not a legacy RandomState")
    return np.random.default_rng(random_state)


def check_n_boot(n_boot: int) -> int:
    """Return ``n_boot`` as int, or raise ``ValueError`` if it is not a positive integer."""
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    return int(n_boot)


def check_confidence_level(confidence_level: float) -> float:
    """Return ``confidence_level`` or raise ``ValueError`` unless it lies in (0, 1)."""
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must lie in (0, 1), got {confidence_level!r}")
    return float(confidence_level)


def batch_size(n_trials: int, n_boot: int, batch: int | None = None) -> int:
    """Return how many resamples to process at once so that ``batch x n_trials`` stays bounded."""
    if batch is not None:
        if int(batch) != batch or batch < 1:
            raise ValueError(f"batch must be a positive integer, got {batch!r}")
        return int(min(batch, n_boot))
    return int(max(1, min(n_boot, MAX_BATCH_ELEMENTS // max(n_trials, 1))))


def resample_indices(
    n_trials: int, size: int, rng: np.random.Generator, n_draws: int | None = None
) -> np.ndarray:
    """Return ``size x n_draws`` indices drawn uniformly from ``range(n_trials)`` with replacement.

    ``n_draws`` defaults to ``n_trials`` (an ordinary bootstrap resample).
    """
    n_draws = n_trials if n_draws is None else n_draws
    dtype = np.int16 if n_trials <= np.iinfo(np.int16).max else np.int64
    return rng.integers(0, n_trials, size=(size, n_draws), dtype=dtype)


def _count_rows(indices: np.ndarray, n_trials: int, out: np.ndarray) -> None:
    """Write per-row counts of ``indices`` (rows x draws) into ``out`` (rows x n_trials)."""
    rows = indices.shape[0]
    offsets = np.arange(rows, dtype=np.intp)[:, None] * n_trials
    flat = (indices + offsets).ravel()
    out[...] = np.bincount(flat, minlength=rows * n_trials).reshape(rows, n_trials)


def counts_from_indices(indices: np.ndarray, n_trials: int) -> np.ndarray:
    """Return the ``resamples x n_trials`` float32 matrix of how often each trial index was drawn."""
    indices = np.asarray(indices)
    if indices.ndim != 2:
        raise ValueError(
            f"indices must be a 2-D (resamples x draws) array, got shape {indices.shape}"
        )
    if indices.size and (indices.min() < 0 or indices.max() >= n_trials):
        raise ValueError(f"indices must lie in [0, {n_trials})")
    size = indices.shape[0]
    out = np.empty((size, n_trials), dtype=np.float32)
    step = max(1, _COUNT_CHUNK_ELEMENTS // max(n_trials, indices.shape[1], 1))
    for sl in iter_batches(size, step):
        _count_rows(indices[sl], n_trials, out[sl])
    return out


def bootstrap_counts(n_trials: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Return ``size`` multinomial resampling vectors of ``n_trials`` trials (float32 counts)."""
    out = np.empty((size, n_trials), dtype=np.float32)
    step = max(1, _COUNT_CHUNK_ELEMENTS // max(n_trials, 1))
    for sl in iter_batches(size, step):
        _count_rows(resample_indices(n_trials, sl.stop - sl.start, rng), n_trials, out[sl])
    return out


def iter_batches(n_boot: int, batch: int) -> Iterator[slice]:
    """Yield consecutive slices covering ``range(n_boot)`` in steps of ``batch``."""
    for start in range(0, n_boot, batch):
        yield slice(start, min(start + batch, n_boot))


def percentile_interval(
    distribution: np.ndarray, confidence_level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Return the ``alpha/2`` and ``1 - alpha/2`` quantiles along axis 0, ignoring NaN resamples."""
    check_confidence_level(confidence_level)
    alpha = 1.0 - confidence_level
    q = [alpha / 2, 1 - alpha / 2]
    distribution = np.asarray(distribution, dtype=float)
    if np.isnan(distribution).any():
        with quiet_nan_warnings():  # all-NaN columns give NaN bounds
            low, high = np.nanquantile(distribution, q, axis=0)
    else:
        low, high = np.quantile(distribution, q, axis=0)
    return low, high
