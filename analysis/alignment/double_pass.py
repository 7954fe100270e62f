"""Double-pass internal noise per observer and the individual noise ceiling it implies.

Model (Burgess & Colborne 1988, JOSA A 5:617; Neri 2010, Psychon. Bull. Rev. 17:802): on a trial
the observer is right when ``d + e + i > 0``, with external noise ``e ~ N(0, 1)`` fixed by the
stimulus (the same on both passes) and internal noise ``i ~ N(0, gamma^2)`` drawn anew each pass.
With ``a = d / sqrt(1 + gamma^2) = Z(p_correct)`` and pass-to-pass correlation ``rho = 1 / (1 +
gamma^2)``, the agreement of the two passes is ``p_agree = Phi2(a, a; rho) + Phi2(-a, -a; rho) =
1 - 4 T(a, sqrt((1 - rho) / (1 + rho)))`` (Owen's T), which is inverted for ``gamma`` (the
internal-to-external noise ratio). The individual noise ceiling is the agreement with the observer
of a noise-free model that decides ``d + e > 0``: ``Phi2(a, b; r) + Phi2(-a, -b; r)`` with ``b = a
sqrt(1 + gamma^2)`` and ``r = sqrt(rho)``, and its Cohen's kappa (Geirhos et al. 2020, eq. 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri, owens_t

from humanlike.analysis._resampling import (
    ConfidenceInterval,
    RandomState,
    as_rng,
    bootstrap_counts,
    check_n_resamples,
    confidence_interval,
)
from humanlike.analysis.error_consistency import kappa_from_rates

_BISECTION_STEPS = 60


def pass_agreement(a: ArrayLike, gamma: ArrayLike) -> np.ndarray:
    """Return ``p_agree = 1 - 4 T(a, sqrt((1 - rho) / (1 + rho)))``, ``rho = 1 / (1 + gamma^2)``."""
    g2 = np.square(np.asarray(gamma, dtype=float))
    rho = 1.0 / (1.0 + g2)
    return 1.0 - 4.0 * owens_t(np.asarray(a, dtype=float), np.sqrt((1.0 - rho) / (1.0 + rho)))


def internal_noise(p_correct: ArrayLike, p_agree: ArrayLike, n: ArrayLike = np.inf) -> np.ndarray:
    """Internal-to-external noise ratio ``gamma`` from percent correct and pass agreement (elementwise).

    ``p_correct`` is kept inside ``[1/(2n), 1 - 1/(2n)]``; agreement at or below chance
    (``p^2 + (1 - p)^2``) gives ``inf``, agreement 1 gives 0.
    """
    n_arr = np.asarray(n, dtype=float)
    with np.errstate(divide="ignore"):
        half = np.where(np.isfinite(n_arr), 0.5 / n_arr, 1e-12)
    a = ndtri(np.clip(np.asarray(p_correct, dtype=float), half, 1.0 - half))
    target = (1.0 - np.asarray(p_agree, dtype=float)) / 4.0  # = T(a, q), increasing in q on [0, 1]
    a, target = np.broadcast_arrays(a, target)
    low, high = np.zeros(a.shape), np.ones(a.shape)
    for _ in range(_BISECTION_STEPS):  # vectorised bisection over every element at once
        mid = (low + high) / 2.0
        below = owens_t(a, mid) < target
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    q2 = np.square((low + high) / 2.0)
    rho = (1.0 - q2) / (1.0 + q2)
    with np.errstate(divide="ignore"):
        gamma = np.sqrt(1.0 / rho - 1.0)
    gamma = np.where(target >= owens_t(a, 1.0), np.inf, gamma)
    return np.where(target <= 0.0, 0.0, gamma)


def _bivariate_both(h: np.ndarray, k: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``Phi2(h, k; r) + Phi2(-h, -k; r)`` for h, k of one sign (Owen 1956, via Owen's T)."""
    h = np.where(np.abs(h) < 1e-12, 1e-12, h)
    k = np.where(np.abs(k) < 1e-12, 1e-12 * np.sign(h), k)
    s = np.sqrt(np.maximum(1.0 - r * r, 1e-300))
    t = owens_t(h, (k - r * h) / (h * s)) + owens_t(k, (h - r * k) / (k * s))
    # Phi2(h,k) = (Phi(h)+Phi(k))/2 - t; Phi2(-h,-k) = (Phi(-h)+Phi(-k))/2 - t (T is even in h)
    return 1.0 - 2.0 * t


