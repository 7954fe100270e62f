"""Bootstrap inference for rating scores: CIs for models and noise-ceiling bounds, corrected tests.

Each resample draws participants with replacement and, independently, stimuli with replacement within
strata (each targeted model pair, and natural images), as in Golan, Raju & Kriegeskorte (2020).
A resample is represented by integer counts: ``w[b, i]`` copies of participant i and ``c[b, s]``
copies of stimulus s. Every statistic is a count-weighted version of the full-sample one, built from
weighted sums (n, Sx, Sy, Sxx, Syy, Sxy) that matrix products deliver for a whole block of resamples
at once; there is no Python loop over resamples.

* Models: per-stimulus sums of o*y, o*y^2 and o*x*y (o = observed mask) times the count matrix.
* Lower bound (leave one out): the mean of the other resampled participants,
  m = (N_b - w_bi x_i) / (D_b - w_bi) with N_b = sum_j w_bj x_j and D_b = sum_j w_bj o_j, evaluated
  exactly for each resample (all copies of participant i are left out).
* Upper bound: re-optimising per resample is too slow, so each resample uses the closed form on its
  own observed entries -- the mean over the resampled observers of count-weighted z-scores (exact
  when nothing is missing) -- shifted by the full-sample gap between the optimised bound and this
  closed form (zero when nothing is missing, 1e-4 or less in simulations with 5-10% missing; the
  bias correction below absorbs it). For MSE the best prediction has a closed form (participant
  weights w_i / n_i): exact in every resample.

The noise-ceiling bounds depend on how many *distinct* participants a resample holds (about 63% of
P): with fewer distinct others the leave-one-out mean is noisier (lower bound biased down) and
duplicates agree with themselves (upper bound biased up). Their resample distributions are therefore
re-centred on the full-sample estimates, theta*_b - (mean(theta*) - theta_hat) (the bootstrap bias
correction of Efron & Tibshirani 1993, ch. 10), before intervals and the model-vs-lower-bound tests;
the removed bias is reported. Model scores (means of per-participant r) need no correction.

Two-sided p-values are the bootstrap percentile test p = 2 min(#(d <= 0) + 1, #(d >= 0) + 1) / (B + 1)
(Davison & Hinkley 1997, ch. 4), Holm-Sidak corrected within each subset and measure with
``statsmodels.stats.multitest.multipletests(method="holm-sidak")``. The participant and stimulus
bootstraps are combined naively, which can make intervals conservative (Schuett et al. 2023).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd
from scipy.special import expit
from threadpoolctl import threadpool_limits

from humanlike.analysis._resampling import (
    bootstrap_p_value,
    check_confidence_level,
    draw_resample_counts,
    holm_sidak,
    percentile_interval,
)
from humanlike.analysis.ratings.calibration import clipped_logit
from humanlike.analysis.ratings.ceilings import (
    leave_one_out_calibration,
    noise_ceiling,
    upper_bound_closed_form,
)
from humanlike.analysis.ratings.pearson import mse_from_sums, pearson_from_sums
from humanlike.analysis.ratings.scores import (
    ModelPredictions,
    calibrate_predictions,
    participant_scores,
)
from humanlike.vocabulary import StimulusKind

if TYPE_CHECKING:
    from humanlike.analysis.ratings.data import RatingArray

SUBSETS = ("all", StimulusKind.CONTROVERSIAL.value, StimulusKind.NATURAL.value)
_CHUNK_ELEMENTS = 2_000_000


# --------------------------------------------------------------------------- weighted statistics


def _weighted_mean(stat: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Mean over the participant axis (-1 of ``weights``) with count weights, skipping NaN."""
    ok = np.isfinite(stat)
    w = np.where(ok, weights, 0.0)
    total = np.where(ok, stat, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w * total).sum(-1) / w.sum(-1)


