"""Noise ceiling of rating predictions: leave-one-out lower bound and best-possible upper bound.

For participants i = 1..P with rating vectors x_i over stimuli x categories (NaN = not observed), a
prediction y is scored by the mean over participants of Pearson r(y, x_i) over i's observed entries
(Golan, Raju & Kriegeskorte 2020, Methods). The noise ceiling brackets the best score a model can get:

* lower bound: mean_i r(x_i, mean of the other participants' ratings) (leave one out);
* upper bound: max_y mean_i r(y, x_i). With nothing missing the maximiser is the mean of the
  z-scored participant vectors, zbar, and the bound is ||zbar|| / sqrt(n) (Cauchy-Schwarz, as
  r(y, x_i) = <z(y), z_i> / n). With missing ratings there is no closed form: y = sigmoid(v) is
  optimised over the logit vector v with L-BFGS and an analytic gradient.

The same bounds in mean squared error (lower = LOO-mean MSE, upper = smallest achievable MSE, reached
by a participant-weighted mean rating) come along, since scores report MSE as a second measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import expit, logit
from threadpoolctl import threadpool_limits

from humanlike.analysis.ratings.calibration import RatingCalibration, clipped_logit
from humanlike.analysis.ratings.pearson import mse_from_sums, pearson_from_sums

if TYPE_CHECKING:
    from humanlike.analysis.ratings.data import RatingArray


def rating_matrix(ratings: RatingArray | np.ndarray) -> np.ndarray:
    """Participants x entries float matrix (NaN = missing) from a RatingArray or an (P, ...) array."""
    values = np.asarray(getattr(ratings, "values", ratings), dtype=float)
    if values.ndim < 2:
        raise ValueError("ratings must be an array of shape (participants, stimuli[, categories])")
    if values.shape[0] < 2:
        raise ValueError("a noise ceiling needs at least two participants")
    return values.reshape(values.shape[0], -1)


def _masked_pair(x: np.ndarray, prediction: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Finite pairs of ``x`` and the broadcast ``prediction``: mask m, x and y with 0 off the mask."""
    y = np.broadcast_to(np.asarray(prediction, dtype=float), x.shape)
    m = np.isfinite(x) & np.isfinite(y)
    a = np.where(m, x, 0.0)
    b = np.where(m, y, 0.0)
    return m, a, b


