"""Design-weighted scores of an adaptively allocated rating study: every estimate is the pool-wide
quantity of a uniform design, whatever the allocation's weights were (docs/adaptive.md).

Each participant's score of a model is the Horvitz-Thompson mean over the pool of minus the mean
squared error between their ratings and the model's probabilities (``planning.design.additive_scores``;
Horvitz & Thompson 1952), each rated stimulus weighted by 1 / its inclusion probability in that
participant's draw. Given the earlier participants the draw is fixed before the participant
answers, so each participant's score has the pool-wide mean as its expectation; participants are
the independent units (t intervals, one-sample t-tests of the per-participant differences,
Holm-Sidak over the pairs: Holm 1979, Sidak 1967). Noise ceilings: the same score of the mean of
the other raters of each stimulus (lower) and of all its raters (upper) (Nili et al. 2014's
bounds on this score), by Hájek's ratio estimate (Hájek 1971) over the stimuli that have the
other raters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

from humanlike.analysis.planning.design import additive_scores, hajek_mean

SCORE_LABEL = ("minus the mean squared error per rating (the additive score), Horvitz-Thompson "
               "weighted by each stimulus' inclusion probability: pool-wide, as under uniform "
               "allocation")


@dataclass(frozen=True)
class WeightedScores:
    """Per model and participant ``scores`` (M, N); per participant and model pair (``pairs``,
    ``comparisons``' order) the HT ``differences`` and the same ``scaled`` to [-1, 1] by each
    participant's own bound (``scaled_differences``), what a sequential test reads; the panel's
    tables ``ceilings``, ``models`` (one row per model) and ``comparisons`` (one row per pair)."""

    scores: np.ndarray
    differences: np.ndarray
    scaled: np.ndarray
    pairs: list[tuple[str, str]]
    ceilings: pd.DataFrame
    models: pd.DataFrame
    comparisons: pd.DataFrame


def _interval(values: np.ndarray, level: float) -> tuple[float, float, float]:
    """Mean and its two-sided t interval over the finite entries."""
    v = values[np.isfinite(values)]
    if v.size < 2:
        return (float(v.mean()) if v.size else np.nan), np.nan, np.nan
    half = stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return float(v.mean()), float(v.mean() - half), float(v.mean() + half)


def inclusion_array(frame: pd.DataFrame, participants: Sequence[str],
                    stimuli: Sequence[str]) -> np.ndarray:
    """(N, S) inclusion probabilities from rows ``participant``, ``stimulus``,
    ``inclusion_probability`` (NaN where a pair has none)."""
    wide = (frame.astype({"participant": str, "stimulus": str})
            .groupby(["participant", "stimulus"])["inclusion_probability"].first().unstack())
    return wide.reindex(index=list(map(str, participants)),
                        columns=list(map(str, stimuli))).to_numpy(dtype=float)


def pair_bounds(probabilities: np.ndarray) -> np.ndarray:
    """(P, S) the largest |fit_a(s) - fit_b(s)| any rating in [0, 1]^K gives, pairs in
    ``combinations`` order: d = (1/K) sum_k delta_k (2 x_k - t_k) (delta = y_a - y_b,
    t = y_a + y_b) is linear in x, so its extremes take each x_k at 0 or 1: the larger of
    sum_k max(delta_k (2 - t_k), -delta_k t_k) and -sum_k min(...), over K."""
    y = np.asarray(probabilities, dtype=float)
    pairs = list(combinations(range(y.shape[0]), 2))
    a = np.array([i for i, _ in pairs], dtype=int)
    b = np.array([j for _, j in pairs], dtype=int)
    delta, total = y[a] - y[b], y[a] + y[b]
    at_one, at_zero = delta * (2 - total), -delta * total
    high = np.maximum(at_one, at_zero).mean(-1)
    low = np.minimum(at_one, at_zero).mean(-1)
    return np.maximum(high, -low)


def scaled_differences(differences: np.ndarray, probabilities: np.ndarray, drawn: np.ndarray,
                       pi: np.ndarray, n_stimuli: int | None = None,
                       design: np.ndarray | None = None) -> np.ndarray:
    """(N, P) each participant's HT difference of each pair divided by its largest possible value,
    so it lies in [-1, 1]. With ``design`` (N, S: each participant's inclusion probabilities,
    drawn or not; columns after the S of the arrays are pool stimuli nobody rated yet, whose bound
    is taken as 1, the largest any score difference can be) the bound is fixed before the draw:
    the largest (1/S) sum_{s in draw} bound_ab(s) / pi_s over the ``sum(pi)``-stimulus draws the
    design can make (``pair_bounds``),
    so under a pool-wide difference of 0 each scaled value has conditional mean 0 given the
    earlier participants and a bounded-mean sequential test (Waudby-Smith & Ramdas 2024) tests the
    pool-wide difference. Without it, the drawn stimuli's own bound (1/S) sum_drawn bound_ab(s) /
    pi_s: that reweights participants by their draw, so the scaled mean is not the pool-wide
    difference (tests/analysis/planning/test_sequential_study.py). ``n_stimuli``: the pool's size
    (default S)."""
    bound = pair_bounds(probabilities)  # (P, S)
    if design is not None:
        q = np.asarray(design, dtype=float)
        extra = np.ones((bound.shape[0], q.shape[-1] - bound.shape[1]))  # unrated pool stimuli
        full = np.concatenate([bound, extra], axis=1)
        ratio = np.sort(full[None] / q[:, None, :], axis=-1)[..., ::-1]  # (N, P, S) descending
        size = np.clip(np.rint(q.sum(-1)).astype(int), 1, q.shape[-1])  # the design's sample size
        top = np.take_along_axis(np.cumsum(ratio, axis=-1),
                                 np.broadcast_to((size - 1)[:, None, None], (*ratio.shape[:2], 1)),
                                 axis=-1)[..., 0]
        reach = top / (n_stimuli or q.shape[-1])
    else:
        weight = np.where(drawn, 1.0 / np.where(drawn, pi, 1.0), 0.0)  # (N, S)
        reach = weight @ bound.T / (n_stimuli or weight.shape[1])  # (N, P)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(reach > 0, differences / np.where(reach > 0, reach, 1.0), 0.0)


def ceiling_fits(ratings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, S) each participant's fit (minus the mean squared error over categories) to the mean of
    the other raters of each stimulus (lower bound; NaN with no other rater) and to the mean of
    all its raters (upper bound)."""
    x = np.asarray(ratings, dtype=float)
    observed = np.isfinite(x)
    total = np.where(observed, x, 0.0).sum(0)
    count = observed.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        everyone = total / count
        others = (total - np.where(observed, x, 0.0)) / (count - observed)
    upper = -((x - everyone) ** 2).mean(-1)
    lower = np.where(count - observed > 0, -((x - others) ** 2), np.nan).mean(-1)
    return lower, upper


def weighted_scores(ratings: np.ndarray, probabilities: np.ndarray, pi: np.ndarray,
                    models: list[str], confidence_level: float = 0.95,
                    alpha: float = 0.05, n_stimuli: int | None = None,
                    design: np.ndarray | None = None) -> WeightedScores:
    """The design-weighted analysis of (N, S, K) ``ratings`` (NaN: not rated) against (M, S, K)
    ``probabilities`` with (N, S) inclusion probabilities ``pi`` (NaN where not drawn; a rating
    without one is left out). ``n_stimuli``: the pool's size, the HT mean's denominator, when the
    arrays leave out stimuli nobody rated yet (default S). ``design``: each participant's
    inclusion probabilities over all S stimuli, for the bound the sequential test's scaled values
    need (``scaled_differences``)."""
    x = np.asarray(ratings, dtype=float)
    p = np.asarray(pi, dtype=float)
    if x.shape[:2] != p.shape:
        raise ValueError(f"pi: expected shape {x.shape[:2]}, got {p.shape}")
    known = np.isfinite(p) & (p > 0)
    x = np.where(known[..., None], x, np.nan)
    rated = np.isfinite(x).any(-1)
    scores = additive_scores(x, probabilities, np.where(known, p, 1.0)).T  # (M, N)
    if n_stimuli is not None:  # the unrated stimuli add 0 to every HT sum; only S changes
        if n_stimuli < x.shape[1]:
            raise ValueError(f"n_stimuli: {n_stimuli} is fewer than the {x.shape[1]} stimuli rated")
        scores = scores * x.shape[1] / n_stimuli
    scores[:, ~rated.any(1)] = np.nan  # a participant with nothing weighted has no score
    lower, upper = ceiling_fits(x)
    weight = np.where(known, p, 1.0)
    ceilings = pd.DataFrame([
        dict(zip(("estimate", "ci_low", "ci_high"),
                 _interval(hajek_mean(np.nan_to_num(fit), rated & np.isfinite(fit), weight),
                           confidence_level)), subset="all", bound=bound)
        for bound, fit in (("lower", lower), ("upper", upper))])
    table = pd.DataFrame([dict(zip(("estimate", "ci_low", "ci_high"),
                                   _interval(scores[m], confidence_level)), subset="all", model=name)
                          for m, name in enumerate(models)])
    pairs = list(combinations(range(len(models)), 2))
    differences = np.stack([scores[a] - scores[b] for a, b in pairs], axis=1) if pairs else \
        np.zeros((x.shape[0], 0))
    scaled = scaled_differences(differences, probabilities, rated, np.where(known, p, 1.0),
                                n_stimuli, design)
    rows = []
    for a, b in pairs:
        d = scores[a] - scores[b]
        d = d[np.isfinite(d)]
        estimate, low, high = _interval(d, confidence_level)
        p_value = (float(stats.ttest_1samp(d, 0.0).pvalue) if d.size > 1 and d.std() > 0
                   else 1.0)
        rows.append({"subset": "all", "a": models[a], "b": models[b], "difference": estimate,
                     "ci_low": low, "ci_high": high, "p": p_value})
    comparisons = pd.DataFrame(rows, columns=["subset", "a", "b", "difference", "ci_low",
                                              "ci_high", "p"])
    if len(comparisons):
        reject, adjusted, _, _ = multipletests(comparisons["p"], alpha=alpha, method="holm-sidak")
        comparisons = comparisons.assign(p_holm_sidak=adjusted, significant=reject)
    return WeightedScores(scores, differences, np.where(np.isfinite(differences), scaled, np.nan),
                          [(models[a], models[b]) for a, b in pairs], ceilings, table, comparisons)