class _Prepared:
    """Arrays shared by all resample blocks: ratings, masks, per-stimulus sums and kind blocks.

    ``o_unit`` is the observed mask at the resolution missingness actually has: (P, S, 1) when a
    participant rated either all categories of a stimulus or none (trial-level missingness, the
    rating task's case), else (P, S, K). The leave-one-out and upper-bound sums then run per stimulus
    instead of per (stimulus, category) entry.
    """

    def __init__(
        self,
        x: np.ndarray,
        y: np.ndarray,
        kinds: Sequence[str],
        subsets: Sequence[str],
        lower_calibration: tuple[float, float] | None,
        eps: float,
    ) -> None:
        n_people, n_stimuli, n_cat = x.shape
        self.n_people, self.n_stimuli, self.n_cat = n_people, n_stimuli, n_cat
        kind_of = np.asarray(kinds, dtype=object)
        # Blocks of stimuli of one kind are made contiguous (stimuli reordered by kind).
        names = sorted(
            set(kind_of.tolist()), key=lambda k: (k != StimulusKind.NATURAL, k != StimulusKind.CONTROVERSIAL, k)
        )
        block_of = np.array([names.index(k) for k in kind_of])
        self.order = np.argsort(block_of, kind="stable")
        edges = np.searchsorted(block_of[self.order], np.arange(len(names) + 1))
        self.blocks = {name: (int(edges[g]), int(edges[g + 1])) for g, name in enumerate(names)}
        self.subsets: dict[str, list[str]] = {}
        for subset in subsets:
            members = names if subset == "all" else [subset] if subset in names else []
            if members:
                self.subsets[subset] = members
        x = x[:, self.order]
        y = y[:, self.order]
        observed = np.isfinite(x)
        self.x3 = np.where(observed, x, 0.0)
        self.x0 = self.x3.reshape(n_people, -1)
        o3 = observed.astype(float)
        trial_level = bool(np.all(observed == observed[:, :, :1]))
        self.o_unit = o3[:, :, :1].copy() if trial_level else o3
        self.lower_calibration = lower_calibration
        self.eps = eps
        # The calibrated leave-one-out mean is non-linear per entry: it needs the entry resolution.
        self.o_lower = o3 if lower_calibration is not None else self.o_unit
        observed_lower = np.ascontiguousarray(self.o_lower.transpose(1, 0, 2)) > 0  # (S, P, K')
        if observed_lower.shape[2] == 1:
            self.observed_lower = observed_lower[:, None, :, 0]  # (S, 1, P)
        else:
            self.observed_lower = observed_lower[:, None]  # (S, 1, P, K)
        self.x_sp = np.ascontiguousarray(self.x3.transpose(1, 0, 2))  # (S, P, K)
        # Per-stimulus sums over categories, (P, S): n, Sx, Sxx of the ratings.
        self.n_s = o3.sum(2)
        self.x1_s = self.x3.sum(2)
        self.x2_s = (self.x3**2).sum(2)
        self.x1_sp = np.ascontiguousarray(self.x1_s.T)  # (S, P)
        self.x2_sp = np.ascontiguousarray(self.x2_s.T)
        # Per-stimulus sums for every model, (S, 3 * P * M): o*y, o*y^2, x*y.
        self.n_models = y.shape[0]
        self.model_sums = np.concatenate(
            [
                np.einsum("isk,msk->sim", o3, y).reshape(n_stimuli, -1),
                np.einsum("isk,msk->sim", o3, y * y).reshape(n_stimuli, -1),
                np.einsum("isk,msk->sim", self.x3, y).reshape(n_stimuli, -1),
            ],
            axis=1,
        )

        # Per subset: the observed mask (P, S_sub * K') and ratings (P, S_sub * K), contiguous.
        self.subset_arrays = {}
        for subset in self.subsets:
            lo, hi = self.stimulus_range(subset)
            self.subset_arrays[subset] = (
                np.ascontiguousarray(self.o_unit[:, lo:hi].reshape(n_people, -1)),
                np.ascontiguousarray(self.x3[:, lo:hi].reshape(n_people, -1)),
            )

    def stimulus_range(self, subset: str) -> tuple[int, int]:
        members = self.subsets[subset]
        return min(self.blocks[m][0] for m in members), max(self.blocks[m][1] for m in members)

    def elements_per_resample(self) -> int:
        """Size of the largest per-resample intermediate (the leave-one-out (S, P, K') arrays)."""
        return max(self.n_stimuli * self.n_people * self.o_lower.shape[2], self.x0.shape[1])


