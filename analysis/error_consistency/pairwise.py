"""Error consistency (EC): Cohen's kappa on trial-by-trial correctness, with uncertainty.

Geirhos, Meding & Wichmann (2020, NeurIPS, "Beyond accuracy"): two observers are error
consistent when they err on the same trials beyond what their accuracies predict. Klein, Meyen,
Brendel, Wichmann & Meding (2025, "Quantifying uncertainty in error consistency") add bootstrap
confidence intervals, significance tests and a copy model for planning. This module is the
public entry point; the pieces live in small modules it re-exports:

* :mod:`~humanlike.analysis.error_consistency.kappa`: :func:`kappa`, :func:`kappa_from_rates` (vectorised);
* :mod:`~humanlike.analysis.error_consistency.bounds`: :func:`c_obs_bounds`, :func:`kappa_bounds`,
  :func:`kappa_max`, :func:`kappa_min`, :func:`null_band`;
* :mod:`~humanlike.analysis.error_consistency.matrix`: :func:`kappa_matrix` (pairs, hierarchy, bootstrap);
* :mod:`~humanlike.analysis.error_consistency.significance`: :func:`independence_test`, :func:`equal_ec_test`,
  :func:`compare_models`, :func:`holm_sidak`;
* :mod:`~humanlike.analysis.error_consistency.copy_model`: :func:`copy_model_params`,
  :func:`simulate_copy_model`, :func:`trials_needed`;
* :mod:`~humanlike.analysis.error_consistency.plots`: figures (imported lazily: matplotlib).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from humanlike.analysis.error_consistency.bootstrap import (
    ConfidenceInterval,
    as_rng,
    batch_size,
    bootstrap_counts,
    check_confidence_level,
    check_n_boot,
    iter_batches,
    percentile_interval,
)
from humanlike.analysis.error_consistency.bounds import (
    c_obs_bounds,
    c_obs_max,
    c_obs_min,
    kappa_bounds,
    kappa_max,
    kappa_min,
    null_band,
)
from humanlike.analysis.error_consistency.copy_model import (
    CopyModelParams,
    copy_model_params,
    joint_table,
    kappa_standard_error,
    simulate_copy_model,
    simulated_ci_halfwidth,
    trials_needed,
)
from humanlike.analysis.error_consistency.kappa import (
    Degenerate,
    as_correctness,
    check_degenerate,
    expected_consistency,
    kappa,
    kappa_from_rates,
)
from humanlike.analysis.error_consistency.matrix import KappaMatrix, condition_tables, kappa_matrix
from humanlike.analysis.error_consistency.significance import (
    EqualECTestResult,
    IndependenceTestResult,
    MultipleTestResult,
    compare_models,
    equal_ec_test,
    holm_sidak,
    independence_pvalues,
    independence_test,
)


@dataclass(frozen=True)
class ErrorConsistencyResult:
    """Error consistency of two observers (Geirhos et al. 2020; Klein et al. 2025).

    ``kappa = (c_obs - c_exp) / (1 - c_exp)``; ``c_obs``: share of trials both got right or
    both got wrong; ``c_exp = p_a p_b + (1 - p_a)(1 - p_b)``; ``n``: trials; ``ci``: percentile
    bootstrap interval of kappa over resampled trials; ``p_value``: two-sided test against
    independent observers with the same accuracies (:func:`independence_test`).
    """

    kappa: float
    c_obs: float
    c_exp: float
    n: int
    ci: ConfidenceInterval
    p_value: float
    accuracy_a: float
    accuracy_b: float
    confidence_level: float


def error_consistency(
    a: ArrayLike,
    b: ArrayLike,
    *,
    degenerate: Degenerate = "mvh",
    unbiased: bool = False,
    n_boot: int = 10_000,
    n_sim: int = 10_000,
    confidence_level: float = 0.95,
    random_state: int | np.random.Generator | None = None,
) -> ErrorConsistencyResult:
    """Return kappa of correctness vectors ``a, b`` with bootstrap CI and independence p-value.

    Trials are resampled with replacement (``n_boot`` resamples, vectorised as multinomial count
    rows times the trials-by-[agree, a, b] matrix); the p-value uses ``n_sim`` simulations of
    independent observers with Beta-posterior accuracies (Klein et al. 2025).
    """
    check_degenerate(degenerate)
    check_confidence_level(confidence_level)
    n_boot = check_n_boot(n_boot)
    a = as_correctness(a, "a")
    b = as_correctness(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length, got {a.size} and {b.size}")
    rng = as_rng(random_state)
    n = a.size
    c_obs, p_a, p_b = float(np.mean(a == b)), float(a.mean()), float(b.mean())
    kap = float(kappa_from_rates(c_obs, p_a, p_b, n, degenerate=degenerate, unbiased=unbiased))

    design = np.column_stack([a == b, a, b]).astype(np.float32)
    dist = np.empty(n_boot)
    for sl in iter_batches(n_boot, batch_size(n, n_boot)):
        sums = (bootstrap_counts(n, sl.stop - sl.start, rng) @ design).astype(float) / n
        dist[sl] = kappa_from_rates(
            sums[:, 0], sums[:, 1], sums[:, 2], n, degenerate=degenerate, unbiased=unbiased
        )
    low, high = percentile_interval(dist, confidence_level)
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
        ci=ConfidenceInterval(float(low), float(high)),
        p_value=p_value,
        accuracy_a=p_a,
        accuracy_b=p_b,
        confidence_level=confidence_level,
    )


__all__ = [
    "ConfidenceInterval",
    "CopyModelParams",
    "Degenerate",
    "EqualECTestResult",
    "ErrorConsistencyResult",
    "IndependenceTestResult",
    "KappaMatrix",
    "MultipleTestResult",
    "c_obs_bounds",
    "c_obs_max",
    "c_obs_min",
    "compare_models",
    "condition_tables",
    "copy_model_params",
    "equal_ec_test",
    "error_consistency",
    "expected_consistency",
    "holm_sidak",
    "independence_pvalues",
    "independence_test",
    "joint_table",
    "kappa",
    "kappa_bounds",
    "kappa_from_rates",
    "kappa_matrix",
    "kappa_max",
    "kappa_min",
    "kappa_standard_error",
    "null_band",
    "simulate_copy_model",
    "simulated_ci_halfwidth",
    "trials_needed",
]
