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
  exactly for each resample (all copies of participant i are left out). Its (stimulus, resample,
  participant) terms are summed over slices of a few stimuli at a time, which stay in the CPU
  cache, so a block holds enough resamples for the matrix products to run as matrix-matrix ones.
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
METRICS = ("pearson_r", "mse")
_CHUNK_ELEMENTS = 2_000_000
_CACHE_ELEMENTS = 2**17
"""Elements of one (stimuli, resamples, participants) slice of the leave-one-out sums (1 MB)."""
_MAX_BLOCK = 64
"""Resamples per block at most when the (resamples, participants) arrays would outgrow
``_CACHE_ELEMENTS``: enough for the matrix products to reach BLAS's matrix-matrix speed."""


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
        metrics: Sequence[str] = METRICS,
    ) -> None:
        n_people, n_stimuli, n_cat = x.shape
        self.metrics = tuple(metrics)
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
        if not np.array_equal(self.order, np.arange(n_stimuli)):  # (no copy when already sorted)
            x = x[:, self.order]
            y = y[:, self.order]
        observed = np.isfinite(x)
        complete = bool(observed.all()) and x.dtype == float and x.flags.c_contiguous
        self.x3 = x if complete else np.where(observed, x, 0.0)  # read only: no copy needed
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

    @property
    def sliced_lower(self) -> bool:
        """Whether the leave-one-out sums run over stimulus slices (trial-level, uncalibrated)."""
        return self.o_lower.shape[2] == 1 and self.lower_calibration is None

    def elements_per_resample(self) -> int:
        """Size of the largest per-resample intermediate (sliced: a row of S * K or P)."""
        if self.sliced_lower:
            return max(self.x0.shape[1], self.n_people)
        return max(self.n_stimuli * self.n_people * self.o_lower.shape[2], self.x0.shape[1])

    def block_size(self, max_chunk_elements: int) -> int:
        """Resamples per block, so that the block's intermediates stay near the size limits."""
        # largest intermediate near max_chunk_elements; sliced, also (resamples x participants)
        # near _CACHE_ELEMENTS, though with no fewer than _MAX_BLOCK resamples for that
        step = max(1, int(max_chunk_elements // self.elements_per_resample()))
        if not self.sliced_lower:
            return step
        return min(step, max(_MAX_BLOCK, _CACHE_ELEMENTS // self.n_people))


Memo = dict[tuple[int, int], tuple[np.ndarray, ...]]
"""Per block of resamples: the ``_x_sums`` of each stimulus range, computed once."""


def _x_sums(
    prep: _Prepared, c: np.ndarray, lo: int, hi: int, memo: Memo | None = None
) -> tuple[np.ndarray, ...]:
    """Count-weighted n, Sx, Sxx of every participant on stimuli lo:hi: three (B, P) arrays."""
    if memo is not None and (lo, hi) in memo:
        return memo[lo, hi]
    cs = c[:, lo:hi]
    sums = cs @ prep.n_s[:, lo:hi].T, cs @ prep.x1_s[:, lo:hi].T, cs @ prep.x2_s[:, lo:hi].T
    if memo is not None:
        memo[lo, hi] = sums
    return sums


def _model_block(
    prep: _Prepared, w: np.ndarray, c: np.ndarray, lo: int, hi: int, memo: Memo | None = None
):
    """Participant-weighted mean r and MSE of every model, (B, M) each, on stimuli lo:hi."""
    n, sx, sxx = _x_sums(prep, c, lo, hi, memo)
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


def _upper_block(
    prep: _Prepared, w: np.ndarray, c: np.ndarray, subset: str, memo: Memo | None = None
):
    """Closed-form upper bound in r and exact best MSE (None unless ``prep.metrics`` has 'mse'),
    (B,) each, on a subset's stimuli.

    Where no resampled participant rated an entry, numerator and denominator of the prediction are
    both exactly zero, so the division uses max(den, tiny) instead of a masked division.
    """
    lo, hi = prep.stimulus_range(subset)
    o_flat, x0 = prep.subset_arrays[subset]
    n_res = len(w)
    shape_q = (n_res, hi - lo, prep.n_cat)
    shape_o = (n_res, hi - lo, prep.o_unit.shape[2])
    tiny = np.finfo(float).tiny
    n, sx, sxx = _x_sums(prep, c, lo, hi, memo)
    # r: the mean over resampled observers of count-weighted z-scores.
    mean = _ratio(sx, n)
    sd = np.sqrt(np.maximum(_ratio(sxx, n) - mean**2, 0.0))
    usable = (n > 0) & (sd > 1e-12 * np.maximum(np.abs(mean), 1.0)) & (w > 0)
    a = _ratio(np.where(usable, w, 0.0), sd)
    o_part = np.concatenate([a * mean, w * usable]) @ o_flat  # both mask products at once
    num = (a @ x0).reshape(shape_q) - o_part[:n_res].reshape(shape_o)
    q = num / np.maximum(o_part[n_res:].reshape(shape_o), tiny)
    sq, sqq, sxq = _prediction_sums(prep, q, c, subset)
    upper_r = _weighted_mean(pearson_from_sums(n, sx, sq, sxx, sqq, sxq), w)
    if "mse" not in prep.metrics:
        return upper_r, None
    # MSE: argmin of the weighted mean MSE, participant weights w_i / n_i.
    v = _ratio(w, n)
    q = (v @ x0).reshape(shape_q) / np.maximum((v @ o_flat).reshape(shape_o), tiny)
    sq, sqq, sxq = _prediction_sums(prep, q, c, subset)
    best_mse = _weighted_mean(mse_from_sums(n, sxx, sqq, sxq), w)
    return upper_r, best_mse


def _lower_sums(
    prep: _Prepared, w: np.ndarray, c: np.ndarray, memo: Memo | None = None
) -> dict[str, np.ndarray]:
    """Per kind block: (6, B, P) sums n, Sx, Sxx, Sq, Sqq, Sxq of x_i and its leave-one-out mean.

    m = (N_b - w_bi x_i) / (D_b - w_bi) with N_b = sum_j w_bj x_j and D_b = sum_j w_bj o_j (all
    copies of participant i are left out; entries no other resampled participant rated drop out).
    """
    if prep.sliced_lower and np.array_equal(w, np.round(w)):
        return _lower_sums_trials(prep, w, c, memo)
    return _lower_sums_entries(prep, w, c)


def _lower_sums_trials(
    prep: _Prepared, w: np.ndarray, c: np.ndarray, memo: Memo | None = None
) -> dict[str, np.ndarray]:
    """Leave-one-out sums when whole trials are missing: D_b is per stimulus, so per stimulus

    sum_k m = inv (NS_b - w X1_i), sum_k m^2 = inv^2 (NN_b - 2 w H_bi + w^2 X2_i) and
    sum_k m x_i = inv (H_bi - w X2_i), with inv = 1 / (D_b - w_bi) on valid trials (D_b > w_bi), NS
    and NN the per-stimulus sums of N_b and N_b^2, and H_bi = sum_k N_b x_i.

    A participant enters inv only through its count w_bi, a small integer: the terms without H are
    matrix products of the participants' (observed, X1, X2) x stimuli matrices with per-count
    tables c / (D_b - v)^a, v = 0..max w, read at v = w_bi. The H terms are formed and summed over
    a few stimuli at a time (``_CACHE_ELEMENTS``), in preallocated buffers. Trials whose only
    resampled rater is the participant left out (D_b = w_bi) are rare; their share of the n, Sx,
    Sxx sums is subtracted.
    """
    n_res, n_people = w.shape
    total = np.ascontiguousarray(
        (w @ prep.x0).reshape(n_res, prep.n_stimuli, prep.n_cat).transpose(1, 0, 2)
    )  # N_b, (S, B, K)
    c_t = np.ascontiguousarray(c.T)  # (S, B)
    count = np.ascontiguousarray((w @ prep.o_lower[:, :, 0]).T)  # D_b, (S, B)
    counts = w.astype(np.intp)  # resample counts are integers
    levels = int(counts.max()) + 1
    others = count[:, :, None] - np.arange(levels)  # D_b - v, (S, B, V)
    with np.errstate(divide="ignore"):
        inv = np.where(others > 0, 1.0 / others, 0.0)
    cw = c_t[:, :, None]
    # per-count tables, (S, B * V) each: c inv NS, c inv^2 NN, c inv, c inv^2 (and lost trials)
    ns_nn = np.concatenate([cw * total.sum(2)[:, :, None] * inv,
                            cw * np.einsum("sbk,sbk->sb", total, total)[:, :, None] * inv * inv],
                           axis=1).reshape(prep.n_stimuli, -1)
    c_inv = np.concatenate([cw * inv, cw * inv * inv], axis=1).reshape(prep.n_stimuli, -1)
    lost_table = cw * (others <= 0)
    any_lost = bool(lost_table.any())
    lost_table = lost_table.reshape(prep.n_stimuli, -1)
    pick = (np.arange(n_res)[:, None] * levels + counts)  # (B, P) column of each participant

    def at_count(products: np.ndarray, parts: int) -> list[np.ndarray]:
        """(P, parts * B * V) products read at each participant's own count: ``parts`` (B, P)."""
        split = products.reshape(n_people, parts, n_res * levels)
        return [np.take_along_axis(split[:, j], pick.T, axis=1).T for j in range(parts)]

    ct = cw * total  # c N_b: H is then c H
    step = max(1, _CACHE_ELEMENTS // (n_res * n_people))
    shape = (step, n_res, n_people)
    inv_buffer, cross, term = np.empty(shape), np.empty(shape), np.empty((n_res, n_people))
    most = counts.max(1)
    o_s = prep.o_unit[:, :, 0]
    sums = {}
    for name, (lo, hi) in prep.blocks.items():
        n, sx, sxx = _x_sums(prep, c, lo, hi, memo)
        t_ns, t_nn = at_count(o_s[:, lo:hi] @ ns_nn[lo:hi], 2)
        (t_x1,) = at_count(prep.x1_s[:, lo:hi] @ c_inv[lo:hi, : n_res * levels], 1)
        t_x2, t_x2i = at_count(prep.x2_s[:, lo:hi] @ c_inv[lo:hi], 2)
        if any_lost:
            lost = [o_s[:, lo:hi], prep.x1_s[:, lo:hi], prep.x2_s[:, lo:hi]]
            n_lost, sx_lost, sxx_lost = (at_count(m @ lost_table[lo:hi], 1)[0] for m in lost)
            n, sx, sxx = n - prep.n_cat * n_lost, sx - sx_lost, sxx - sxx_lost
        acc = np.zeros((2, n_res, n_people))  # sum of c inv H, c inv^2 H
        for first in range(lo, hi, step):
            k = slice(first, min(first + step, hi))
            size = k.stop - k.start
            i, h = inv_buffer[:size], cross[:size]
            np.subtract(count[k, :, None], w, out=i)  # D_b - w_bi
            if (count[k] > most).all():  # positive for every participant
                np.reciprocal(i, out=i)
            else:  # D_b - w_bi = 0 (a lost trial, or an unobserved one: H = 0) stays 0
                np.divide(1.0, i, out=i, where=i > 0)
            np.matmul(ct[k], prep.x_sp[k].transpose(0, 2, 1), out=h)  # c H, (s, B, P)
            for j in range(size):  # fused in cache: acc0 += inv cH, acc1 += inv^2 cH
                np.multiply(i[j], h[j], out=term)
                acc[0] += term
                term *= i[j]
                acc[1] += term
        sq = t_ns - w * t_x1
        sqq = t_nn - 2.0 * w * acc[1] + w * w * t_x2i
        sxq = acc[0] - w * t_x2
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
    memo: Memo = {}
    lower = _lower_sums(prep, w, c, memo)
    out: dict[tuple[str, str], np.ndarray] = {}
    done: dict[tuple[str, ...], str] = {}  # subsets of the same stimuli (e.g. all = natural)
    for subset, members in prep.subsets.items():
        same = done.setdefault(tuple(members), subset)
        if same != subset:
            for metric in prep.metrics:
                out[subset, metric] = out[same, metric]
            continue
        lo, hi = prep.stimulus_range(subset)
        model_r, model_mse = _model_block(prep, w, c, lo, hi, memo)
        upper_r, best_mse = _upper_block(prep, w, c, subset, memo)
        n, sx, sxx, sq, sqq, sxq = cast(np.ndarray, sum(lower[m] for m in members))
        if "pearson_r" in prep.metrics:
            lower_r = _weighted_mean(pearson_from_sums(n, sx, sq, sxx, sqq, sxq), w)
            out[subset, "pearson_r"] = np.column_stack([model_r, lower_r, upper_r])
        if "mse" in prep.metrics:
            lower_mse = _weighted_mean(mse_from_sums(n, sxx, sqq, sxq), w)
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
    metrics: Sequence[str] = METRICS,
) -> dict[tuple[str, str], np.ndarray]:
    """Statistics of every resample given its counts: {(subset, metric): (B, M + 2)} arrays.

    Columns are the models' mean scores, the leave-one-out lower bound and the closed-form upper bound
    (r: mean of count-weighted z-scores, before the shift described in the module docstring; MSE:
    exact best). With all counts equal to one they equal the full-sample statistics. Resamples are
    processed in blocks whose largest intermediate has about ``max_chunk_elements`` elements (and,
    when the leave-one-out sums run over stimulus slices, cache-sized otherwise), in
    ``n_jobs`` threads (default: all CPUs available to the process). ``metrics``: 'pearson_r' and /
    or 'mse' (each one's numbers are the same whether the other is computed or not).
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
    unknown = sorted(set(metrics) - set(METRICS))
    if unknown or not metrics:
        raise ValueError(f"metrics must be some of {list(METRICS)}, got {list(metrics)}")
    prep = _Prepared(x, y, ratings.kinds, subsets, lower_calibration, eps, metrics)
    step = prep.block_size(max_chunk_elements)
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
    metrics: Sequence[str] = METRICS,
) -> RatingsBootstrap:
    """Scores, noise ceiling, CIs and Holm-Sidak corrected bootstrap tests, per stimulus subset.

    Subsets: 'all' scored stimuli, 'controversial' and 'natural' (skipped when absent). Point
    estimates are the full-sample statistics (upper bound in r: optimised when ratings are missing);
    CIs are bootstrap percentile intervals from ``n_resamples`` resamples of participants and
    stimuli (stratified by targeted model pair / natural). With ``calibrate=True`` models' logits
    and the leave-one-out predictions are recalibrated once on the full sample and the calibration is
    held fixed across resamples. With ``bias_correct_bounds`` (default) the bounds' resample
    distributions are re-centred on their estimates before intervals and tests (module docstring).
    ``metrics``: the measures resampled and reported, 'pearson_r' and / or 'mse' (the live panel
    shows r only); a measure's results do not depend on whether the other is computed.
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
    computed: dict[bytes, tuple] = {}  # subsets of the same stimuli (e.g. all = natural) once
    for subset, mask in masks.items():
        if mask.tobytes() not in computed:
            whole = mask.all() and ratings.values.flags.c_contiguous  # no copy of all stimuli
            sub = ratings if whole else ratings.select_stimuli(mask)
            ceiling = noise_ceiling(sub, calibrate=lower_calibration or False,
                                    mse="mse" in metrics)
            # the closed form is deterministic: where the ceiling used it, the gap is exactly 0
            closed = (ceiling.upper if ceiling.method == "closed_form"
                      else upper_bound_closed_form(sub).value)
            computed[mask.tobytes()] = (
                ceiling, *participant_scores(sub, predictions.probabilities[:, mask]), closed)
        ceiling, r, mse, closed = computed[mask.tobytes()]
        estimates[subset, "pearson_r"] = np.r_[np.nanmean(r, 1), ceiling.lower, ceiling.upper]
        estimates[subset, "mse"] = np.r_[np.nanmean(mse, 1), ceiling.lower_mse, ceiling.upper_mse]
        shift[subset] = ceiling.upper - closed
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
        metrics=metrics,
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
