"""The safe (group-invariant) one-sample t-test e-process: a Bayes factor with the right Haar prior
on sigma and a normal prior on the standardised effect (Perez-Ortiz, Lardy, de Heide & Grunwald
2024, Ann. Stat.; Grunwald, de Heide & Koolen 2024, JRSS-B §3). Exact under normal differences;
for bounded non-normal differences its level is checked by simulation (``bench/sequential.py``)."""

from __future__ import annotations

import numpy as np

from humanlike.analysis.sequential.running import running_t

PRIOR_G = 0.5  # prior variance of delta = mu/sigma: Rouder et al. 2009's default scale r = sqrt(2)/2


def log_safe_t(d: np.ndarray, g: float = PRIOR_G) -> np.ndarray:
    """log BF_n = -log(1 + n g)/2 + (nu + 1)/2 [log(1 + t^2/nu) - log(1 + t^2/(nu (1 + n g)))],
    nu = n - 1, for every prefix along axis 1 (Rouder et al. 2009, eq. 1 with a point g; a test
    martingale for the maximal invariant, Perez-Ortiz et al. 2024 Thm 3); 0 before n = 2."""
    t, n = running_t(d)
    nu = np.maximum(n - 1, 1).astype(float)
    t2 = np.nan_to_num(t * t, nan=0.0, posinf=np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        log_bf = -0.5 * np.log1p(n * g) + 0.5 * (nu + 1) * (
            np.log1p(t2 / nu) - np.log1p(t2 / (nu * (1 + n * g))))
    log_bf = np.where(np.isinf(t2), np.inf, log_bf)
    return np.where(n >= 2, log_bf, 0.0)