def _x_sums(prep: _Prepared, c: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, ...]:
    """Count-weighted n, Sx, Sxx of every participant on stimuli lo:hi: three (B, P) arrays."""
    cs = c[:, lo:hi]
    return cs @ prep.n_s[:, lo:hi].T, cs @ prep.x1_s[:, lo:hi].T, cs @ prep.x2_s[:, lo:hi].T


def _model_block(prep: _Prepared, w: np.ndarray, c: np.ndarray, lo: int, hi: int):
    """Participant-weighted mean r and MSE of every model, (B, M) each, on stimuli lo:hi."""
    n, sx, sxx = _x_sums(prep, c, lo, hi)
    sums = c[:, lo:hi] @ prep.model_sums[lo:hi]
    sy, syy, sxy = (part.reshape(len(c), -1, prep.n_models) for part in np.split(sums, 3, axis=1))
    n, sx, sxx = n[..., None], sx[..., None], sxx[..., None]
    weights = w[:, None, :]
    r = np.moveaxis(pearson_from_sums(n, sx, sy, sxx, syy, sxy), 1, 2)
    mse = np.moveaxis(mse_from_sums(n, sxx, syy, sxy), 1, 2)
    return _weighted_mean(r, weights), _weighted_mean(mse, weights)


def _prediction_sums(prep: _Prepared, q: np.ndarray, c: np.ndarray, subset: str):
    """Count-weighted Sq, Sqq, Sxq over each participant's observed entries; q is (B, S_sub, K).

    The contractions over entries are written (P, E) @ (E, B): OpenBLAS is several times faster in
    that orientation than for (B, E) @ (E, P).
    """
    lo, hi = prep.stimulus_range(subset)
    o_flat, x0 = prep.subset_arrays[subset]
    cs = c[:, lo:hi, None]
    if prep.o_unit.shape[2] == 1:  # trial-level mask: sum over categories before the mask product
        q_sum, qq_sum = q.sum(2), np.einsum("bsk,bsk->bs", q, q)
    else:
        q_sum, qq_sum = q, q * q
    n_res = len(q)
    cs_flat = cs.reshape(n_res, -1) if q_sum.ndim == 2 else cs
    sq = (o_flat @ (cs_flat * q_sum).reshape(n_res, -1).T).T
    sqq = (o_flat @ (cs_flat * qq_sum).reshape(n_res, -1).T).T
    sxq = (x0 @ (cs * q).reshape(n_res, -1).T).T
    return sq, sqq, sxq


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den with 0 where den == 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def _upper_block(prep: _Prepared, w: np.ndarray, c: np.ndarray, subset: str):
    """Closed-form upper bound in r and exact best MSE, (B,) each, on a subset's stimuli.

    Where no resampled participant rated an entry, numerator and denominator of the prediction are
    both exactly zero, so the division uses max(den, tiny) instead of a masked division.
    """
    lo, hi = prep.stimulus_range(subset)
    o_flat, x0 = prep.subset_arrays[subset]
    n_res = len(w)
    shape_q = (n_res, hi - lo, prep.n_cat)
    shape_o = (n_res, hi - lo, prep.o_unit.shape[2])
    tiny = np.finfo(float).tiny
    n, sx, sxx = _x_sums(prep, c, lo, hi)
    # r: the mean over resampled observers of count-weighted z-scores.
    mean = _ratio(sx, n)
    sd = np.sqrt(np.maximum(_ratio(sxx, n) - mean**2, 0.0))
    usable = (n > 0) & (sd > 1e-12 * np.maximum(np.abs(mean), 1.0)) & (w > 0)
    a = _ratio(np.where(usable, w, 0.0), sd)
    num = (a @ x0).reshape(shape_q) - ((a * mean) @ o_flat).reshape(shape_o)
    q = num / np.maximum(((w * usable) @ o_flat).reshape(shape_o), tiny)
    sq, sqq, sxq = _prediction_sums(prep, q, c, subset)
    upper_r = _weighted_mean(pearson_from_sums(n, sx, sq, sxx, sqq, sxq), w)
    # MSE: argmin of the weighted mean MSE, participant weights w_i / n_i.
    v = _ratio(w, n)
    q = (v @ x0).reshape(shape_q) / np.maximum((v @ o_flat).reshape(shape_o), tiny)
    sq, sqq, sxq = _prediction_sums(prep, q, c, subset)
    best_mse = _weighted_mean(mse_from_sums(n, sxx, sqq, sxq), w)
    return upper_r, best_mse


