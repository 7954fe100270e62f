"""Affine recalibration of logits to human ratings: p = sigmoid(slope * logit + intercept)."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import expit, log_expit, logit
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted


def clipped_logit(p: np.ndarray, eps: float = 1e-3) -> np.ndarray:
    """logit(clip(p, eps, 1 - eps)): finite log-odds for probabilities of exactly 0 or 1."""
    return logit(np.clip(np.asarray(p, dtype=float), eps, 1.0 - eps))


class RatingCalibration(BaseEstimator):
    """One slope and one intercept on the logits, fitted by cross-entropy to graded ratings.

    Minimises sum over observed ratings x of -[x log p + (1 - x) log(1 - p)] with
    p = sigmoid(slope * z + intercept): a binomial GLM with a logit link on the fractional ratings
    (quasi-likelihood, statsmodels ``GLM``), as used to give models and the noise ceiling the same
    flexibility (Golan, Raju & Kriegeskorte 2020, Methods). A scikit-learn estimator without
    parameters: ``fit`` learns ``slope_``, ``intercept_`` and ``cross_entropy_`` and returns ``self``.
    """

    def fit(self, logits: np.ndarray, ratings: np.ndarray) -> RatingCalibration:
        """Fit on ``ratings`` (NaN = missing) and ``logits`` broadcastable to their shape."""
        ratings = np.asarray(ratings, dtype=float)
        logits = np.asarray(logits, dtype=float)
        try:
            z = np.broadcast_to(logits, ratings.shape)
        except ValueError:
            raise ValueError(
                f"logits of shape {logits.shape} do not broadcast to ratings of shape {ratings.shape}"
            ) from None
        if not np.all(np.isfinite(z)):
            raise ValueError("logits contain non-finite values")
        observed = np.isfinite(ratings)
        if logits.ndim == ratings.ndim and logits.shape[0] == 1 and ratings.ndim > 1:
            # Shared logits: aggregate the ratings per entry (sum and count) before fitting.
            count = observed.sum(0)
            total = np.where(observed, ratings, 0.0).sum(0)
            keep = count > 0
            z_fit = z[0][keep]
            y_fit = total[keep] / count[keep]
            w_fit = count[keep].astype(float)
        else:
            z_fit = z[observed]
            y_fit = ratings[observed]
            w_fit = np.ones_like(y_fit)
        if y_fit.size < 2 or np.ptp(z_fit) == 0:
            raise ValueError("calibration needs at least two distinct logits with observed ratings")
        design = np.column_stack([np.ones_like(z_fit), z_fit])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fractional binomial responses are intended
            import statsmodels.api as sm  # imported on use: slow to import (about 2 s)

            fit = sm.GLM(y_fit, design, family=sm.families.Binomial(), var_weights=w_fit).fit()
        self.intercept_ = float(fit.params[0])
        self.slope_ = float(fit.params[1])
        eta = design @ fit.params
        ce = -(y_fit * log_expit(eta) + (1.0 - y_fit) * log_expit(-eta))
        self.cross_entropy_ = float(np.sum(w_fit * ce) / np.sum(w_fit))
        return self

    def transform(self, logits: np.ndarray) -> np.ndarray:
        """Calibrated logits slope_ * z + intercept_."""
        check_is_fitted(self)
        return self.slope_ * np.asarray(logits, dtype=float) + self.intercept_

    def predict(self, logits: np.ndarray) -> np.ndarray:
        """Calibrated probabilities sigmoid(slope_ * z + intercept_)."""
        return expit(self.transform(logits))
