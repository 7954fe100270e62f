"""Diagnostics of an MLDS fit by simulation: the six-point test and the runs test.

Both simulate an observer who follows the fitted model (responses drawn from the fitted
probabilities of every trial), refit the scale to each simulated data set (all simulations in one
batched Newton fit), and compare the observed statistic with its simulated distribution
(Maloney & Yang 2003, Sec. "Six-point test"; Knoblauch & Maloney 2008, Sec. 2.4 and 4.4, R's
``simu.6pt`` and ``binom.diagnostics``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
from humanlike.analysis.mlds import MLDS
from humanlike.analysis.mlds_data import row_codes
from humanlike.analysis.probit_irls import fit_probit_batch
from scipy import special

#: Simulated responses (simulations x trials) held in memory at once.
_SIM_CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class SixPointTest:
    """Six-point test. ``loglik``: log-likelihood, under the fitted scale, of the responses in
    the ``n_conditions`` six-point triples (R's ``lik6pt``); ``null_distribution``: the same
    statistic for observers simulated from the fit and refitted; ``p_value``: fraction of
    simulations with a statistic <= ``loglik`` (small: more six-point violations than a
    difference-scale observer makes); ``n_failed``: simulations whose refit did not converge."""

    loglik: float
    null_distribution: np.ndarray
    p_value: float
    n_conditions: int
    n_failed: int


@dataclass(frozen=True)
class RunsTest:
    """Runs test on deviance residuals ordered by fitted probability (Wood 2006).

    ``n_runs``: number of runs of equal residual sign (R's ``ObsRuns`` counts the sign changes,
    i.e. ``n_runs - 1``); ``null_distribution``: runs in simulated-and-refitted data;
    ``p_value``: fraction of simulations with no more runs than observed (small: too few runs,
    residuals depend on the fitted value, the link or the scale misfits)."""

    n_runs: int
    null_distribution: np.ndarray
    p_value: float
    n_failed: int


def six_point_conditions(model: MLDS) -> np.ndarray:
    """(K, 3) trial indices of the six-point triples in a fitted quadruple design.

    For a < b < c and a' < b' < c' with a < a', the quadruples (a, b; a', b'), (b, c; b', c') and
    (a, c; a', c') form a six-point condition if all three were presented; the first presentation
    of each is used (Maloney & Yang 2003; R's ``Get6pts``)."""
    _check(model)
    if model.design != "quadruples":
        raise ValueError("the six-point test needs a quadruple design (design='quadruples'); "
                         "triads share their middle stimulus and form no six-point conditions")
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


def six_point_test(model: MLDS, n_sim: int = 1000, *,
                   random_state: int | np.random.Generator | None = None) -> SixPointTest:
    """Six-point test of a fitted quadruple MLDS model by simulation (see module doc)."""
    conditions = six_point_conditions(model).ravel()
    if conditions.size == 0:
        raise ValueError("the trials contain no complete six-point condition")
    def statistic(y: np.ndarray, eta: np.ndarray) -> np.ndarray:
        ys, es = y[:, conditions], eta[:, conditions]
        return np.sum(ys * special.log_ndtr(es) + (1 - ys) * special.log_ndtr(-es), axis=1)

    y = model.data_["resp"].to_numpy()
    observed = float(statistic(y[None], _eta(model)[None])[0])

    null = _simulate(model, n_sim, random_state, statistic)
    ok = np.isfinite(null)
    return SixPointTest(
        loglik=observed,
        null_distribution=null[ok],
        p_value=float(np.mean(null[ok] <= observed)),
        n_conditions=conditions.size // 3,
        n_failed=int((~ok).sum()),
    )


def runs_test(model: MLDS, n_sim: int = 1000, *,
              random_state: int | np.random.Generator | None = None) -> RunsTest:
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
    """Statistic of ``n_sim`` data sets simulated from the fit and refitted (NaN if not converged)."""
    if n_sim < 1:
        raise ValueError(f"n_sim must be positive, got {n_sim}")
    rng = np.random.default_rng(random_state)
    X, counts = model._X, model._counts
    rows = counts.row_of_trial
    X_trials = X[rows]
    n_trials, n_rows = rows.size, X.shape[0]
    out = np.full(n_sim, np.nan)
    chunk = max(1, min(n_sim, _SIM_CHUNK_ELEMENTS // max(1, n_trials)))
    for start in range(0, n_sim, chunk):  # memory-bounded chunks, each one batched refit
        m = min(chunk, n_sim - start)
        y_sim = (rng.random((m, n_trials)) < model.fitted_).astype(np.int64)
        cell = (np.arange(m)[:, None] * n_rows + rows).ravel()
        succ = np.bincount(cell, weights=y_sim.ravel(), minlength=m * n_rows).reshape(m, n_rows)
        trials = np.broadcast_to(counts.trials[0], (m, n_rows))
        fit = fit_probit_batch(X, succ, trials)
        eta = np.nan_to_num(fit.coef) @ X_trials.T
        values = statistic(y_sim, eta).astype(float)
        out[start:start + m] = np.where(fit.converged, values, np.nan)
    return out


def _check(model: MLDS) -> None:
    if not isinstance(model, MLDS) or not hasattr(model, "coef_"):
        raise ValueError("pass a fitted humanlike.analysis.mlds.MLDS instance")
