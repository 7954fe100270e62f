"""Reaction-time shape per participant: regularity (coefficient of variation), anticipations and
the ex-Gaussian parameters by the method of moments."""

from __future__ import annotations

import numpy as np
import pandas as pd

from humanlike.analysis.authenticity.reference import ANTICIPATION_MS, MIN_SCORED_TRIALS


def ex_gaussian_moments(mean: np.ndarray, sd: np.ndarray, skew: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ex-Gaussian (mu, sigma, tau) from mean, SD and skewness: tau = sd (skew / 2)^(1/3),
    mu = mean - tau, sigma^2 = sd^2 - tau^2 (Heathcote 1996; Lacouture & Cousineau 2008);
    a skew at or below 0 gives tau 0 and a skew of 2 or more sigma 0."""
    tau = sd * np.cbrt(np.clip(skew, 0.0, 2.0) / 2.0)
    return mean - tau, np.sqrt(np.clip(sd ** 2 - tau ** 2, 0.0, None)), tau


def rt_shape(trials: pd.DataFrame) -> pd.DataFrame:
    """Per participant over its finite RTs: ``n_timed``, ``rt_cv`` (SD / mean), ``anticipation_share``
    (RT under ``ANTICIPATION_MS``) and ``exg_mu_ms``, ``exg_sigma_ms``, ``exg_tau_ms``; NaN under
    ``MIN_SCORED_TRIALS`` timed trials."""
    rt = pd.to_numeric(trials["rt_ms"], errors="coerce")
    frame = pd.DataFrame({"participant": trials["participant"].to_numpy(),
                          "rt": rt.to_numpy(dtype=float)}).dropna()
    grouped = frame.groupby("participant")["rt"]
    n, mean, sd = grouped.size(), grouped.mean(), grouped.std(ddof=1)
    skew = grouped.skew()
    mu, sigma, tau = ex_gaussian_moments(mean.to_numpy(), sd.to_numpy(), skew.fillna(0).to_numpy())
    out = pd.DataFrame({"n_timed": n, "rt_cv": sd / mean,
                        "anticipation_share": (frame["rt"] < ANTICIPATION_MS).groupby(
                            frame["participant"]).mean(),
                        "exg_mu_ms": mu, "exg_sigma_ms": sigma, "exg_tau_ms": tau}, index=n.index)
    measured = out.columns.drop("n_timed")
    out.loc[out["n_timed"] < MIN_SCORED_TRIALS, measured] = np.nan
    return out
