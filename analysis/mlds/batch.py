"""Fit many MLDS scales at once (one per sequence, participant, ...) with one batched probit fit.

Every group's trials are collapsed to binomial counts on the distinct level tuples of the whole
data set (35 rows for all triads of 7 levels), so each group is a probit GLM on a shared design
matrix; :func:`humanlike.analysis.mlds.probit_irls.fit_probit_batch` then runs Fisher scoring on all
groups' stacked normal equations together. The estimates are the maximum-likelihood estimates of
fitting each group alone (Knoblauch & Maloney 2008, J. Stat. Softw. 25(2)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from humanlike.analysis._resampling import ConfidenceInterval, confidence_interval
from humanlike.analysis.mlds.data import (
    Design,
    canonical_trials,
    count_trials,
    design_matrix,
    infer_n_levels,
)
from humanlike.analysis.mlds.probit_irls import fit_probit_batch

#: Bootstrap problems (replicates x groups x distinct rows x parameters) held in memory at once.
_BOOT_CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class ScaleFits:
    """MLDS scales of G groups on N levels.

    ``keys``: one row per group (the ``by`` columns); ``scale`` (G, N): psi with psi_1 = 0 and
    unit decision noise (R's ``pscale``); ``scale_std`` = scale / psi_N (the standard scale, 0 to
    1); ``sigma`` = 1 / psi_N (noise on the standard scale); ``se`` (G, N): asymptotic standard
    errors of ``scale``; ``loglik``: Bernoulli log-likelihood of the trials; ``n_trials``;
    ``converged`` / ``identified``: whether Fisher scoring converged and every level was observed.
    With a bootstrap of ``n_resamples`` replicates, ``ci`` holds (G, N) percentile limits of
    ``scale_std`` and ``sigma_ci`` (G,) limits of ``sigma``; ``n_failed`` (G,) counts replicates
    that did not converge.
    """

    keys: pd.DataFrame
    scale: np.ndarray
    scale_std: np.ndarray
    sigma: np.ndarray
    se: np.ndarray
    loglik: np.ndarray
    n_trials: np.ndarray
    converged: np.ndarray
    identified: np.ndarray
    ci: ConfidenceInterval[np.ndarray] | None = None
    sigma_ci: ConfidenceInterval[np.ndarray] | None = None
    n_resamples: int = 0
    n_failed: np.ndarray | None = None
    confidence_level: float = 0.95
    reference_sigma: np.ndarray | None = None
    """(G,) sigma of the pooled fit each group belongs to (participants' scales: their
    sequence's), for :meth:`informative`; set by :func:`with_reference`."""

    @property
    def n_levels(self) -> int:
        return int(self.scale.shape[1])

    def flags(self) -> np.ndarray:
        """One word per group saying why its scale should not be read as a perceptual scale, or
        '': 'not converged', 'level missing', 'reversed' (psi_N < 0, i.e. a negative sigma: the
        scale runs backwards) or 'non-monotone' (the unit-noise scale drops between adjacent
        levels by more than twice the standard error of the difference, taken without the
        covariance, so conservative)."""
        flags = np.full(len(self.sigma), "", dtype=object)
        with np.errstate(invalid="ignore"):
            drop = self.scale[:, :-1] - self.scale[:, 1:]
            spread = 2.0 * np.sqrt(self.se[:, :-1] ** 2 + self.se[:, 1:] ** 2)
            non_monotone = (drop > np.nan_to_num(spread, nan=0.0)).any(axis=1)
            reversed_ = ~(self.sigma > 0)
        flags[non_monotone] = "non-monotone"
        flags[reversed_] = "reversed"
        flags[~self.identified] = "level missing"
        flags[~self.converged] = "not converged"
        return flags

    def flat_test(self) -> tuple[np.ndarray, np.ndarray]:
        """Likelihood-ratio test of each scale against a flat one (every psi equal: each triad
        answered 1 with probability 1/2, log-likelihood ``n log 1/2``): ``(LR, p)`` with
        LR = 2 (loglik - n log 1/2) ~ chi2(N - 1) under the flat scale (Wilks 1938; the MLDS GLM
        has N - 1 free scale values, Knoblauch & Maloney 2008)."""
        from scipy import stats

        with np.errstate(invalid="ignore"):
            lr = 2.0 * (self.loglik - self.n_trials * np.log(0.5))
            p = stats.chi2.sf(np.maximum(lr, 0.0), self.n_levels - 1)
        return lr, np.where(np.isfinite(lr), p, np.nan)

    def informative(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """``(informative, reason)`` per group: a scale says something when its fit converged,
        saw every level, beats a flat scale by :meth:`flat_test` at ``alpha`` and, with a
        ``reference_sigma``, its |sigma| is at most ``MAX_SIGMA_RATIO`` times the pooled fit's
        (a coin flipper passes the test 1 time in 20 by chance, with a huge sigma); otherwise
        the reason says why."""
        lr, p = self.flat_test()
        reason = np.full(len(self.sigma), "", dtype=object)
        if self.reference_sigma is not None:
            ref = np.abs(np.asarray(self.reference_sigma, dtype=float))
            with np.errstate(invalid="ignore"):
                noisy = np.abs(self.sigma) > MAX_SIGMA_RATIO * ref
            for i in np.flatnonzero(noisy):
                reason[i] = (f"sigma {self.sigma[i]:.3g} over {MAX_SIGMA_RATIO:g} times the pooled "
                             f"fit's {ref[i]:.3g}")
        flat = ~(p < alpha)
        for i in np.flatnonzero(flat):  # the flat test's reason wins over the sigma ratio
            reason[i] = (f"no better than a flat scale (LR = {lr[i]:.3g}, df = {self.n_levels - 1}, "
                         f"p = {p[i]:.2g} >= {alpha:g})")
        reason[~self.identified] = "a level was never shown"
        reason[~self.converged] = "the fit did not converge"
        return reason == "", reason

    @property
    def valid(self) -> np.ndarray:
        """Groups whose scale converged, saw every level, and is neither reversed nor non-monotone."""
        return self.flags() == ""

    def summary_frame(self) -> pd.DataFrame:
        """One row per group: keys, sigma (and CI), log-likelihood, trials, convergence flags."""
        out = self.keys.copy()
        out["sigma"] = self.sigma
        if self.sigma_ci is not None:
            out["sigma_ci_low"], out["sigma_ci_high"] = self.sigma_ci.low, self.sigma_ci.high
        out["loglik"] = self.loglik
        out["n_trials"] = self.n_trials
        out["converged"] = self.converged
        out["identified"] = self.identified
        out["flag"] = self.flags()
        out["valid"] = out["flag"] == ""
        out["lr_flat"], out["p_flat"] = self.flat_test()
        out["informative"], out["informative_reason"] = self.informative()
        if self.n_failed is not None:
            out["n_resamples"] = self.n_resamples
            out["n_failed"] = self.n_failed
        return out

    def to_frame(self) -> pd.DataFrame:
        """Long form, one row per (group, level): keys, level, scale, scale_std, se[, CI]."""
        g, n = self.scale.shape
        out = self.keys.loc[self.keys.index.repeat(n)].reset_index(drop=True)
        out["level"] = np.tile(np.arange(1, n + 1), g)
        out["scale"] = self.scale.ravel()
        out["scale_std"] = self.scale_std.ravel()
        out["se"] = self.se.ravel()
        if self.ci is not None:
            out["ci_low"] = self.ci.low.ravel()
            out["ci_high"] = self.ci.high.ravel()
        return out

    def summary(self, label: str = "pooled") -> str:
        """How many ``label`` scales were fitted, from how many trials, and how many converged."""
        ok = self.converged & self.identified
        if not ok.any():
            return f"{len(self.keys)} {label} scale(s); none converged"
        flags = self.flags()
        flagged = flags[ok & (flags != "")]
        text = (
            f"{len(self.keys)} {label} scale(s) from {int(self.n_trials.sum())} trials; "
            f"{int(ok.sum())} converged; median sigma {np.nanmedian(self.sigma[ok]):.3g}"
        )
        if flagged.size:
            words = ", ".join(f"{int((flagged == w).sum())} {w}" for w in sorted(set(flagged)))
            text += f"; flagged: {words}"
        return text

    def save(self, out_dir: str | Path, label: str = "sequence") -> list[Path]:
        """Write ``scales_by_<label>.csv`` (:meth:`to_frame`) and ``fits_by_<label>.csv``
        (:meth:`summary_frame` plus the skewness of each standard scale)."""
        from humanlike.analysis.mlds.psychophysical import scale_skewness  # imports this module

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        summary = self.summary_frame()
        summary["skewness"] = scale_skewness(self.scale_std)
        scales_path, fits_path = out / f"scales_by_{label}.csv", out / f"fits_by_{label}.csv"
        self.to_frame().to_csv(scales_path, index=False)
        summary.to_csv(fits_path, index=False)
        return [scales_path, fits_path]


MAX_SIGMA_RATIO = 5.0
"""A participant's scale whose decision noise is this many times the pooled fit's is
uninformative (its sequence's pooled scale says what it would)."""


def with_reference(per: ScaleFits, pooled: ScaleFits, group_col: str = "sequence") -> ScaleFits:
    """``per`` (e.g. one scale per sequence and participant) with each group's
    ``reference_sigma``: the sigma of ``pooled``'s scale of the same ``group_col``."""
    from dataclasses import replace

    if group_col not in per.keys.columns or group_col not in pooled.keys.columns:
        return per
    sigma = pd.Series(pooled.sigma, index=pooled.keys[group_col].astype(str).to_numpy())
    ref = per.keys[group_col].astype(str).map(sigma).to_numpy(dtype=float)
    return replace(per, reference_sigma=ref)


def scales_from_coef(coef: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scale, scale_std, sigma) from GLM coefficients (..., N - 1): psi = (0, beta),
    standard scale psi / psi_N, sigma = 1 / psi_N (Knoblauch & Maloney 2008)."""
    coef = np.asarray(coef, dtype=float)
    scale = np.concatenate([np.zeros((*coef.shape[:-1], 1)), coef], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        top = scale[..., -1:]
        return scale, scale / top, 1.0 / top[..., 0]


def fit_many(
    df: pd.DataFrame,
    by: str | Sequence[str] | None = "sequence",
    *,
    design: Design = "triads",
    n_levels: int | None = None,
    n_resamples: int = 0,
    confidence_level: float = 0.95,
    random_state: int | np.random.Generator | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
    progress: Callable[[int], object] | None = None,
) -> ScaleFits:
    """Fit one MLDS scale per group of ``df`` (tidy or R layout) in one batched Fisher scoring.

    ``by``: column(s) defining the groups (``None``: all trials pooled into one scale). With
    ``n_resamples > 0`` a parametric bootstrap (responses simulated from each group's fitted
    probabilities and refitted, all groups and replicates batched) gives percentile CIs.
    """
    by_cols = [] if by is None else [by] if isinstance(by, str) else list(by)
    missing = [c for c in by_cols if c not in df.columns]
    if missing:
        raise ValueError(f"grouping column(s) {missing} not in the data; got {list(df.columns)}")
    trials = canonical_trials(df, design)
    n_levels = infer_n_levels(trials, n_levels)
    groups, keys = _group_codes(df, by_cols)
    counts = count_trials(trials, n_levels, groups, len(keys))
    X = design_matrix(counts.rows, n_levels, design)
    fit = fit_probit_batch(X, counts.successes, counts.trials, max_iter=max_iter, tol=tol)
    scale, scale_std, sigma = scales_from_coef(fit.coef)
    se = np.zeros_like(scale)
    with np.errstate(invalid="ignore"):  # a separated fit can have a non-positive variance
        se[:, 1:] = np.sqrt(np.diagonal(fit.cov, axis1=1, axis2=2))
    se[~fit.identified] = np.nan
    result = {
        "keys": keys,
        "scale": scale,
        "scale_std": scale_std,
        "sigma": sigma,
        "se": se,
        "loglik": fit.loglik,
        "n_trials": counts.trials.sum(axis=1).astype(int),
        "converged": fit.converged,
        "identified": fit.identified,
        "confidence_level": confidence_level,
    }
    if n_resamples > 0:
        with np.errstate(invalid="ignore"):
            p = special.ndtr(np.nan_to_num(fit.coef) @ X.T)
        boot = bootstrap_coefs(
            X,
            p,
            counts.trials,
            n_resamples,
            random_state,
            max_iter=max_iter,
            tol=tol,
            progress=progress,
            start=fit.coef,
        )
        _, boot_std, boot_sigma = scales_from_coef(boot)  # (G, B, N), (G, B)
        failed = np.isnan(boot_sigma)
        ci = confidence_interval(boot_std, confidence_level, axis=1)
        ci.low[~fit.identified] = np.nan
        ci.high[~fit.identified] = np.nan
        result.update(
            ci=ci,
            sigma_ci=confidence_interval(boot_sigma, confidence_level, axis=1),
            n_resamples=n_resamples,
            n_failed=failed.sum(axis=1),
        )
    return ScaleFits(**result)


def bootstrap_coefs(
    X: np.ndarray,
    p: np.ndarray,
    trials: np.ndarray,
    n_resamples: int,
    random_state: int | np.random.Generator | None = None,
    *,
    max_iter: int = 100,
    tol: float = 1e-10,
    progress: Callable[[int], object] | None = None,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Parametric bootstrap: (G, n_resamples, P) coefficients refitted to binomial counts drawn from
    fitted probabilities ``p`` (G, R) with ``trials`` (G, R); replicates that fail to converge
    are NaN (Knoblauch & Maloney 2008, ``boot.mlds``). Drawn and refitted in memory-bounded
    chunks of replicates, each chunk one batched fit started at ``start`` (G, P), the groups'
    own estimates, when given."""
    rng = np.random.default_rng(random_state)
    p = np.atleast_2d(p)
    trials = np.atleast_2d(trials)
    n_groups, n_rows = p.shape
    n_par = X.shape[1]
    p = np.where(np.isfinite(p), p, 0.5)
    out = np.full((n_groups, n_resamples, n_par), np.nan)
    per_replicate = max(1, n_groups * n_rows * n_par)
    chunk = max(1, min(n_resamples, _BOOT_CHUNK_ELEMENTS // per_replicate))
    for first in range(0, n_resamples, chunk):  # memory-bounded chunks, each one batched fit
        m = min(chunk, n_resamples - first)
        y = rng.binomial(trials.astype(np.int64)[None], p[None], size=(m, n_groups, n_rows))
        init = None if start is None else np.tile(np.nan_to_num(start), (m, 1))
        fit = fit_probit_batch(
            X,
            y.reshape(m * n_groups, n_rows),
            np.broadcast_to(trials, (m, n_groups, n_rows)).reshape(m * n_groups, n_rows),
            start=init,
            max_iter=max_iter,
            tol=tol,
            compute_cov=False,
        )
        coef = np.where(fit.converged[:, None], fit.coef, np.nan)
        out[:, first : first + m] = coef.reshape(m, n_groups, n_par).transpose(1, 0, 2)
        if progress is not None:
            progress(m)
    return out


def _group_codes(df: pd.DataFrame, by_cols: list[str]) -> tuple[np.ndarray | None, pd.DataFrame]:
    if not by_cols:
        return None, pd.DataFrame(index=pd.RangeIndex(1))
    for c in by_cols:
        if df[c].isna().any():
            raise ValueError(f"grouping column {c!r} has missing values")
    if len(by_cols) == 1:
        codes, uniques = pd.factorize(df[by_cols[0]], sort=True)
        return codes, pd.DataFrame({by_cols[0]: uniques})
    group_codes = df.groupby(by_cols, sort=True, observed=True).ngroup().to_numpy()
    first = np.unique(group_codes, return_index=True)[1]
    keys = df[by_cols].iloc[first].reset_index(drop=True)
    return group_codes, keys
