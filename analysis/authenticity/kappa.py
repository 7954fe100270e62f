"""Cohen's kappa with its large-sample variances (Fleiss, Cohen & Everitt 1969), vectorised over
tables: the variance under independence (for "does the response depend on the stimulus?") and the
variance at the estimate (for "is this agreement above a reference value?")."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def null_variance(p_e: ArrayLike, cross: ArrayLike, n: ArrayLike) -> np.ndarray:
    """Var(kappa) under independent raters: (p_e + p_e^2 - sum_k f_k g_k (f_k + g_k)) /
    (n (1 - p_e)^2), with ``cross`` = sum_k f_k g_k (f_k + g_k) (Fleiss et al. 1969, eq. 14)."""
    p_e, cross, n = (np.asarray(x, dtype=float) for x in (p_e, cross, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(p_e + p_e ** 2 - cross, 0.0) / (n * (1.0 - p_e) ** 2)


def kappa_2x2(both: ArrayLike, first: ArrayLike, second: ArrayLike, n: ArrayLike
              ) -> tuple[np.ndarray, np.ndarray]:
    """Kappa of two binary codings (here: correct / wrong) from the count of trials both code 1,
    each one's count of 1s and the trial count, with its large-sample variance at the estimate
    (Fleiss et al. 1969, eq. 13); NaN where either coding is constant (an observer right on every
    trial has no errors to agree on: kappa is 0 or undefined whatever the other does)."""
    both, first, second, n = (np.asarray(x, dtype=float) for x in (both, first, second, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        p11 = both / n
        p12 = (first - both) / n          # first 1, second 0
        p21 = (second - both) / n         # first 0, second 1
        p22 = 1.0 - p11 - p12 - p21
        r1, c1 = first / n, second / n    # margins of the 1s
        r2, c2 = 1.0 - r1, 1.0 - c1
        p_o = p11 + p22
        p_e = r1 * c1 + r2 * c2
        k = (p_o - p_e) / (1.0 - p_e)
        diag = (p11 * (1.0 - (r1 + c1) * (1.0 - k)) ** 2
                + p22 * (1.0 - (r2 + c2) * (1.0 - k)) ** 2)
        off = (1.0 - k) ** 2 * (p12 * (c1 + r2) ** 2 + p21 * (c2 + r1) ** 2)
        var = (diag + off - (k - p_e * (1.0 - k)) ** 2) / (n * (1.0 - p_e) ** 2)
    undefined = ~((r1 > 0) & (r1 < 1) & (c1 > 0) & (c1 < 1))
    k[undefined] = np.nan
    var[undefined] = np.nan
    return k, np.maximum(var, 0.0)


def reference_variance(first: ArrayLike, second: ArrayLike, n: ArrayLike,
                       reference: float) -> np.ndarray:
    """Var(kappa) at the table with the observed margins whose kappa is ``reference`` (the both-1
    count clipped to the margins' range where no table reaches it): the score test's variance,
    which holds its level where the variance at the estimate does not (0.0006 against 0.0023 at
    alpha 0.001, n 160: tests/analysis/authenticity/test_kappa.py)."""
    first, second, n = (np.asarray(x, dtype=float) for x in (first, second, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        r1, c1 = first / n, second / n
        p_e = r1 * c1 + (1 - r1) * (1 - c1)
        p_o = p_e + reference * (1 - p_e)
        both = np.clip((p_o - 1 + r1 + c1) / 2 * n, np.maximum(0.0, first + second - n),
                       np.minimum(first, second))
    return kappa_2x2(both, first, second, n)[1]
