"""Per observer: split response variance into shared, individual and internal-noise parts.

Latent model (the double-pass model of :mod:`double_pass`, for several observers): observer o is
right when ``d_o + e_o + i_o > 0``; the stimulus-driven part ``e_o`` (unit variance, the same on
both passes) holds a part shared with the other observers and an individual part, ``i_o`` is
internal noise. The latent correlation of two passes, ``rho_oo = 1 / (1 + gamma_o^2)``, is the
explainable (repeatable) share of observer o's variance; the latent (tetrachoric) correlation of two
observers' correctness, disattenuated by their repeatabilities, ``rho_ab / sqrt(rho_aa rho_bb)``
(Spearman 1904), is the shared share of their explainable variance. Per observer: ``shared =
rho_oo * mean_b disattenuated(o, b)``, ``individual = rho_oo - shared``, ``noise = 1 - rho_oo``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy.special import ndtri, owens_t

from humanlike.analysis._resampling import (
    RandomState,
    as_rng,
    bootstrap_counts,
    check_n_resamples,
    percentile_interval,
    quiet_nan_warnings,
)
from humanlike.analysis.alignment.double_pass import internal_noise

_BISECTION_STEPS = 50


def agreement(h: ArrayLike, k: ArrayLike, r: ArrayLike) -> np.ndarray:
    """``Phi2(h, k; r) + Phi2(-h, -k; r)``: P(two latent normals fall on the same side) (Owen 1956)."""
    h = np.asarray(h, dtype=float)
    k = np.asarray(k, dtype=float)
    r = np.asarray(r, dtype=float)
    h = np.where(np.abs(h) < 1e-12, 1e-12, h)
    k = np.where(np.abs(k) < 1e-12, 1e-12, k)
    s = np.sqrt(np.maximum(1.0 - r * r, 1e-300))
    t = owens_t(h, (k - r * h) / (h * s)) + owens_t(k, (h - r * k) / (k * s))
    return 1.0 - 2.0 * t - (h * k < 0)


def latent_correlation(a: ArrayLike, b: ArrayLike, p_agree: ArrayLike) -> np.ndarray:
    """Tetrachoric correlation r with ``agreement(a, b, r) = p_agree`` (vectorised bisection)."""
    a, b, target = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float),
                                       np.asarray(p_agree, float))
    low, high = np.full(a.shape, -1.0), np.ones(a.shape)
    for _ in range(_BISECTION_STEPS):  # agreement rises with r
        mid = (low + high) / 2.0
        below = agreement(a, b, mid) < target
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    return (low + high) / 2.0


@dataclass(frozen=True)
class VarianceSplit:
    """Per observer: explainable, shared, individual and noise shares with percentile intervals."""

    table: pd.DataFrame
    bootstrap: dict[str, np.ndarray] = field(repr=False)


def _split(first: np.ndarray, second: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
    """Shares for every row of stimulus weights ``w`` (resamples x stimuli): (B, observers) each."""
    n_obs = first.shape[0]
    n = w.sum(axis=1, keepdims=True)
    f, s = first.astype(np.float32), second.astype(np.float32)
    p = (w @ (f + s).T) / (2.0 * n)  # (B, O)
    self_agree = (w @ (first == second).T.astype(np.float32)) / n
    gamma = internal_noise(p, self_agree, 2.0 * n)
    explainable = 1.0 / (1.0 + gamma**2)
    half = 0.5 / (2.0 * n)
    z = ndtri(np.clip(p, half, 1.0 - half))
    a_idx, b_idx = np.triu_indices(n_obs, k=1)
    # between observers: agreement averaged over the four pass combinations
    both = [(x[a_idx] == y[b_idx]) for x in (first, second) for y in (first, second)]
    pair_agree = (w @ (sum(m.astype(np.float32) for m in both) / 4.0).T) / n
    r = latent_correlation(z[:, a_idx], z[:, b_idx], pair_agree)
    with np.errstate(invalid="ignore", divide="ignore"):
        disattenuated = r / np.sqrt(explainable[:, a_idx] * explainable[:, b_idx])
    full = np.full((w.shape[0], n_obs, n_obs), np.nan)
    full[:, a_idx, b_idx] = disattenuated
    full[:, b_idx, a_idx] = disattenuated
    with quiet_nan_warnings():
        shared_fraction = np.nanmean(full, axis=2)
    shared = explainable * shared_fraction
    return {"explainable": explainable, "shared": shared, "individual": explainable - shared,
            "noise": 1.0 - explainable}


def variance_split(first: ArrayLike, second: ArrayLike, observers: list[str] | None = None, *,
                   n_resamples: int = 1000, confidence_level: float = 0.95,
                   random_state: RandomState = None) -> VarianceSplit:
    """Shares per observer from correctness on two passes (observers x stimuli each), with CIs over
    stimulus resamples (the same for all observers)."""
    a = np.asarray(first, dtype=bool)
    b = np.asarray(second, dtype=bool)
    if a.ndim != 2 or a.shape != b.shape or a.shape[0] < 2 or a.shape[1] < 2:
        raise ValueError(f"first and second must be observers x stimuli arrays of the same shape "
                         f"with at least 2 observers and 2 stimuli, got {a.shape} and {b.shape}")
    names = observers or [f"observer-{i + 1}" for i in range(a.shape[0])]
    if len(names) != a.shape[0]:
        raise ValueError(f"{len(names)} observer names for {a.shape[0]} observers")
    n_resamples = check_n_resamples(n_resamples)
    counts = bootstrap_counts(a.shape[1], n_resamples, as_rng(random_state))
    w = np.vstack([np.ones((1, a.shape[1]), dtype=np.float32), counts])
    values = _split(a, b, w)
    table = pd.DataFrame({"observer": names})
    for name, v in values.items():
        table[name] = v[0]
        table[f"{name}_low"], table[f"{name}_high"] = percentile_interval(v[1:], confidence_level)
    return VarianceSplit(table, {k: v[1:] for k, v in values.items()})
