"""Error consistency (EC) of two observers: Cohen's kappa on trial-by-trial correctness, with uncertainty.

Geirhos, Meding & Wichmann (2020, NeurIPS, "Beyond accuracy"): two observers are error
consistent when they err on the same trials beyond what their accuracies predict. Klein, Meyen,
Brendel, Wichmann & Meding (2025, "Quantifying uncertainty in error consistency") add bootstrap
confidence intervals and significance tests (:mod:`~humanlike.analysis.error_consistency.significance`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from humanlike.analysis._resampling import (
    ConfidenceInterval,
    as_rng,
    batch_size,
    bootstrap_counts,
    check_confidence_level,
    check_n_resamples,
    confidence_interval,
    iter_batches,
)
from humanlike.analysis.error_consistency.kappa import (
    DEFAULT_DEGENERATE,
    Degenerate,
    as_correctness,
    check_degenerate,
    expected_consistency,
    kappa_from_rates,
)
from humanlike.analysis.error_consistency.significance import independence_pvalues


@dataclass(frozen=True)
class ErrorConsistencyResult:
    """Error consistency of two observers (Geirhos et al. 2020; Klein et al. 2025).

    ``kappa = (c_obs - c_exp) / (1 - c_exp)``; ``c_obs``: share of trials both got right or
    both got wrong; ``c_exp = p_a p_b + (1 - p_a)(1 - p_b)``; ``n``: trials; ``ci``: percentile
    bootstrap interval of kappa over resampled trials; ``p_value``: two-sided test against
    independent observers with the same accuracies (:func:`independence_test`);
    ``n_resamples_dropped``: resamples whose kappa is undefined under ``degenerate`` (a constant
    observer), left out of the CI, which then describes only the resamples with errors to compare.
    """

    kappa: float
    c_obs: float
    c_exp: float
    n: int
    ci: ConfidenceInterval[float]
    p_value: float
    accuracy_a: float
    accuracy_b: float
    confidence_level: float
    n_resamples_dropped: int = 0


def error_consistency(
    a: ArrayLike,
    b: ArrayLike,
    *,
    degenerate: Degenerate = DEFAULT_DEGENERATE,
    unbiased: bool = False,
    n_resamples: int = 10_000,
    n_sim: int = 10_000,
    confidence_level: float = 0.95,
    random_state: int | np.random.Generator | None = None,
) -> ErrorConsistencyResult:
    """Return kappa of correctness vectors ``a, b`` with bootstrap CI and independence p-value.

    Trials are resampled with replacement (``n_resamples`` resamples, vectorised as multinomial count
    rows times the trials-by-[agree, a, b] matrix); the p-value uses ``n_sim`` simulations of
    independent observers with Beta-posterior accuracies (Klein et al. 2025).
    """
    check_degenerate(degenerate)
    check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    a = as_correctness(a, "a")
    b = as_correctness(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length, got {a.size} and {b.size}")
    rng = as_rng(random_state)
    n = a.size
    c_obs, p_a, p_b = float(np.mean(a == b)), float(a.mean()), float(b.mean())
    kap = float(kappa_from_rates(c_obs, p_a, p_b, n, degenerate=degenerate, unbiased=unbiased))

    design = np.column_stack([a == b, a, b]).astype(np.float32)
    dist = np.empty(n_resamples)
    for sl in iter_batches(n_resamples, batch_size(n, n_resamples)):
        sums = (bootstrap_counts(n, sl.stop - sl.start, rng) @ design).astype(float) / n
        dist[sl] = kappa_from_rates(
            sums[:, 0], sums[:, 1], sums[:, 2], n, degenerate=degenerate, unbiased=unbiased
        )
    p_value = float(
        cast(
            np.ndarray,  # return_null=False: p-values only
            independence_pvalues(
                kap,
                a.sum(),
                b.sum(),
                n,
                n_sim=n_sim,
                degenerate=degenerate,
                unbiased=unbiased,
                random_state=rng,
            ),
        )
    )
    return ErrorConsistencyResult(
        kappa=kap,
        c_obs=c_obs,
        c_exp=float(expected_consistency(p_a, p_b)),
        n=n,
        ci=confidence_interval(dist, confidence_level),
        p_value=p_value,
        accuracy_a=p_a,
        accuracy_b=p_b,
        confidence_level=confidence_level,
        n_resamples_dropped=int(np.isnan(dist).sum()),
    )

