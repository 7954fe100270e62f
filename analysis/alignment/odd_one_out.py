"""Odd-one-out triplet alignment (Hebart et al. 2023, eLife 12:e82580; Brain-Score ``hebart2023``).

A model's accuracy is the share of human odd-one-out responses its own choice matches (Brain-Score
``Hebart2023Match``: one human response per triplet row, the model's choice compared with it).
The noise ceiling is the accuracy of the best possible predictor, the triplet's majority choice:
per triplet answered by two or more people, the share of them who made the majority's choice,
averaged over those triplets (Hebart et al. 2023, "noise ceiling"; Brain-Score's ``hebart2023``
takes this number, 0.6767 for THINGS, as a constant). The score normalises both by chance (1/3):
``(accuracy - 1/3) / (ceiling - 1/3)``; unlike Brain-Score it is not clipped at 0, so an interval
can show a model below chance. Intervals: percentile bootstrap over triplets (the unit that
repeats), every resample one row of multinomial counts (``_resampling.bootstrap_counts``).

A model's choice comes from its answers or from embeddings: the odd one out is the item outside
the most similar pair by dot product (Brain-Score's ``similarity_measure='dot'``; Hebart et al.
2020's SPoSE embeddings are compared the same way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from humanlike.analysis._resampling import (
    ConfidenceInterval,
    RandomState,
    as_rng,
    batch_size,
    bootstrap_counts,
    check_n_resamples,
    confidence_interval,
    iter_batches,
    quiet_nan_warnings,
)

CHANCE = 1.0 / 3.0
"""Chance accuracy of a three-way choice."""
IMAGES = ("image_1", "image_2", "image_3")
"""The export's triplet columns (``odd_one_out`` table), in key order."""


@dataclass(frozen=True)
class TripletCounts:
    """Per triplet (rows, items in key order): how many responses chose each item as odd."""

    triplets: np.ndarray
    """(T, 3) item keys, each row sorted."""
    counts: np.ndarray
    """(T, 3) integer counts of responses choosing each item."""


def triplet_counts(trials: pd.DataFrame, *, include_repeats: bool = False) -> TripletCounts:
    """Response counts per triplet from the export's ``odd_one_out`` table (``image_1..3``,
    ``odd_one_out``; practice trials and, unless ``include_repeats``, a participant's repeat of a
    triplet left out: the ceiling is agreement between people)."""
    missing = [c for c in (*IMAGES, "odd_one_out") if c not in trials.columns]
    if missing:
        raise ValueError(f"odd-one-out trials lack column(s) {missing}")
    keep = np.ones(len(trials), dtype=bool)
    for flag in ("practice", *(() if include_repeats else ("is_repeat",))):
        if flag in trials.columns:
            keep &= ~trials[flag].fillna(False).astype(bool).to_numpy()
    rows = trials.loc[keep]
    items = np.sort(rows[list(IMAGES)].to_numpy(dtype=str), axis=1)  # a triplet in key order
    odd = rows["odd_one_out"].to_numpy(dtype=str)
    hit = items == odd[:, None]
    bad = hit.sum(axis=1) != 1
    if bad.any():
        raise ValueError(f"odd_one_out must be one of image_1..3; row {int(np.flatnonzero(bad)[0])} "
                         f"chose {str(odd[bad][0])!r} from {items[bad][0].tolist()}")
    codes, first = np.unique(items, axis=0, return_inverse=True)
    counts = np.zeros((len(codes), 3), dtype=np.int64)
    np.add.at(counts, (first.ravel(), hit.argmax(axis=1)), 1)
    return TripletCounts(triplets=codes, counts=counts)


def embedding_choices(triplets: ArrayLike, embeddings: pd.DataFrame | Mapping[str, ArrayLike]) -> np.ndarray:
    """The position (0-2, in the order given: pass ``triplet_counts``' key-ordered triplets) of
    each triplet's odd one out for a model's embeddings (rows indexed by item key): the item
    outside the pair with the largest dot product (Brain-Score 'dot')."""
    table = (embeddings if isinstance(embeddings, pd.DataFrame)
             else pd.DataFrame.from_dict({k: np.asarray(v, dtype=float) for k, v in embeddings.items()},
                                         orient="index"))
    keys = np.asarray(triplets, dtype=object)
    absent = sorted(set(keys.ravel().tolist()) - set(table.index))
    if absent:
        raise ValueError(f"embeddings lack the item(s) {absent[:5]}")
    x = table.loc[keys.ravel()].to_numpy(dtype=float).reshape(*keys.shape, -1)
    sims = np.stack([np.einsum("td,td->t", x[:, 1], x[:, 2]),  # the pair without item 0
                     np.einsum("td,td->t", x[:, 0], x[:, 2]),
                     np.einsum("td,td->t", x[:, 0], x[:, 1])], axis=1)
    return sims.argmax(axis=1)