def _lower_sums(prep: _Prepared, w: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    """Per kind block: (6, B, P) sums n, Sx, Sxx, Sq, Sqq, Sxq of x_i and its leave-one-out mean.

    m = (N_b - w_bi x_i) / (D_b - w_bi) with N_b = sum_j w_bj x_j and D_b = sum_j w_bj o_j (all
    copies of participant i are left out; entries no other resampled participant rated drop out).
    """
    if prep.o_lower.shape[2] == 1 and prep.lower_calibration is None:
        return _lower_sums_trials(prep, w, c)
    return _lower_sums_entries(prep, w, c)


def _lower_sums_trials(prep: _Prepared, w: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    """Leave-one-out sums when whole trials are missing: D_b is per stimulus, so per stimulus

    sum_k m = inv (NS_b - w X1_i), sum_k m^2 = inv^2 (NN_b - 2 w H_bi + w^2 X2_i) and
    sum_k m x_i = inv (H_bi - w X2_i), with inv = 1 / (D_b - w_bi) on valid trials, NS and NN the
    per-stimulus sums of N_b and N_b^2, and H_bi = sum_k N_b x_i. Arrays are (S, B, P); the sums over
    stimuli are einsum contractions.
    """
    n_res = len(w)
    total = (w @ prep.x0).reshape(n_res, prep.n_stimuli, prep.n_cat).transpose(1, 0, 2)  # (S, B, K)
    cross = np.matmul(total, prep.x_sp.transpose(0, 2, 1))  # H, (S, B, P)
    c_t = np.ascontiguousarray(c.T)  # (S, B)
    c_ns = c_t * total.sum(2)
    c_nn = c_t * np.einsum("sbk,sbk->sb", total, total)
    count = np.ascontiguousarray((w @ prep.o_lower[:, :, 0]).T)  # D_b, (S, B)
    others = count[:, :, None] - w[None]  # D_b - w_bi, (S, B, P)
    valid = prep.observed_lower & (others > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        inv = np.where(valid, 1.0 / others, 0.0)
    inv2 = inv * inv
    exact_x = bool(np.array_equal(valid, np.broadcast_to(prep.observed_lower, valid.shape)))
    sums = {}
    for name, (lo, hi) in prep.blocks.items():
        k = slice(lo, hi)
        x1, x2, cb = prep.x1_sp[k], prep.x2_sp[k], c_t[k]
        if exact_x:  # no entry lost its other raters: the x sums are the plain count-weighted ones
            n, sx, sxx = _x_sums(prep, c, lo, hi)
        else:
            validf = valid[k].astype(float)
            n = prep.n_cat * np.einsum("sbp,sb->bp", validf, cb)
            sx = np.einsum("sbp,sb,sp->bp", validf, cb, x1)
            sxx = np.einsum("sbp,sb,sp->bp", validf, cb, x2)
        sq = np.einsum("sbp,sb->bp", inv[k], c_ns[k]) - w * np.einsum(
            "sbp,sb,sp->bp", inv[k], cb, x1
        )
        sqq = (
            np.einsum("sbp,sb->bp", inv2[k], c_nn[k])
            - 2.0 * w * np.einsum("sbp,sbp,sb->bp", inv2[k], cross[k], cb)
            + w * w * np.einsum("sbp,sb,sp->bp", inv2[k], cb, x2)
        )
        sxq = np.einsum("sbp,sbp,sb->bp", inv[k], cross[k], cb) - w * np.einsum(
            "sbp,sb,sp->bp", inv[k], cb, x2
        )
        sums[name] = np.stack([n, sx, sxx, sq, sqq, sxq])
    return sums


def _lower_sums_entries(prep: _Prepared, w: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    """Entry-level missingness or a calibrated mean: m per (stimulus, resample, participant, category).

    Arrays are (S, B, P, K): about K times the work of the trial-level path.
    """
    n_res = len(w)
    n_s, n_k = prep.n_stimuli, prep.n_cat
    total = (w @ prep.x0).reshape(n_res, n_s, n_k).transpose(1, 0, 2)[:, :, None, :]  # (S,B,1,K)
    count = (w @ prep.o_lower.reshape(prep.n_people, -1)).reshape(n_res, n_s, n_k)
    count = np.ascontiguousarray(count.transpose(1, 0, 2))[:, :, None, :]  # D_b, (S, B, 1, K)
    others = count - w[None, :, :, None]  # (S, B, P, K)
    valid = prep.observed_lower & (others > 0)
    x = prep.x_sp[:, None]  # (S, 1, P, K)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.where(valid, (total - w[None, :, :, None] * x) / others, 0.0)
    if prep.lower_calibration is not None:
        slope, intercept = prep.lower_calibration
        m = np.where(valid, expit(slope * clipped_logit(m, prep.eps) + intercept), 0.0)
    weight = np.where(valid, np.ascontiguousarray(c.T)[:, :, None, None], 0.0)
    wm = weight * m
    sums = {}
    for name, (lo, hi) in prep.blocks.items():
        k = slice(lo, hi)
        sums[name] = np.stack(
            [
                weight[k].sum((0, 3)),
                np.einsum("sbpk,spk->bp", weight[k], prep.x_sp[k]),
                np.einsum("sbpk,spk->bp", weight[k], prep.x_sp[k] ** 2),
                wm[k].sum((0, 3)),
                np.einsum("sbpk,sbpk->bp", wm[k], m[k]),
                np.einsum("sbpk,spk->bp", wm[k], prep.x_sp[k]),
            ]
        )
    return sums


def _statistics_block(
    prep: _Prepared, w: np.ndarray, c: np.ndarray
) -> dict[tuple[str, str], np.ndarray]:
    """(B, M + 2) arrays [models..., lower, upper] per (subset, metric) for one block of resamples."""
    w = np.asarray(w, dtype=float)
    c = np.asarray(c, dtype=float)[:, prep.order]
    lower = _lower_sums(prep, w, c)
    out = {}
    for subset, members in prep.subsets.items():
        lo, hi = prep.stimulus_range(subset)
        model_r, model_mse = _model_block(prep, w, c, lo, hi)
        upper_r, best_mse = _upper_block(prep, w, c, subset)
        n, sx, sxx, sq, sqq, sxq = cast(np.ndarray, sum(lower[m] for m in members))
        lower_r = _weighted_mean(pearson_from_sums(n, sx, sq, sxx, sqq, sxq), w)
        lower_mse = _weighted_mean(mse_from_sums(n, sxx, sqq, sxq), w)
        out[subset, "pearson_r"] = np.column_stack([model_r, lower_r, upper_r])
        out[subset, "mse"] = np.column_stack([model_mse, lower_mse, best_mse])
    return out


def bootstrap_statistics(
    ratings: RatingArray,
    probabilities: np.ndarray,
    participant_counts: np.ndarray,
    stimulus_counts: np.ndarray,
    subsets: Sequence[str] = SUBSETS,
    lower_calibration: tuple[float, float] | None = None,
    eps: float = 1e-3,
    max_chunk_elements: int = _CHUNK_ELEMENTS,
    n_jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[tuple[str, str], np.ndarray]:
    """Statistics of every resample given its counts: {(subset, metric): (B, M + 2)} arrays.

    Columns are the models' mean scores, the leave-one-out lower bound and the closed-form upper bound
    (r: mean of count-weighted z-scores, before the shift described in the module docstring; MSE:
    exact best). With all counts equal to one they equal the full-sample statistics. Resamples are
    processed in blocks whose largest intermediate has about ``max_chunk_elements`` elements, in
    ``n_jobs`` threads (default: all CPUs available to the process).
    """
    x = np.asarray(ratings.values, dtype=float)
    y = np.asarray(probabilities, dtype=float)
    if y.ndim != 3 or y.shape[1:] != x.shape[1:]:
        raise ValueError(
            f"predictions have shape {y.shape[1:]}, ratings {x.shape[1:]} (stimuli, categories)"
        )
    w_all = np.asarray(participant_counts)
    c_all = np.asarray(stimulus_counts)
    if w_all.shape[1] != x.shape[0] or c_all.shape[1] != x.shape[1] or len(w_all) != len(c_all):
        raise ValueError("participant/stimulus counts do not match the ratings' shape")
    prep = _Prepared(x, y, ratings.kinds, subsets, lower_calibration, eps)
    step = max(1, int(max_chunk_elements // prep.elements_per_resample()))
    starts = range(0, len(w_all), step)
    workers = _n_workers(n_jobs)

    def block(start: int) -> dict[tuple[str, str], np.ndarray]:
        return _statistics_block(prep, w_all[start : start + step], c_all[start : start + step])

    # Small matrix products run fastest (and do not oversubscribe a busy machine) single-threaded
    # inside BLAS; blocks of resamples run in parallel threads instead (numpy releases the GIL).
    results = []
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
        for start, result in zip(starts, pool.map(block, starts)):
            results.append(result)
            if progress is not None:
                progress(min(step, len(w_all) - start))
    return {key: np.concatenate([r[key] for r in results]) for key in results[0]}


def _n_workers(n_jobs: int | None) -> int:
    """Threads to use: ``n_jobs``, or the CPUs this process may run on when ``None``."""
    if n_jobs is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return max(1, os.cpu_count() or 1)
    if n_jobs < 1:
        raise ValueError("n_jobs must be a positive number of threads or None")
    return int(n_jobs)


# --------------------------------------------------------------------------- inference


@dataclass(frozen=True)
class RatingsBootstrap:
    """Bootstrap results for rating scores.

    ``scores`` (subset, metric, model, estimate, ci_low, ci_high, se), ``ceilings`` (subset, metric,
    bound, estimate, ci_low, ci_high, se, bootstrap_bias), ``comparisons`` (subset, metric, comparison, a, b,
    difference, ci_low, ci_high, p_value, p_holm_sidak, significant) and ``distributions``
    {(subset, metric): DataFrame of resample statistics (models, 'lower', 'upper')}. ``per_participant``
    holds each participant's leave-one-out r / MSE and model scores per subset (for the figures).
    """

    scores: pd.DataFrame
    ceilings: pd.DataFrame
    comparisons: pd.DataFrame
    distributions: dict[tuple[str, str], pd.DataFrame]
    per_participant: pd.DataFrame
    n_resamples: int
    confidence_level: float
    upper_bound_shift: dict[str, float]
    calibration: pd.DataFrame | None = None


def bootstrap_ratings(
    ratings: RatingArray,
    predictions: ModelPredictions,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    calibrate: bool = False,
    subsets: Sequence[str] = SUBSETS,
    alpha: float = 0.05,
    random_state: int | np.random.Generator | None = None,
    max_chunk_elements: int = _CHUNK_ELEMENTS,
    n_jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
    bias_correct_bounds: bool = True,
) -> RatingsBootstrap:
    """Scores, noise ceiling, CIs and Holm-Sidak corrected bootstrap tests, per stimulus subset.

    Subsets: 'all' scored stimuli, 'controversial' and 'natural' (skipped when absent). Point
    estimates are the full-sample statistics (upper bound in r: optimised when ratings are missing);
    CIs are bootstrap percentile intervals from ``n_resamples`` resamples of participants and
    stimuli (stratified by targeted model pair / natural). With ``calibrate=True`` models' logits
    and the leave-one-out predictions are recalibrated once on the full sample and the calibration is
    held fixed across resamples. With ``bias_correct_bounds`` (default) the bounds' resample
    distributions are re-centred on their estimates before intervals and tests (module docstring).
    """
    check_confidence_level(confidence_level)
    if tuple(ratings.stimuli) != tuple(predictions.stimuli):
        raise ValueError("model predictions and ratings have different stimuli")
    unknown = sorted(set(subsets) - set(SUBSETS))
    if unknown:
        raise ValueError(f"unknown subset(s) {unknown}; choose from {list(SUBSETS)}")
    calibration = None
    if calibrate:
        predictions, calibration = calibrate_predictions(predictions, ratings)
    kinds = np.asarray(ratings.kinds, dtype=object)
    masks = {s: np.ones(kinds.size, bool) if s == "all" else kinds == s for s in subsets}
    masks = {s: m for s, m in masks.items() if m.any()}
    if not masks:
        raise ValueError(f"no stimuli of the requested subsets {list(subsets)}")

    # Point estimates per subset (one recalibration of the leave-one-out predictions, on all stimuli).
    lower_calibration = leave_one_out_calibration(ratings) if calibrate else None
    estimates: dict[tuple[str, str], np.ndarray] = {}
    shift: dict[str, float] = {}
    people_rows = []
    for subset, mask in masks.items():
        sub = ratings.select_stimuli(mask)
        ceiling = noise_ceiling(sub, calibrate=lower_calibration or False)
        r, mse = participant_scores(sub, predictions.probabilities[:, mask])
        estimates[subset, "pearson_r"] = np.r_[np.nanmean(r, 1), ceiling.lower, ceiling.upper]
        estimates[subset, "mse"] = np.r_[np.nanmean(mse, 1), ceiling.lower_mse, ceiling.upper_mse]
        shift[subset] = ceiling.upper - upper_bound_closed_form(sub).value
        frame = ceiling.per_participant.assign(subset=subset)
        for index, model in enumerate(predictions.models):
            frame[f"r:{model}"] = r[index]
            frame[f"mse:{model}"] = mse[index]
        people_rows.append(frame)

    w, c = draw_resample_counts(
        ratings.strata, len(ratings.participants), n_resamples, random_state
    )
    stats = bootstrap_statistics(
        ratings,
        predictions.probabilities,
        w,
        c,
        subsets=list(masks),
        lower_calibration=lower_calibration,
        max_chunk_elements=max_chunk_elements,
        n_jobs=n_jobs,
        progress=progress,
    )

    columns = [*predictions.models, "lower", "upper"]
    score_rows, ceiling_rows, comparison_rows, distributions = [], [], [], {}
    for (subset, metric), dist in stats.items():
        dist = dist.copy()
        if metric == "pearson_r":
            dist[:, -1] += shift[subset]
        est = estimates[subset, metric]
        bias = np.nanmean(dist[:, -2:], axis=0) - est[-2:]
        if bias_correct_bounds:
            dist[:, -2:] -= bias
        low, high = percentile_interval(dist, confidence_level)
        se = np.nanstd(dist, axis=0, ddof=1) if len(dist) > 1 else np.full(dist.shape[1], np.nan)
        distributions[subset, metric] = pd.DataFrame(dist, columns=columns)
        for j, name in enumerate(columns):
            row = {
                "subset": subset,
                "metric": metric,
                "estimate": est[j],
                "ci_low": low[j],
                "ci_high": high[j],
                "se": se[j],
            }
            if name in ("lower", "upper"):
                bound_bias = bias[j - len(predictions.models)]
                ceiling_rows.append({"bound": name, **row, "bootstrap_bias": bound_bias})
            else:
                score_rows.append({"model": name, **row})
        family = []
        n_models = len(predictions.models)
        for a, b in combinations(range(n_models), 2):
            family.append(("model vs model", a, b))
        for a in range(n_models):
            family.append(("model vs lower bound", a, n_models))
        rows = []
        for kind, a, b in family:
            d = dist[:, a] - dist[:, b]
            d_low, d_high = percentile_interval(d[:, None], confidence_level)
            rows.append(
                {
                    "subset": subset,
                    "metric": metric,
                    "comparison": kind,
                    "a": columns[a],
                    "b": columns[b],
                    "difference": est[a] - est[b],
                    "ci_low": float(d_low[0]),
                    "ci_high": float(d_high[0]),
                    "p_value": bootstrap_p_value(d),
                }
            )
        corrected = holm_sidak([r["p_value"] for r in rows], alpha)
        for row, p_adj, rej in zip(rows, corrected.p_adjusted, corrected.reject):
            row["p_holm_sidak"] = float(p_adj)
            row["significant"] = bool(rej)
        comparison_rows.extend(rows)

    return RatingsBootstrap(
        scores=pd.DataFrame(score_rows),
        ceilings=pd.DataFrame(ceiling_rows),
        comparisons=pd.DataFrame(comparison_rows),
        distributions=distributions,
        per_participant=pd.concat(people_rows, ignore_index=True),
        n_resamples=int(n_resamples),
        confidence_level=float(confidence_level),
        upper_bound_shift=shift,
        calibration=calibration,
    )