def _product_sums(a: np.ndarray, b: np.ndarray, pairs: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Row sums of the products ``pairs`` ('aa', 'bb', 'ab') through one reused buffer."""
    buffer = np.empty_like(a)
    operands = {"a": a, "b": b}
    return {pair: np.multiply(operands[pair[0]], operands[pair[1]], out=buffer).sum(1)
            for pair in pairs}


def masked_sums(x: np.ndarray, prediction: np.ndarray) -> dict[str, np.ndarray]:
    """Per-row n, Sx, Sy, Sxx, Syy, Sxy ('n', 'a', 'b', 'aa', 'bb', 'ab') over finite pairs."""
    m, a, b = _masked_pair(x, prediction)
    return {"n": m.sum(1), "a": a.sum(1), "b": b.sum(1), **_product_sums(a, b, ("aa", "bb", "ab"))}


def _r_of(sums: dict[str, np.ndarray]) -> np.ndarray:
    """Per-row Pearson r from :func:`masked_sums`."""
    return pearson_from_sums(sums["n"], sums["a"], sums["b"], sums["aa"], sums["bb"], sums["ab"])


def _mse_of(sums: dict[str, np.ndarray]) -> np.ndarray:
    """Per-row MSE from :func:`masked_sums`."""
    return mse_from_sums(sums["n"], sums["aa"], sums["bb"], sums["ab"])


def masked_r(x: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """Per-row Pearson r between ``x`` (P, E) and ``prediction`` (E,) or (P, E) over finite pairs."""
    return _r_of(masked_sums(x, prediction))


def masked_mse(x: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """Per-row mean squared error between ``x`` and ``prediction`` over finite pairs."""
    return _mse_of(masked_sums(x, prediction))


def leave_one_out_predictions(ratings: RatingArray | np.ndarray) -> np.ndarray:
    """(P, E): for each participant the mean rating of the *other* participants (NaN if none rated)."""
    x = rating_matrix(ratings)
    observed = np.isfinite(x)
    total = np.where(observed, x, 0.0)
    np.subtract(total.sum(0), total, out=total)
    count = np.subtract(observed.sum(0), observed, dtype=float)  # small integers: exact
    rated = count > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        np.divide(total, count, out=total, where=rated)
    total[~rated] = np.nan
    return total


def consensus_prediction(ratings: RatingArray | np.ndarray) -> np.ndarray:
    """(E,): mean over the participants who rated an entry of their z-scored ratings (NaN if none).

    With no missing ratings this is proportional to the sum of z-scored vectors, the exact maximiser of
    the mean Pearson r; with missing ratings it is the starting point of the optimisation.
    """
    x = rating_matrix(ratings)
    observed = np.isfinite(x)
    n = observed.sum(1)
    centred = np.where(observed, x, 0.0)
    mean = centred.sum(1) / np.maximum(n, 1)
    np.subtract(x, mean[:, None], out=centred)
    centred[~observed] = 0.0
    sd = np.sqrt(np.square(centred).sum(1) / np.maximum(n, 1))
    usable = sd > 1e-12 * np.maximum(np.abs(mean), 1.0)
    z = np.divide(centred, np.where(usable, sd, 1.0)[:, None], out=centred)
    z[~usable] = 0.0
    observed[~usable] = False
    weight = observed.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weight > 0, z.sum(0) / np.where(weight > 0, weight, 1), np.nan)


@dataclass(frozen=True)
class UpperBound:
    """Upper bound of the mean Pearson r and the prediction that reaches it."""

    value: float
    per_participant: np.ndarray
    prediction: np.ndarray
    method: str
    n_iterations: int
    converged: bool


def upper_bound_closed_form(ratings: RatingArray | np.ndarray) -> UpperBound:
    """Mean r reached by the mean of z-scored participant vectors (exact maximum if nothing is missing).

    With missing ratings this is the r of :func:`consensus_prediction`, a value the optimum reaches or
    exceeds; use :func:`upper_bound_optimized` for the bound itself.
    """
    x = rating_matrix(ratings)
    prediction = consensus_prediction(x)
    per_participant = masked_r(x, prediction)
    return UpperBound(
        value=float(np.nanmean(per_participant)),
        per_participant=per_participant,
        prediction=prediction,
        method="closed_form",
        n_iterations=0,
        converged=True,
    )


def _initial_logits(x: np.ndarray, active: np.ndarray, init: str | np.ndarray) -> np.ndarray:
    if isinstance(init, str):
        if init == "closed_form":
            q = consensus_prediction(x)[active]
            scale = np.max(np.abs(q)) or 1.0
            return logit(0.5 + 0.45 * q / scale)
        if init == "mean":
            with np.errstate(invalid="ignore"):
                mean = np.nanmean(x[:, active], axis=0)
            return clipped_logit(mean, 0.02)
        raise ValueError(f"init must be 'closed_form', 'mean' or an array, got {init!r}")
    v0 = np.asarray(init, dtype=float).reshape(-1)
    if v0.shape[0] != x.shape[1]:
        raise ValueError(f"init has {v0.shape[0]} entries; the ratings have {x.shape[1]}")
    return v0[active]


class NegativeMeanR:
    """f(v) = -mean_i r(sigmoid(v), x_i) and its analytic gradient, over the entries anyone rated.

    For centred vectors pc_i, xc_i on participant i's observed entries,
    d r_i / d p = xc_i / (|pc_i| |xc_i|) - r_i pc_i / |pc_i|^2, chained through dp/dv = p (1 - p).
    Participants whose observed ratings are constant (undefined r) are left out; ``active`` marks
    the entries (columns of the ratings) that the vector v covers.
    """

    def __init__(self, ratings: RatingArray | np.ndarray) -> None:
        x = rating_matrix(ratings)
        observed = np.isfinite(x)
        n = observed.sum(1)
        mean = np.where(observed, x, 0.0).sum(1) / np.maximum(n, 1)
        xc = np.where(observed, x - mean[:, None], 0.0)
        xnorm = np.sqrt((xc**2).sum(1))
        people = (n >= 2) & (xnorm > 1e-12)
        if not people.any():
            raise ValueError("no participant has at least two different observed ratings")
        self.active = observed[people].any(0)
        self._o = observed[people][:, self.active].astype(float)
        self._xc = xc[people][:, self.active]
        self._xn = xnorm[people]
        self._n = n[people].astype(float)
        self._n_people = float(people.sum())

    def __call__(self, v: np.ndarray) -> tuple[float, np.ndarray]:
        p = expit(v)
        mp = (self._o @ p) / self._n
        pc = self._o * (p[None, :] - mp[:, None])
        pn2 = np.maximum(np.einsum("ij,ij->i", pc, pc), 1e-300)
        pn = np.sqrt(pn2)
        r = (self._xc @ p) / (pn * self._xn)
        grad_p = (1.0 / (pn * self._xn)) @ self._xc - (r / pn2) @ pc
        return -r.sum() / self._n_people, -(grad_p * p * (1.0 - p)) / self._n_people


def upper_bound_optimized(
    ratings: RatingArray | np.ndarray,
    init: str | np.ndarray = "closed_form",
    gtol: float = 1e-10,
    maxiter: int = 5000,
) -> UpperBound:
    """max over v of mean_i r(sigmoid(v), x_i) over each participant's observed entries (L-BFGS-B).

    scipy's L-BFGS-B with the analytic gradient of :class:`NegativeMeanR`. Participants with
    constant ratings are left out of the mean; entries nobody rated are not optimised (NaN in
    ``prediction``). ``init`` is 'closed_form' (the consensus of z-scores; converges in a few
    dozen iterations), 'mean' (the mean rating) or a logit vector over all entries.
    """
    x = rating_matrix(ratings)
    objective = NegativeMeanR(x)
    v0 = _initial_logits(x, objective.active, init)
    # Matrix-vector products this small run fastest single-threaded inside BLAS.
    with threadpool_limits(limits=1, user_api="blas"):
        res = minimize(
            objective,
            v0,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": maxiter, "gtol": gtol, "ftol": 1e-15, "maxcor": 20},
        )
    prediction = np.full(x.shape[1], np.nan)
    prediction[objective.active] = expit(res.x)
    per_participant = masked_r(x, prediction)
    return UpperBound(
        value=float(np.nanmean(per_participant)),
        per_participant=per_participant,
        prediction=prediction,
        method="optimized",
        n_iterations=int(res.nit),
        converged=bool(res.success),
    )


def best_mse_prediction(ratings: RatingArray | np.ndarray) -> np.ndarray:
    """(E,): argmin_y mean_i MSE_i(y), the mean rating with participant weights 1 / n_i (NaN if unrated)."""
    x = rating_matrix(ratings)
    observed = np.isfinite(x)
    n = observed.sum(1)
    w = np.where(n > 0, 1.0 / np.maximum(n, 1), 0.0)
    num = w @ np.where(observed, x, 0.0)
    den = w @ observed
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


@dataclass(frozen=True)
class NoiseCeiling:
    """Noise ceiling: ``lower``/``upper`` mean Pearson r, the same in MSE, and per-participant values.

    ``per_participant`` has columns participant, loo_r (r with the other participants' mean), upper_r
    (r with the optimal prediction), loo_mse and best_mse. For MSE, ``upper_mse`` is the smallest
    achievable (best) error and ``lower_mse`` the leave-one-out error. ``calibration`` holds the slope
    and intercept applied to the leave-one-out predictions' logits when ``calibrate=True``.
    """

    lower: float
    upper: float
    lower_mse: float
    upper_mse: float
    per_participant: pd.DataFrame
    method: str
    prediction: np.ndarray
    calibration: tuple[float, float] | None = None


def leave_one_out_calibration(
    ratings: RatingArray | np.ndarray, eps: float = 1e-3
) -> tuple[float, float]:
    """(slope, intercept) of sigmoid(slope * logit(loo) + intercept) fitted by cross-entropy to x_i.

    ``loo`` is each participant's leave-one-out mean (:func:`leave_one_out_predictions`), clipped to
    [eps, 1 - eps] before the logit; one pair is shared by all participants, as for a model.
    """
    x = rating_matrix(ratings)
    loo = leave_one_out_predictions(x)
    valid = np.isfinite(loo)
    z = clipped_logit(np.where(valid, loo, 0.5), eps)
    fitted = RatingCalibration().fit(z, np.where(valid, x, np.nan))
    return fitted.slope_, fitted.intercept_


def noise_ceiling(
    ratings: RatingArray | np.ndarray,
    method: str = "auto",
    calibrate: bool | tuple[float, float] = False,
    eps: float = 1e-3,
    mse: bool = True,
) -> NoiseCeiling:
    """Lower (leave-one-out) and upper (best single prediction) bound of the mean Pearson r.

    ``method``: 'closed_form' (mean of z-scored vectors), 'optimized' (L-BFGS on a logit vector) or
    'auto' (closed form when nothing is missing, otherwise optimised). With ``calibrate=True`` the
    leave-one-out predictions get the same affine logit recalibration as the models
    (:func:`leave_one_out_calibration`); a (slope, intercept) pair applies a given calibration. The
    upper bound already optimises a free logit vector, so recalibration cannot raise it. Without
    ``mse`` the best achievable MSE is not computed (``upper_mse`` and ``best_mse`` are NaN).
    """
    x = rating_matrix(ratings)
    if method not in ("auto", "closed_form", "optimized"):
        raise ValueError(f"method must be 'auto', 'closed_form' or 'optimized', got {method!r}")
    complete = bool(np.isfinite(x).all())
    if method == "closed_form" or (method == "auto" and complete):
        upper = upper_bound_closed_form(x)
    else:
        upper = upper_bound_optimized(x)
    loo = leave_one_out_predictions(x)
    calibration = None
    if calibrate is True:
        calibration = leave_one_out_calibration(x, eps)
    elif calibrate is not False:
        slope, intercept = calibrate
        calibration = (float(slope), float(intercept))
    if calibration is not None:
        slope, intercept = calibration
        loo = expit(slope * clipped_logit(loo, eps) + intercept)  # NaN stays NaN
    loo_sums = masked_sums(x, loo)  # r and MSE from the same sums
    loo_r, loo_mse = _r_of(loo_sums), _mse_of(loo_sums)
    best_mse = masked_mse(x, best_mse_prediction(x)) if mse else np.full(x.shape[0], np.nan)
    participants = getattr(ratings, "participants", None) or tuple(
        str(i) for i in range(x.shape[0])
    )
    table = pd.DataFrame(
        {
            "participant": list(participants),
            "loo_r": loo_r,
            "upper_r": upper.per_participant,
            "loo_mse": loo_mse,
            "best_mse": best_mse,
        }
    )
    return NoiseCeiling(
        lower=float(np.nanmean(loo_r)),
        upper=upper.value,
        lower_mse=float(np.nanmean(loo_mse)),
        upper_mse=float(np.nanmean(best_mse)) if mse else float("nan"),
        per_participant=table,
        method=upper.method,
        prediction=upper.prediction,
        calibration=calibration,
    )
