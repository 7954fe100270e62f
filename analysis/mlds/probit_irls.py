"""Many probit GLMs at once: Newton-Raphson on stacked normal equations.

Each problem b has binomial counts ``y[b, r]`` successes out of ``n[b, r]`` trials on the rows
``X[r]`` of one shared design matrix, and ``P(success) = Phi(X[r] @ beta_b)`` with no intercept.
The log-likelihood is concave (log Phi is concave), so Newton-Raphson with the observed
information converges quadratically from any start (McCullagh & Nelder 1989):

    beta <- beta + H(beta)^-1 U(beta),   U = X^T [y lambda(eta) - (n - y) lambda(-eta)],
    H = X^T diag(y lambda(eta) (lambda(eta) + eta) + (n - y) lambda(-eta) (lambda(-eta) - eta)) X,

with ``lambda(t) = phi(t) / Phi(t)`` the inverse Mills ratio (from log Phi, so tails do not
underflow). The reported covariance is the inverse expected (Fisher) information
``X^T diag(n lambda(eta) lambda(-eta)) X``, as for a GLM fitted by IRLS. All problems move
together: one ``matmul`` forms the (B, P, P) matrices and one batched ``solve`` the steps;
problems that have converged leave the batch, and a step that lowers a problem's log-likelihood
is halved for that problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

#: Smallest accepted ratio of the extreme eigenvalues of the information at the estimate.
_MIN_RCOND = 1e-10


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


def _log_phi_pair(eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log Phi(eta), log Phi(-eta)) from one tail probability t = Phi(-|eta|): log t and
    log1p(-t) are both accurate; ``log_ndtr`` only where t underflows (|eta| > 37)."""
    tail = special.ndtr(-np.abs(eta))
    with np.errstate(divide="ignore"):
        log_small = np.log(tail)
    tiny = tail == 0.0
    if tiny.any():
        log_small[tiny] = special.log_ndtr(-np.abs(eta[tiny]))
    log_big = np.log1p(-tail)
    positive = eta >= 0
    return np.where(positive, log_big, log_small), np.where(positive, log_small, log_big)


class _State:
    """log Phi(+-eta) of a batch at its current coefficients, shared by likelihood and score."""

    def __init__(self, X: np.ndarray, beta: np.ndarray, y: np.ndarray, n: np.ndarray):
        self.eta = beta @ X.T
        self.log_p, self.log_q = _log_phi_pair(self.eta)
        self.loglik = np.sum(y * self.log_p + (n - y) * self.log_q, axis=-1)

    def score_and_information(
        self, X: np.ndarray, y: np.ndarray, n: np.ndarray, *, observed: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
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


def _finite(score: np.ndarray, info: np.ndarray) -> np.ndarray:
    """(B,) whether a problem's score and information are finite (its coefficients drifted far
    enough under separation that phi / Phi over- or underflow, and they are not)."""
    return np.isfinite(score).all(axis=1) & np.isfinite(info).all(axis=(1, 2))


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
    start: np.ndarray | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
    compute_cov: bool = True,
) -> ProbitBatchFit:
    """Maximum-likelihood probit coefficients for B count vectors on one design ``X`` (R, P).

    ``successes`` and ``trials`` are (B, R) (a 1-d vector is one problem); ``start`` (P,) or
    (B, P) are starting coefficients (default 0). A problem has converged when its largest
    Newton step is below ``tol * (1 + max |beta|)``; a (quasi-)separated problem, whose maximum
    likelihood estimate does not exist, never meets this or ends with a numerically singular
    information matrix (eigenvalue ratio below 1e-10), and is returned with ``converged = False``.
    ``compute_cov = False`` skips the covariance matrices (NaN).
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

    # identified iff X restricted to the observed rows has full column rank; checked once per
    # distinct pattern of observed rows (bootstrap replicates share their group's pattern)
    packed = np.packbits(n > 0, axis=1)  # row patterns as bytes, 8 rows per byte
    packed = np.pad(packed, ((0, 0), (0, -packed.shape[1] % 8))).view(np.uint64)
    if packed.shape[1] == 1:
        _, first, which = np.unique(packed[:, 0], return_index=True, return_inverse=True)
    else:
        _, first, which = np.unique(packed, axis=0, return_index=True, return_inverse=True)
    patterns = n[first] > 0
    gram = np.matmul(X.T[None, :, :] * patterns[:, None, :], X)
    identified = (np.linalg.matrix_rank(gram) == n_par)[which.ravel()]

    beta = np.zeros((n_problems, n_par))
    if start is not None:
        beta[:] = np.asarray(start, dtype=float)
    loglik = np.full(n_problems, np.nan)
    converged = np.zeros(n_problems, bool)
    n_iter = np.zeros(n_problems, int)
    active = np.flatnonzero(identified)
    state = _State(X, beta[active], y[active], n[active])
    for _ in range(max_iter):
        if active.size == 0:
            break
        with np.errstate(over="ignore", invalid="ignore"):  # a drifted problem's inf / NaN:
            score, hessian = state.score_and_information(  # _finite drops it just below
                X, y[active], n[active], observed=True)
        finite = _finite(score, hessian)
        if not finite.all():  # drifted past what floats hold (separation): leaves, not converged
            active, score, hessian = active[finite], score[finite], hessian[finite]
            for name in ("eta", "log_p", "log_q", "loglik"):
                setattr(state, name, getattr(state, name)[finite])
            if active.size == 0:
                break
        b, ya, na = beta[active], y[active], n[active]
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
        # the full Newton step (before halving) must be small: under (quasi-)separation the
        # log-likelihood flattens while the step stays large and the coefficients drift off
        done = np.max(np.abs(step), axis=1) <= tol * (1.0 + np.max(np.abs(new_beta), axis=1))
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
        # (quasi-)separation: the information matrix at the estimate is numerically singular
        # (condition ~1e-16), while well-posed MLDS fits sit near 1e-3; flag the former
        with np.errstate(over="ignore", invalid="ignore"):  # inf / NaN: _finite, just below
            score, info = score_and_information(X, beta[fitted], y[fitted], n[fitted])
        finite = _finite(score, info)  # LAPACK fails the whole batch on one inf / NaN matrix
        converged[fitted[~finite]] = False
        fitted, info = fitted[finite], info[finite]
        if fitted.size:
            eig = np.linalg.eigvalsh(info)
            with np.errstate(divide="ignore", invalid="ignore"):
                converged[fitted] &= eig[:, 0] > _MIN_RCOND * eig[:, -1]
            if compute_cov:
                try:
                    cov[fitted] = np.linalg.inv(info)
                except np.linalg.LinAlgError:
                    cov[fitted] = np.linalg.pinv(info)
    beta[~identified] = np.nan
    loglik[~identified] = np.nan
    return ProbitBatchFit(
        coef=beta,
        cov=cov,
        loglik=loglik,
        converged=converged,
        identified=identified,
        n_iter=n_iter,
    )
