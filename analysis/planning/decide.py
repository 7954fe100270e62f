"""The report's model comparisons for many simulated studies at once (no loop over resamples).

Per study: a model's score is the mean over participants of the Pearson r between a participant's
ratings and the model's probabilities over the entries the participant rated; its bootstrap draws
participants with replacement and, independently, stimuli with replacement within strata (targeted
model pair, natural), as ``analysis.ratings.bootstrap`` does (Golan, Raju & Kriegeskorte 2020). A
resample's statistics are count-weighted sums (``pearson_from_sums``), formed for every
(study, resample, participant, model) by batched matrix products; p-values are the bootstrap
percentile test (Davison & Hinkley 1997, ch. 4) and a study's model-vs-model family is Holm-Sidak
corrected (``analysis._resampling.holm_sidak``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from humanlike.analysis._resampling import holm_sidak
from humanlike.analysis.ratings.pearson import pearson_from_sums


def model_pairs(n_models: int) -> list[tuple[int, int]]:
    """The pairwise comparisons (a, b), a < b, in the report's order."""
    return list(combinations(range(n_models), 2))


def draw_counts(
    strata: Sequence[str], n_studies: int, n_participants: int, n_resamples: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Participant (R, B, N) and stratified stimulus (R, B, S) resample counts, as
    ``draw_resample_counts`` per study (Multinomial(n, 1/n) rows)."""
    labels = np.asarray(strata, dtype=object)
    people = rng.multinomial(n_participants, np.full(n_participants, 1.0 / n_participants),
                             size=(n_studies, n_resamples))
    stimuli = np.zeros((n_studies, n_resamples, labels.size), dtype=np.int64)
    for label in sorted(set(labels.tolist())):
        idx = np.flatnonzero(labels == label)
        stimuli[..., idx] = rng.multinomial(idx.size, np.full(idx.size, 1.0 / idx.size),
                                            size=(n_studies, n_resamples))
    return people, stimuli


def resampled_scores(
    ratings: np.ndarray, probabilities: np.ndarray, participant_counts: np.ndarray,
    stimulus_counts: np.ndarray,
) -> np.ndarray:
    """(R, B, M) count-weighted mean participant r of each model in each resample.

    ``ratings`` (R, N, S, K) with NaN where not rated (whole trials), ``probabilities`` (M, S, K),
    counts (R, B, N) and (R, B, S). With all counts one this is the full-sample score."""
    x = np.asarray(ratings, dtype=float)
    y = np.asarray(probabilities, dtype=float)
    n_studies, n_people, n_stimuli, _ = x.shape
    n_models = y.shape[0]
    observed = np.isfinite(x)
    o = observed.astype(float)
    x0 = np.where(observed, x, 0.0)
    # per (study, participant, stimulus) sums over categories
    n_s, x1_s, x2_s = o.sum(3), x0.sum(3), (x0 * x0).sum(3)
    model_sums = np.concatenate([
        np.einsum("rnsk,msk->rsnm", o, y), np.einsum("rnsk,msk->rsnm", o, y * y),
        np.einsum("rnsk,msk->rsnm", x0, y)], axis=3).reshape(n_studies, n_stimuli, -1)
    c = np.asarray(stimulus_counts, dtype=float)
    w = np.asarray(participant_counts, dtype=float)
    n = c @ n_s.transpose(0, 2, 1)  # (R, B, N)
    sx = c @ x1_s.transpose(0, 2, 1)
    sxx = c @ x2_s.transpose(0, 2, 1)
    sums = (c @ model_sums).reshape(*c.shape[:2], n_people, 3, n_models)
    sy, syy, sxy = sums[..., 0, :], sums[..., 1, :], sums[..., 2, :]
    r = pearson_from_sums(n[..., None], sx[..., None], sy, sxx[..., None], syy, sxy)
    ok = np.isfinite(r)
    weight = np.where(ok, w[..., None], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weight * np.where(ok, r, 0.0)).sum(2) / weight.sum(2)


def percentile_p_values(differences: np.ndarray) -> np.ndarray:
    """Two-sided bootstrap p along axis 1 of (R, B, ...) differences, NaN resamples left out:
    min(1, 2 min(#(d <= 0) + 1, #(d >= 0) + 1) / (B' + 1)) (``bootstrap_p_value``, vectorised)."""
    finite = np.isfinite(differences)
    size = finite.sum(1)
    below = (np.sum(finite & (differences <= 0), axis=1) + 1) / (size + 1)
    above = (np.sum(finite & (differences >= 0), axis=1) + 1) / (size + 1)
    return np.where(size > 0, np.minimum(1.0, 2.0 * np.minimum(below, above)), np.nan)


@dataclass(frozen=True)
class Decisions:
    """Per study: the models' scores (R, M), each pair's difference a - b, Holm-Sidak p and
    significance (R, P), with ``pairs`` the (a, b) model indices."""

    scores: np.ndarray
    differences: np.ndarray
    p_holm_sidak: np.ndarray
    significant: np.ndarray
    pairs: tuple[tuple[int, int], ...]

    def winners(self) -> np.ndarray:
        """(R,) index of the declared winner: the best-scoring model when it is significantly
        better than every other model; -1 (undecided) otherwise."""
        n_models = self.scores.shape[1]
        best = np.argmax(np.nan_to_num(self.scores, nan=-np.inf), axis=1)
        counts = np.zeros(len(best), dtype=int)
        for j, (a, b) in enumerate(self.pairs):
            won = self.significant[:, j] & (
                ((best == a) & (self.differences[:, j] > 0)) | ((best == b) & (self.differences[:, j] < 0)))
            counts += won
        return np.where(counts == n_models - 1, best, -1)


def decide(
    ratings: np.ndarray, probabilities: np.ndarray, strata: Sequence[str], n_resamples: int,
    alpha: float, rng: np.random.Generator,
) -> Decisions:
    """Scores, differences and Holm-Sidak decisions (family: every model pair) of R studies."""
    n_studies, n_people = ratings.shape[:2]
    w, c = draw_counts(strata, n_studies, n_people, n_resamples, rng)
    estimate = resampled_scores(ratings, probabilities, np.ones((n_studies, 1, n_people)),
                                np.ones((n_studies, 1, ratings.shape[2])))[:, 0]
    dist = resampled_scores(ratings, probabilities, w, c)
    pairs = tuple(model_pairs(probabilities.shape[0]))
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    p = percentile_p_values(dist[..., a] - dist[..., b])
    corrected = [holm_sidak(row, alpha) for row in p]  # one family per study (R calls, not B)
    return Decisions(
        scores=estimate, differences=estimate[:, a] - estimate[:, b],
        p_holm_sidak=np.array([c.p_adjusted for c in corrected]),
        significant=np.array([c.reject for c in corrected]), pairs=pairs)
