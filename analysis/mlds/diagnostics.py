"""Diagnostics of an MLDS fit by simulation: the six-point test and the runs test.

Both simulate an observer who follows the fitted model (responses drawn from the fitted
probabilities of every trial), refit the scale to each simulated data set (all simulations in one
batched Newton fit), and compare the observed statistic with its simulated distribution
(Maloney & Yang 2003, the six-point test; Knoblauch & Maloney 2008, "Diagnostic tests" and
"Goodness of fit", R's
``simu.6pt`` and ``binom.diagnostics``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from scipy import special
from sklearn.utils.validation import check_is_fitted

from humanlike.analysis.mlds.data import row_codes
from humanlike.analysis.mlds.estimator import MLDS
from humanlike.analysis.mlds.probit_irls import fit_probit_batch

#: Simulated responses (simulations x trials) held in memory at once.
_SIM_CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class SixPointTest:
    """Six-point test of a quadruple MLDS fit (Maloney & Yang 2003).

    For each of the ``n_conditions`` six-point triples (A, B, E) whose A and B responses agree
    (``n_applicable``), E either follows them or is a violation (``n_violations``).
    ``violation_loglik`` is log Lambda_6 = sum_k log P(observed outcome_k | A and B agree) under
    the fitted scale (Maloney & Yang 2003; Knoblauch & Maloney 2008, "The six-point test"), and
    ``p_value`` the fraction of observers simulated from the fit (and refitted) with a value
    <= the observed one: small means more, or more improbable, violations than a
    difference-scale observer makes. ``loglik`` is R's ``lik6pt`` (the log-likelihood of all
    responses in the triples) with its own simulated ``loglik_p_value``; ``null_distribution``
    holds the simulated ``violation_loglik``; ``n_failed`` counts refits that did not converge."""

    violation_loglik: float
    p_value: float
    n_violations: int
    n_applicable: int
    n_conditions: int
    loglik: float
    loglik_p_value: float
    null_distribution: np.ndarray = field(repr=False)
    n_failed: int


@dataclass(frozen=True)
class RunsTest:
    """Runs test on deviance residuals ordered by fitted probability (Wood 2006).

    ``n_runs``: number of runs of equal residual sign (R's ``ObsRuns`` counts the sign changes,
    i.e. ``n_runs - 1``); ``null_distribution``: runs in simulated-and-refitted data;
    ``p_value``: fraction of simulations with no more runs than observed (small: too few runs,
    residuals depend on the fitted value, the link or the scale misfits)."""

    n_runs: int
    null_distribution: np.ndarray = field(repr=False)
    p_value: float
    n_failed: int


def six_point_conditions(model: MLDS) -> np.ndarray:
    """(K, 3) trial indices of the six-point triples in a fitted quadruple design.

    For a < b < c and a' < b' < c' with a < a', the quadruples (a, b; a', b'), (b, c; b', c') and
    (a, c; a', c') form a six-point condition if all three were presented; the first presentation
    of each is used (Maloney & Yang 2003; R's ``Get6pts``)."""
    _check(model)
    if model.design != "quadruples":
        raise ValueError(
            "the six-point test needs a quadruple design (design='quadruples'); "
            "triads share their middle stimulus and form no six-point conditions"
        )
    n = model.n_levels_
    triples = np.array(list(combinations(range(1, n + 1), 3)))
    i, j = np.meshgrid(np.arange(len(triples)), np.arange(len(triples)), indexing="ij")
    first, second = triples[i.ravel()], triples[j.ravel()]
    keep = first[:, 0] < second[:, 0]
    (a, b, c), (a2, b2, c2) = first[keep].T, second[keep].T
    codes = row_codes(model.data_[["S1", "S2", "S3", "S4"]].to_numpy(), n)
    uniq, first_trial = np.unique(codes, return_index=True)

    def lookup(*cols: np.ndarray) -> np.ndarray:
        code = row_codes(tuple(cols), n)
        pos = np.clip(np.searchsorted(uniq, code), 0, len(uniq) - 1)
        return np.where(uniq[pos] == code, first_trial[pos], -1)

    idx = np.column_stack([lookup(a, b, a2, b2), lookup(b, c, b2, c2), lookup(a, c, a2, c2)])
    return idx[(idx >= 0).all(axis=1)]


def six_point_test(
    model: MLDS, n_sim: int = 1000, *, random_state: int | np.random.Generator | None = None
) -> SixPointTest:
    """Six-point test of a fitted quadruple MLDS model by simulation (see module doc)."""
    conditions = six_point_conditions(model)
    if conditions.size == 0:
        raise ValueError("the trials contain no complete six-point condition")

    def statistic(y: np.ndarray, eta: np.ndarray) -> np.ndarray:
        return np.column_stack(_six_point_statistics(y, eta, conditions)[:2])

    y = model.data_["resp"].to_numpy()
    violation_ll, loglik, n_viol, n_app = _six_point_statistics(
        y[None], _eta(model)[None], conditions
    )
    null = _simulate(model, n_sim, random_state, statistic)
    ok = np.isfinite(null).all(axis=1)
    return SixPointTest(
        violation_loglik=float(violation_ll[0]),
        p_value=float(np.mean(null[ok, 0] <= violation_ll[0])),
        n_violations=int(n_viol[0]),
        n_applicable=int(n_app[0]),
        n_conditions=len(conditions),
        loglik=float(loglik[0]),
        loglik_p_value=float(np.mean(null[ok, 1] <= loglik[0])),
        null_distribution=null[ok, 0],
        n_failed=int((~ok).sum()),
    )


def _six_point_statistics(
    y: np.ndarray, eta: np.ndarray, conditions: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row of (m, n) responses and linear predictors: log Lambda_6, R's lik6pt, the number
    of violations and of applicable conditions. Responses of a triple are independent given the
    scale, so P(violation | A = B) = [pA pB (1 - pE) + qA qB pE] / [pA pB + qA qB]."""
    ys = [y[:, conditions[:, j]] for j in range(3)]
    lp = [special.log_ndtr(eta[:, conditions[:, j]]) for j in range(3)]
    lq = [special.log_ndtr(-eta[:, conditions[:, j]]) for j in range(3)]
    both_one, both_zero = lp[0] + lp[1], lq[0] + lq[1]
    log_agree = np.logaddexp(both_one, both_zero)
    log_violate = np.logaddexp(both_one + lq[2], both_zero + lp[2]) - log_agree
    log_follow = np.logaddexp(both_one + lp[2], both_zero + lq[2]) - log_agree
    applicable = ys[0] == ys[1]
    violated = applicable & (ys[2] != ys[0])
    violation_ll = np.sum(
        np.where(applicable, np.where(violated, log_violate, log_follow), 0.0), axis=1
    )
    loglik = sum(
        np.sum(yj * lpj + (1 - yj) * lqj, axis=1) for yj, lpj, lqj in zip(ys, lp, lq, strict=True)
    )
    return violation_ll, loglik, violated.sum(axis=1), applicable.sum(axis=1)


def runs_test(
    model: MLDS, n_sim: int = 1000, *, random_state: int | np.random.Generator | None = None
) -> RunsTest:
    """Runs test on the signs of the deviance residuals sorted by fitted value (see module doc)."""
    _check(model)
    y = model.data_["resp"].to_numpy()
    observed = int(_count_runs(y[None], _eta(model)[None])[0])
    null = _simulate(model, n_sim, random_state, _count_runs)
    ok = np.isfinite(null)
    return RunsTest(
        n_runs=observed,
        null_distribution=null[ok].astype(int),
        p_value=float(np.mean(null[ok] <= observed)),
        n_failed=int((~ok).sum()),
    )


def _eta(model: MLDS) -> np.ndarray:
    return model._X[model._counts.row_of_trial] @ model.coef_


def _count_runs(y: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """Runs of equal deviance-residual sign (sign(y - p) = sign of y for 0 < p < 1) in the order
    of increasing fitted probability p = Phi(eta), ties kept in trial order; one count per row."""
    order = np.argsort(special.ndtr(eta), axis=1, kind="stable")
    signs = np.take_along_axis(y, order, axis=1)
    return 1 + np.count_nonzero(signs[:, 1:] != signs[:, :-1], axis=1)


def _simulate(model: MLDS, n_sim: int, random_state, statistic) -> np.ndarray:
    """Statistic(s) of ``n_sim`` data sets simulated from the fit and refitted: (n_sim,) or
    (n_sim, k), NaN where the refit did not converge."""
    if n_sim < 1:
        raise ValueError(f"n_sim must be positive, got {n_sim}")
    rng = np.random.default_rng(random_state)
    X, counts = model._X, model._counts
    rows = counts.row_of_trial
    X_trials = X[rows]
    n_trials, n_rows = rows.size, X.shape[0]
    out: np.ndarray | None = None
    chunk = max(1, min(n_sim, _SIM_CHUNK_ELEMENTS // max(1, n_trials)))
    for start in range(0, n_sim, chunk):  # memory-bounded chunks, each one batched refit
        m = min(chunk, n_sim - start)
        y_sim = (rng.random((m, n_trials)) < model.fitted_).astype(np.int64)
        cell = (np.arange(m)[:, None] * n_rows + rows).ravel()
        succ = np.bincount(cell, weights=y_sim.ravel(), minlength=m * n_rows).reshape(m, n_rows)
        trials = np.broadcast_to(counts.trials[0], (m, n_rows))
        fit = fit_probit_batch(X, succ, trials, start=model.coef_, compute_cov=False)
        eta = np.nan_to_num(fit.coef) @ X_trials.T
        values = np.asarray(statistic(y_sim, eta), dtype=float)
        if out is None:
            out = np.full((n_sim, *values.shape[1:]), np.nan)
        failed = ~fit.converged.reshape((-1,) + (1,) * (values.ndim - 1))
        out[start : start + m] = np.where(failed, np.nan, values)
    assert out is not None  # n_sim >= 1, so the loop ran at least once
    return out


def _check(model: MLDS) -> None:
    if not isinstance(model, MLDS):
        raise ValueError("pass a fitted humanlike.analysis.mlds.MLDS instance")
    check_is_fitted(model)