def answer_choices(triplets: ArrayLike, answers: pd.DataFrame) -> np.ndarray:
    """The position (0-2, in key order: ``triplet_counts``' columns) of each triplet's odd one out
    in a model's answers (``image_1..3``, ``odd_one_out``; one answer per triplet)."""
    own = triplet_counts(answers, include_repeats=True)
    if (own.counts.sum(axis=1) != 1).any():
        raise ValueError("a model's answers must hold one answer per triplet")
    answered = pd.DataFrame(own.triplets, columns=list(IMAGES)).assign(at=own.counts.argmax(axis=1))
    wanted = pd.DataFrame(np.sort(np.asarray(triplets, dtype=str), axis=1), columns=list(IMAGES))
    found = wanted.merge(answered, on=list(IMAGES), how="left")
    if found["at"].isna().any():
        absent = wanted[found["at"].isna().to_numpy()].head(3).to_numpy().tolist()
        raise ValueError(f"the model answered no odd one out for triplet(s) {absent}")
    return found["at"].to_numpy(dtype=int)


def _sums(counts: np.ndarray, choice: np.ndarray) -> np.ndarray:
    """Per triplet (rows): responses, responses matching the model, the majority's share (where
    two or more answered) and whether two or more answered: the columns every statistic sums."""
    n = counts.sum(axis=1).astype(float)
    hits = counts[np.arange(len(counts)), choice].astype(float)
    repeated = n >= 2
    majority = np.where(repeated, counts.max(axis=1) / np.maximum(n, 1), 0.0)
    return np.column_stack([n, hits, majority, repeated.astype(float)])


def _statistics(sums: np.ndarray, ceiling: float | None) -> dict[str, np.ndarray]:
    """Accuracy, ceiling and score from weighted column sums ``W @ _sums`` (resamples x 4)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = sums[:, 1] / sums[:, 0]
        ceil = (sums[:, 2] / sums[:, 3] if ceiling is None
                else np.full(len(sums), float(ceiling)))
        score = (accuracy - CHANCE) / (ceil - CHANCE)
    return {"accuracy": accuracy, "ceiling": ceil, "score": score}


@dataclass(frozen=True)
class OddOneOutResult:
    """A model's odd-one-out alignment: accuracy, noise ceiling and the chance-normalised score
    ``(accuracy - 1/3) / (ceiling - 1/3)`` (Brain-Score hebart2023), each with its interval."""

    accuracy: float
    ceiling: float
    score: float
    n_triplets: int
    n_responses: int
    n_repeated: int
    """Triplets answered by two or more people (what the ceiling reads)."""
    ci: dict[str, ConfidenceInterval[float]]
    bootstrap_distribution: dict[str, np.ndarray]


def odd_one_out_score(counts: ArrayLike, model_choice: ArrayLike, *, ceiling: float | None = None,
                      n_resamples: int = 1000, confidence_level: float = 0.95,
                      random_state: RandomState = None) -> OddOneOutResult:
    """Score = (acc - 1/3) / (ceiling - 1/3) (Brain-Score hebart2023; Hebart et al. 2023), from
    response ``counts`` (T x 3) and the model's odd-one-out position per triplet; ``ceiling``:
    a published ceiling instead of the data's own. Percentile intervals over triplet resamples."""
    c = np.asarray(counts)
    m = np.asarray(model_choice)
    if c.ndim != 2 or c.shape[1] != 3 or not np.issubdtype(c.dtype, np.integer) or (c < 0).any():
        raise ValueError(f"counts must be a (triplets, 3) array of non-negative integers, got shape {c.shape}")
    if m.shape != (len(c),) or not np.isin(m, (0, 1, 2)).all():
        raise ValueError(f"model_choice must hold one position 0, 1 or 2 per triplet ({len(c)})")
    if c.sum() == 0:
        raise ValueError("no responses: every triplet's counts are zero")
    repeated = int((c.sum(axis=1) >= 2).sum())
    if ceiling is None and repeated == 0:
        raise ValueError("no triplet was answered by two or more people: the data give no noise "
                         "ceiling (pass a published one, e.g. ceiling=0.6767 for THINGS)")
    if ceiling is not None and not CHANCE < ceiling <= 1:
        raise ValueError(f"ceiling must lie in (1/3, 1], got {ceiling!r}")
    n_resamples = check_n_resamples(n_resamples)
    x = _sums(c, m.astype(int))
    rng = as_rng(random_state)
    step = batch_size(len(c), n_resamples)
    sums = np.vstack([x.sum(axis=0, keepdims=True),  # the data, then every resample in batches
                      *(bootstrap_counts(len(c), part.stop - part.start, rng).astype(float) @ x
                        for part in iter_batches(n_resamples, step))])  # float64: shares exact
    with quiet_nan_warnings():
        values = _statistics(sums, ceiling)
    ci = {name: confidence_interval(v[1:], confidence_level) for name, v in values.items()}
    return OddOneOutResult(
        accuracy=float(values["accuracy"][0]), ceiling=float(values["ceiling"][0]),
        score=float(values["score"][0]), n_triplets=len(c), n_responses=int(c.sum()),
        n_repeated=repeated, ci=ci, bootstrap_distribution={k: v[1:] for k, v in values.items()})
