"""Maximum Likelihood Difference Scaling (Maloney & Yang 2003; Knoblauch & Maloney 2008).

The observer judges which of two intervals on a perceptual scale psi is larger, with Gaussian
decision noise. For a triad (a < b < c) the decision variable is
``Delta = (psi_c - psi_b) - (psi_b - psi_a) + eps`` and for a quadruple (a, b; c, d)
``Delta = (psi_d - psi_c) - (psi_b - psi_a) + eps``, ``eps ~ N(0, sigma^2)``; the response is 1
(second interval larger) when ``Delta > 0``. With ``psi_1 = 0`` and unit noise this is a probit
GLM without intercept whose design row holds +1, -2, +1 (triads) or +1, -1, -1, +1 (quadruples) at
the levels (Knoblauch & Maloney 2008, J. Stat. Softw. 25(2), the GLM formulation). Dividing by the
top value gives the standard scale (0 to 1) and sigma = 1 / psi_N.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import optimize, special
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from humanlike.analysis._resampling import ConfidenceInterval, confidence_interval
from humanlike.analysis.mlds.batch import bootstrap_coefs, scales_from_coef
from humanlike.analysis.mlds.data import (
    Design,
    canonical_trials,
    check_design,
    check_levels_present,
    count_trials,
    design_matrix,
    infer_n_levels,
)
from humanlike.analysis.mlds.probit_irls import (
    fit_probit_batch,
    probit_loglik,
    score_and_information,
)

METHODS = ("glm", "optim", "irls")


@dataclass(frozen=True)
class MLDSBootstrap:
    """Parametric bootstrap of an MLDS fit (Knoblauch & Maloney 2008, ``boot.mlds``).

    ``scale_std`` (n_resamples, N) and ``sigma`` (n_resamples,): refitted standard scales and
    noise, NaN for replicates that did not converge (``n_failed``); ``ci`` (N,): percentile limits
    of the standard scale at ``confidence_level``; ``sigma_ci``: the interval of sigma;
    ``standard_error`` (N,): bootstrap standard deviation of the standard scale.
    """

    scale_std: np.ndarray = field(repr=False)
    sigma: np.ndarray = field(repr=False)
    ci: ConfidenceInterval[np.ndarray]
    sigma_ci: ConfidenceInterval[float]
    standard_error: np.ndarray
    confidence_level: float
    n_failed: int


class MLDS(BaseEstimator):
    """Fit a difference scale to triad or quadruple judgements by maximum likelihood.

    A scikit-learn estimator: ``__init__`` stores the parameters, ``fit`` learns the attributes
    ending in ``_`` and returns ``self``; ``bootstrap`` needs a fit.

    Parameters
    ----------
    design : "triads" or "quadruples".
    method : "glm" (statsmodels GLM, Binomial family with probit link, as R's ``mlds``),
        "optim" (direct maximisation of the likelihood over the standard scale and log sigma
        with scipy.optimize, like R's ``method = "optim"`` without the [0, 1] constraint), or
        "irls" (this package's batched Fisher scoring with one problem).
    n_levels : number of stimulus levels N (default: the highest level in the data).
    random_state : seed or generator of the bootstrap (when ``bootstrap`` is given none).

    Attributes (after ``fit``)
    --------------------------
    scale_ : (N,) psi with psi_1 = 0 and unit decision noise. scale_std_ : scale_ / psi_N.
    sigma_ : 1 / psi_N, the noise on the standard scale. se_ : (N,) standard errors of ``scale_``
    (inverse expected information; 0 for level 1). cov_ : (N-1, N-1) covariance of psi_2..psi_N.
    loglik_ : Bernoulli log-likelihood of the trials. aic_ : -2 loglik + 2 (N - 1).
    daf_ : deviance accounted for, 1 - deviance / null deviance (eta = 0) (Wood 2006, p. 84).
    fitted_ : (n,) P(response = 1) of each trial in canonical order. data_ : the trials in
    canonical order (R layout ``resp, S1, ...``). n_levels_, n_trials_, converged_.
    """

    def __init__(
        self,
        design: Design = "triads",
        *,
        method: str = "glm",
        n_levels: int | None = None,
        random_state: int | np.random.Generator | None = None,
    ):
        self.design = design
        self.method = method
        self.n_levels = n_levels
        self.random_state = random_state

    def fit(self, df: pd.DataFrame, y: None = None) -> MLDS:
        """Fit the scale of one sequence (tidy export or R layout; all participants pooled).

        ``y`` is ignored (the responses are a column of ``df``); it is there for scikit-learn.
        """
        check_design(self.design)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if "sequence" in df.columns and df["sequence"].nunique(dropna=False) > 1:
            raise ValueError(
                f"column 'sequence' holds {df['sequence'].nunique(dropna=False)} sequences; fit "
                "one sequence at a time or use humanlike.analysis.mlds.fit_many"
            )
        trials = canonical_trials(df, self.design)
        n_levels = infer_n_levels(trials, self.n_levels)
        check_levels_present(trials, n_levels)
        counts = count_trials(trials, n_levels)
        X = design_matrix(counts.rows, n_levels, self.design)
        k, n = counts.successes[0], counts.trials[0]
        if self.method == "glm":
            coef, converged = _fit_statsmodels(X, k, n)
        elif self.method == "optim":
            coef, converged = _fit_optim(X, k, n)
        else:
            fit = fit_probit_batch(X, k, n)
            coef, converged = fit.coef[0], bool(fit.converged[0])
        _, info = score_and_information(X, coef[None], k[None], n[None])
        eig = np.linalg.eigvalsh(info[0])
        if not eig[0] > 1e-10 * eig[-1]:  # (quasi-)separated: the MLE does not exist
            converged = False
        try:
            cov = np.linalg.inv(info[0])
        except np.linalg.LinAlgError:
            cov = np.linalg.pinv(info[0])

        self.n_levels_ = n_levels
        self.n_trials_ = trials.n_trials
        self.converged_ = converged
        self.coef_ = coef
        self.scale_, self.scale_std_, sigma = scales_from_coef(coef)
        self.sigma_ = float(sigma)
        self.cov_ = cov
        self.se_ = np.concatenate([[0.0], np.sqrt(np.diag(cov))])
        self.loglik_ = float(probit_loglik(X @ coef, k, n))
        self.aic_ = -2.0 * self.loglik_ + 2.0 * X.shape[1]
        self.daf_ = 1.0 - self.loglik_ / (trials.n_trials * np.log(0.5))
        self.fitted_ = special.ndtr(X @ coef)[counts.row_of_trial]
        self.data_ = trials.to_frame()
        self._counts = counts
        self._X = X
        return self

    def bootstrap(
        self,
        n_resamples: int = 1000,
        *,
        confidence_level: float = 0.95,
        random_state: int | np.random.Generator | None = None,
    ) -> MLDSBootstrap:
        """Parametric bootstrap: responses simulated from the fitted probabilities, all
        ``n_resamples`` response sets refitted in one batched fit; percentile CIs per level.
        ``random_state`` defaults to the estimator's."""
        check_is_fitted(self)
        if random_state is None:
            random_state = self.random_state
        if n_resamples < 2:
            raise ValueError(f"n_resamples must be at least 2, got {n_resamples}")
        p = special.ndtr(self._X @ self.coef_)
        coefs = bootstrap_coefs(
            self._X, p, self._counts.trials[0], n_resamples, random_state, start=self.coef_[None]
        )[0]
        _, scale_std, sigma = scales_from_coef(coefs)
        return MLDSBootstrap(
            scale_std=scale_std,
            sigma=sigma,
            ci=confidence_interval(scale_std, confidence_level, axis=0),
            sigma_ci=confidence_interval(sigma, confidence_level),
            standard_error=np.nanstd(scale_std, axis=0, ddof=1),
            confidence_level=confidence_level,
            n_failed=int(np.isnan(sigma).sum()),
        )



def _fit_statsmodels(X: np.ndarray, y: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, bool]:
    import statsmodels.api as sm

    family = sm.families.Binomial(link=sm.families.links.Probit())
    model = sm.GLM(np.column_stack([y, n - y]), X, family=family)
    res = model.fit(method="IRLS", tol=1e-12, tol_criterion="params", maxiter=200)
    return np.asarray(res.params, dtype=float), bool(res.converged)


def _fit_optim(X: np.ndarray, y: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, bool]:
    """Minimise the negative log-likelihood over theta = (psi_2..psi_{N-1}, log sigma) of the
    standard scale (psi_1 = 0, psi_N = 1); eta = X_std psi / sigma."""
    inner, last = X[:, :-1], X[:, -1]

    def nll(theta: np.ndarray) -> tuple[float, np.ndarray]:
        sigma = np.exp(theta[-1])
        eta = (inner @ theta[:-1] + last) / sigma
        log_pdf = -0.5 * eta**2 - 0.5 * np.log(2.0 * np.pi)
        g = y * np.exp(log_pdf - special.log_ndtr(eta)) - (n - y) * np.exp(
            log_pdf - special.log_ndtr(-eta)
        )
        value = -probit_loglik(eta, y, n)
        grad = np.concatenate([-(g @ inner) / sigma, [g @ eta]])
        return float(value), grad

    n_par = X.shape[1]
    start = np.concatenate([np.arange(1, n_par) / n_par, [np.log(0.2)]])
    res = optimize.minimize(
        nll, start, jac=True, method="BFGS", options={"gtol": 1e-10, "maxiter": 10_000}
    )
    sigma = np.exp(res.x[-1])
    coef = np.concatenate([res.x[:-1], [1.0]]) / sigma
    return coef, bool(res.success or np.max(np.abs(res.jac)) < 1e-4)
