"""Many probit GLMs at once: Fisher scoring (IRLS) on stacked normal equations.

Each problem b has binomial counts ``y[b, r]`` successes out of ``n[b, r]`` trials on the rows
``X[r]`` of one shared design matrix, and ``P(success) = Phi(X[r] @ beta_b)`` with no intercept.
Fisher scoring (McCullagh & Nelder 1989, Sec. 2.5; identical to IRLS) updates every problem with

    beta <- beta + I(beta)^-1 U(beta),
    U = X^T [y lambda(eta) - (n - y) lambda(-eta)],   I = X^T diag(n lambda(eta) lambda(-eta)) X,

where ``lambda(t) = phi(t) / Phi(t)`` is the inverse Mills ratio (computed from ``log_ndtr`` so the
tails do not underflow). All problems move together: one ``matmul`` forms the (B, P, P) information
matrices and one batched ``solve`` the steps; problems that have converged leave the batch.
A step that lowers a problem's log-likelihood is halved (up to 30 times) for that problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special


@dataclass(frozen=True)
class ProbitBatchFit:
    """Results for B probit problems: ``coef`` (B, P), ``cov`` (B, P, P) = inverse Fisher
    information, ``loglik`` (B,) binomial log-likelihood without the log C(n, y) constant,
    ``converged`` (B,) and ``n_iter`` (B,). Problems whose design is rank deficient on the rows
    they observe are not fitted (NaN, ``identified = False``)."""

    coef: np.ndarray
    cov: np.ndarray
    loglik: np.ndarray
    converged: np.ndarray
    identified: np.ndarray
    n_iter: np.ndarray


def probit_loglik(eta: np.ndarray, y: np.ndarray, n: np.ndarray) -> np.ndarray:
    """sum_r y log Phi(eta) + (n - y) log Phi(-eta), over the last axis."""
    return np.sum(y * special.log_ndtr(eta) + (n - y) * special.log_ndtr(-eta), axis=-1)


class _State:
    """log Phi(+-eta) of a batch at its current coefficients, shared by likelihood and score."""

    def __init__(self, X: np.ndarray, beta: np.ndarray, y: np.ndarray, n: np.ndarray):
        self.eta = beta @ X.T
        self.log_p = special.log_ndtr(self.eta)
        self.log_q = special.log_ndtr(-self.eta)
        self.loglik = np.sum(y * self.log_p + (n - y) * self.log_q, axis=-1)

    def score_and_information(self, X: np.ndarray, y: np.ndarray, n: np.ndarray, *,
                              observed: bool = False) -> tuple[np.ndarray, np.ndarray]:
        log_pdf = -0.5 * self.eta**2 - 0.5 * np.log(2.0 * np.pi)
        lam_pos = np.exp(log_pdf - self.log_p)  # phi / Phi(eta), the inverse Mills ratio
        lam_neg = np.exp(log_pdf - self.log_q)  # phi / Phi(-eta)
        score = (y * lam_pos - (n - y) * lam_neg) @ X
        if observed:  # -d2 loglik / d eta2, positive because log Phi is concave
            weights = y * lam_pos * (lam_pos + self.eta) + (n - y) * lam_neg * (lam_neg - self.eta)
        else:  # expected information n phi^2 / (Phi (1 - Phi))
            weights = n * lam_pos * lam_neg
        info = np.matmul(X.T[None, :, :] * weights[:, None, :], X)
        return score, info


def score_and_information(
    X: np.ndarray, beta: np.ndarray, y: np.ndarray, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Score (B, P) and expected information (B, P, P) of B probit problems sharing ``X``."""
    return _State(X, beta, y, n).score_and_information(X, y, n)


def _solve(info: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(info, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:  # a numerically singular problem: pseudo-inverse for the batch
        return np.einsum("bpq,bq->bp", np.linalg.pinv(info), rhs)


def fit_probit_batch(
    X: np.ndarray,
    successes: np.ndarray,
    trials: np.ndarray,
    *,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> ProbitBatchFit:
    """Maximum-likelihood probit coefficients for B count vectors on one design ``X`` (R, P).

    ``successes`` and ``trials`` are (B, R) (a 1-d vector is one problem). A problem has converged
    when its largest coefficient step is below ``tol * (1 + max |beta|)``.
    """
    X = np.asarray(X, dtype=float)
    y = np.atleast_2d(np.asarray(successes, dtype=float))
    n = np.atleast_2d(np.asarray(trials, dtype=float))
    if X.ndim != 2 or y.shape != n.shape or y.shape[1] != X.shape[0]:
        raise ValueError(
            f"X must be (R, P) and successes/trials (B, R); got X {X.shape}, successes "
            f"{y.shape}, trials {n.shape}"
        )
    if np.any(n < 0) or np.any(y < 0) or np.any(y > n):
        raise ValueError("counts must satisfy 0 <= successes <= trials")
    n_problems, n_par = y.shape[0], X.shape[1]

    observed = (n > 0).astype(float)
    gram = np.matmul(X.T[None, :, :] * observed[:, None, :], X)
    identified = np.linalg.matrix_rank(gram) == n_par

    beta = np.zeros((n_problems, n_par))
    loglik = np.full(n_problems, np.nan)
    converged = np.zeros(n_problems, bool)
    n_iter = np.zeros(n_problems, int)
    active = np.flatnonzero(identified)
    state = _State(X, beta[active], y[active], n[active])
    for _ in range(max_iter):
        if active.size == 0:
            break
        b, ya, na = beta[active], y[active], n[active]
        score, hessian = state.score_and_information(X, ya, na, observed=True)
        step = _solve(hessian, score)
        scale = np.ones(active.size)
        new_beta = b + step
        new = _State(X, new_beta, ya, na)
        for _ in range(30):  # step halving, vectorised over the problems that got worse
            worse = new.loglik < state.loglik - 1e-12 * (1.0 + np.abs(state.loglik))
            if not worse.any():
                break
            scale[worse] *= 0.5
            new_beta[worse] = b[worse] + scale[worse, None] * step[worse]
            redo = _State(X, new_beta[worse], ya[worse], na[worse])
            for name in ("eta", "log_p", "log_q", "loglik"):
                getattr(new, name)[worse] = getattr(redo, name)
        beta[active] = new_beta
        loglik[active] = new.loglik
        n_iter[active] += 1
        moved = np.max(np.abs(scale[:, None] * step), axis=1)
        done = moved <= tol * (1.0 + np.max(np.abs(new_beta), axis=1))
        converged[active[done]] = True
        active = active[~done]
        keep = ~done
        state = new
        if not keep.all():
            for name in ("eta", "log_p", "log_q", "loglik"):
                setattr(state, name, getattr(state, name)[keep])

    cov = np.full((n_problems, n_par, n_par), np.nan)
    fitted = np.flatnonzero(identified)
    if fitted.size:
        _, info = score_and_information(X, beta[fitted], y[fitted], n[fitted])
        try:
            cov[fitted] = np.linalg.inv(info)
        except np.linalg.LinAlgError:
            cov[fitted] = np.linalg.pinv(info)
    beta[~identified] = np.nan
    loglik[~identified] = np.nan
    return ProbitBatchFit(
        coef=beta, cov=cov, loglik=loglik, converged=converged, identified=identified,
        n_iter=n_iter,
    )