def ceiling_agreement(p_correct: ArrayLike, gamma: ArrayLike) -> np.ndarray:
    """Agreement of the noise-free decision ``d + e > 0`` with the observer (its noise ceiling)."""
    a = ndtri(np.asarray(p_correct, dtype=float))
    g = np.asarray(gamma, dtype=float)
    finite = np.isfinite(g)
    g = np.where(finite, g, 0.0)  # infinite noise: the model's constant answer agrees max(p, 1-p)
    b = a * np.sqrt(1.0 + g * g)
    return np.where(finite, _bivariate_both(a, b, 1.0 / np.sqrt(1.0 + g * g)), ndtr(np.abs(a)))


@dataclass(frozen=True)
class DoublePassResult:
    """One observer's double-pass estimates, each with its percentile interval."""

    n: int
    p_correct: float
    p_agree: float
    internal_noise: float
    ceiling_agreement: float
    ceiling_kappa: float
    ci: dict[str, ConfidenceInterval]
    bootstrap_distribution: dict[str, np.ndarray] = field(repr=False)


def _estimates(first: np.ndarray, second: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
    """Every estimate for each row of trial weights ``w`` (resamples x trials), vectorised."""
    n = w.sum(axis=1)
    p_correct = (w @ (first.astype(float) + second)) / (2.0 * n)
    p_agree = (w @ (first == second).astype(float)) / n
    gamma = internal_noise(p_correct, p_agree, 2.0 * n)
    ceiling = ceiling_agreement(np.clip(p_correct, 0.25 / n, 1 - 0.25 / n), gamma)
    with np.errstate(invalid="ignore"):  # gamma = inf and p = .5 exactly: no model accuracy
        p_model = ndtr(ndtri(np.clip(p_correct, 0.25 / n, 1 - 0.25 / n)) * np.sqrt(1.0 + gamma**2))
    kappa = kappa_from_rates(ceiling, p_correct, p_model, degenerate="strict")
    return {"p_correct": p_correct, "p_agree": p_agree, "internal_noise": gamma,
            "ceiling_agreement": ceiling, "ceiling_kappa": kappa}


def double_pass(first: ArrayLike, second: ArrayLike, *, n_resamples: int = 1000,
                confidence_level: float = 0.95,
                random_state: RandomState = None) -> DoublePassResult:
    """Double-pass estimates from the correctness of the two passes of the same trials (Neri 2010)."""
    a = np.asarray(first, dtype=bool)
    b = np.asarray(second, dtype=bool)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"first and second must be equal-length 1-D correctness vectors of at "
                         f"least 2 repeated trials, got shapes {a.shape} and {b.shape}")
    n_resamples = check_n_resamples(n_resamples)
    counts = bootstrap_counts(a.size, n_resamples, as_rng(random_state)).astype(float)
    w = np.vstack([np.ones((1, a.size)), counts])
    values = _estimates(a, b, w)
    ci = {name: confidence_interval(v[1:], confidence_level) for name, v in values.items()}
    point = {name: float(v[0]) for name, v in values.items()}
    return DoublePassResult(n=int(a.size), ci=ci,
                            bootstrap_distribution={k: v[1:] for k, v in values.items()}, **point)


def double_pass_by_observer(trials: pd.DataFrame, *, observer: str = "participant",
                            n_resamples: int = 1000, confidence_level: float = 0.95,
                            random_state: RandomState = None) -> pd.DataFrame:
    """Per observer: double-pass estimates and CIs from trials ``stimulus, correct, is_repeat``.

    A first pass and its repeat are joined on (observer, stimulus); observers without repeats are
    left out. Columns: ``n``, then each estimate with ``_low``/``_high``.
    """
    missing = [c for c in (observer, "stimulus", "correct", "is_repeat") if c not in trials.columns]
    if missing:
        raise ValueError(f"trials lack column(s) {missing} needed for double-pass noise")
    keys = [observer, "stimulus"]
    repeat = trials["is_repeat"].astype(bool)
    pairs = trials.loc[~repeat, [*keys, "correct"]].drop_duplicates(keys).merge(
        trials.loc[repeat, [*keys, "correct"]].drop_duplicates(keys), on=keys,
        suffixes=("_first", "_second"))
    rng = as_rng(random_state)
    rows = []
    for name, group in pairs.groupby(observer, sort=True):
        if len(group) < 2:
            continue
        result = double_pass(group["correct_first"].to_numpy(bool),
                             group["correct_second"].to_numpy(bool), n_resamples=n_resamples,
                             confidence_level=confidence_level, random_state=rng)
        row: dict[str, object] = {observer: name, "n": result.n}
        for key, interval in result.ci.items():
            row[key] = getattr(result, key)
            row[f"{key}_low"], row[f"{key}_high"] = interval.low, interval.high
        rows.append(row)
    return pd.DataFrame(rows)
