"""Cohen's kappa on trial-by-trial correctness: the error-consistency statistic.

Geirhos, Meding & Wichmann (2020, NeurIPS, "Beyond accuracy: quantifying trial-by-trial
behaviour of CNNs and humans by measuring error consistency"), eqs. 1-3:
``c_obs`` = share of trials where both observers are right or both wrong,
``c_exp = p_a p_b + (1 - p_a)(1 - p_b)`` and ``kappa = (c_obs - c_exp) / (1 - c_exp)``.

Everything here is vectorised: :func:`kappa_from_rates` takes arrays of any (broadcastable) shape,
so the same code scores one pair, a whole matrix of pairs, or every bootstrap resample at once.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

Degenerate = Literal["undefined", "mvh", "strict", "klein2025"]
DEGENERATE_POLICIES: tuple[str, ...] = ("undefined", "mvh", "strict", "klein2025")
DEFAULT_DEGENERATE: Degenerate = "undefined"
"""Kappa is undefined (NaN) where either observer is at 0% or 100% accuracy: one observer's
correctness is then constant, ``c_obs = c_exp`` whatever the other does, and the kappa (0, or 1
by model-vs-human's convention where both are) measures the ceiling, not shared errors.
``"klein2025"`` is the convention of Klein et al.'s released code (``calculate_kappa``): NaN only
where ``c_exp = 1``, so one constant observer scores 0; its values equal ``"strict"``'s."""


def uninformative(p_a: ArrayLike, p_b: ArrayLike) -> np.ndarray:
    """Where either accuracy is 0 or 1 (a constant observer: kappa says nothing about errors)."""
    p_a, p_b = np.asarray(p_a, dtype=float), np.asarray(p_b, dtype=float)
    return (p_a <= 0.0) | (p_a >= 1.0) | (p_b <= 0.0) | (p_b >= 1.0)


def degenerate_reason(p_a: float, p_b: float, name_a: str = "a", name_b: str = "b") -> str:
    """Why a pair's kappa is undefined ('' when it is not): each constant observer's accuracy."""
    words = [f"{name} at {p:.0%} accuracy" for name, p in ((name_a, p_a), (name_b, p_b))
             if p <= 0.0 or p >= 1.0]
    return " and ".join(words) + (" (c_obs = c_exp: no errors to compare)" if words else "")


def check_degenerate(degenerate: str) -> None:
    """Raise ``ValueError`` unless ``degenerate`` names a known policy."""
    if degenerate not in DEGENERATE_POLICIES:
        raise ValueError(f"degenerate must be one of {DEGENERATE_POLICIES}, got {degenerate!r}")


def as_correctness(values: ArrayLike, name: str = "a") -> np.ndarray:
    """Return ``values`` as a 1-D boolean array, or raise ``ValueError`` naming ``name``."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D vector of correctness values, got shape {arr.shape}"
        )
    if arr.size == 0:
        raise ValueError(f"{name} is empty: error consistency needs at least one trial")
    if arr.dtype == bool:
        return arr
    try:
        numeric = arr.astype(float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must hold 0/1 or True/False correctness values") from None
    if not np.all((numeric == 0) | (numeric == 1)):
        raise ValueError(f"{name} must hold only 0/1 or True/False (found other values or NaN)")
    return numeric.astype(bool)


def expected_consistency(p_a: ArrayLike, p_b: ArrayLike) -> np.ndarray:
    """Return ``c_exp = p_a p_b + (1 - p_a)(1 - p_b)`` (Geirhos et al. 2020, eq. 2)."""
    p_a = np.asarray(p_a, dtype=float)
    p_b = np.asarray(p_b, dtype=float)
    return p_a * p_b + (1.0 - p_a) * (1.0 - p_b)


def kappa_from_rates(
    c_obs: ArrayLike,
    p_a: ArrayLike,
    p_b: ArrayLike,
    n: ArrayLike | None = None,
    *,
    degenerate: Degenerate = DEFAULT_DEGENERATE,
    unbiased: bool = False,
) -> np.ndarray:
    """Return ``kappa = (c_obs - c_exp) / (1 - c_exp)`` elementwise (Geirhos et al. 2020, eq. 3).

    ``degenerate="undefined"`` (the default): NaN where either accuracy is 0 or 1
    (:data:`DEFAULT_DEGENERATE`). ``degenerate="mvh"`` (model-vs-human, Brain-Score): kappa = 1
    wherever ``c_obs = 1``. ``degenerate="strict"``: NaN where ``c_exp = 1`` (both observers
    constant and equal); the formula gives 0 when exactly one observer is constant.
    ``degenerate="klein2025"``: the same values as ``"strict"``, named for Klein et al. (2025),
    whose code scores a constant observer 0. ``unbiased=True`` applies
    ``n kappa / ((n - 1) + kappa)`` (needs ``n``, the number of trials). Where ``n = 0`` the
    result is NaN.
    """
    check_degenerate(degenerate)
    if unbiased and n is None:
        raise ValueError("unbiased=True needs n, the number of trials")
    c_obs, p_a, p_b = np.broadcast_arrays(
        np.asarray(c_obs, dtype=float), np.asarray(p_a, dtype=float), np.asarray(p_b, dtype=float)
    )
    # 1 - c_exp = p_a + p_b - 2 p_a p_b, computed with few temporaries (arrays can be large)
    denom = p_a * p_b
    denom *= -2.0
    denom += p_a + p_b  # one sum, so the result is exactly symmetric in a and b
    num = c_obs - 1.0
    num += denom  # c_obs - c_exp
    kap = np.full(num.shape, np.nan)
    np.divide(num, denom, out=kap, where=denom > 0)
    if degenerate == "mvh":
        kap[c_obs >= 1.0] = 1.0
    elif degenerate == "undefined":
        kap[uninformative(p_a, p_b)] = np.nan
    if n is not None:
        n_arr = np.broadcast_to(np.asarray(n, dtype=float), kap.shape)
        if unbiased:
            with np.errstate(divide="ignore", invalid="ignore"):
                kap = np.asarray(n_arr * kap / ((n_arr - 1.0) + kap))
        kap[n_arr <= 0] = np.nan
    return kap


def kappa(
    a: ArrayLike,
    b: ArrayLike,
    *,
    degenerate: Degenerate = DEFAULT_DEGENERATE,
    unbiased: bool = False,
) -> float:
    """Return Cohen's kappa between correctness vectors ``a`` and ``b`` (Geirhos et al. 2020, eq. 3).

    See :func:`kappa_from_rates` for the degenerate-case policies and the small-sample
    correction ``n kappa / ((n - 1) + kappa)``.
    """
    a = as_correctness(a, "a")
    b = as_correctness(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length, got {a.size} and {b.size}")
    c_obs = np.mean(a == b)
    return float(
        kappa_from_rates(
            c_obs, a.mean(), b.mean(), a.size, degenerate=degenerate, unbiased=unbiased
        )
    )
