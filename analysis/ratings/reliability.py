"""Rating reliability: each participant's repeated-trial r, and group split-half with Spearman-Brown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from humanlike.analysis.ratings.pearson import pearson_from_sums

if TYPE_CHECKING:
    from humanlike.analysis.ratings.data import RatingArray


def repeat_pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """First and repeated rating of the same (participant, stimulus, category): ``first``, ``repeat``.

    Only pairs where both ratings were observed are kept; if a stimulus was repeated more than once
    the first repeat is used.
    """
    columns = ["participant", "stimulus", "category", "rating"]
    missing = [c for c in (*columns, "is_repeat") if c not in frame.columns]
    if missing:
        raise ValueError(f"ratings frame lacks column(s) {missing} needed for repeat reliability")
    keys = columns[:3]
    first = frame.loc[~frame["is_repeat"].astype(bool), columns].drop_duplicates(keys)
    again = frame.loc[frame["is_repeat"].astype(bool), columns].drop_duplicates(keys)
    pairs = first.merge(again, on=keys, suffixes=("_first", "_repeat"))
    pairs = pairs.rename(columns={"rating_first": "first", "rating_repeat": "repeat"})
    return pairs.dropna(subset=["first", "repeat"]).reset_index(drop=True)


def repeat_reliability(frame: pd.DataFrame) -> pd.DataFrame:
    """Per participant: Pearson r between first and repeated ratings over stimuli x categories, and n.

    Indexed by participant; participants without repeats get ``n = 0`` and ``r = NaN``.
    """
    pairs = repeat_pairs(frame)
    everyone = pd.Index(sorted(frame["participant"].astype(str).unique()), name="participant")
    if pairs.empty:
        return pd.DataFrame({"r": np.nan, "n": 0}, index=everyone)
    x = pairs["first"].to_numpy(float)
    y = pairs["repeat"].to_numpy(float)
    sums = (
        pd.DataFrame(
            {"n": 1.0, "sx": x, "sy": y, "sxx": x * x, "syy": y * y, "sxy": x * y},
            index=pairs["participant"],
        )
        .groupby(level=0)
        .sum()
    )
    r = pearson_from_sums(*(sums[c].to_numpy() for c in ("n", "sx", "sy", "sxx", "syy", "sxy")))
    out = pd.DataFrame({"r": r, "n": sums["n"].astype(int).to_numpy()}, index=sums.index)
    out = out.reindex(everyone)
    out["n"] = out["n"].fillna(0).astype(int)
    return out


def spearman_brown(r: float | np.ndarray, factor: float = 2.0) -> float | np.ndarray:
    """Spearman-Brown prophecy r* = k r / (1 + (k - 1) r) (Spearman 1910; Brown 1910)."""
    r = np.asarray(r, dtype=float)
    out = factor * r / (1.0 + (factor - 1.0) * r)
    return float(out) if out.ndim == 0 else out


_SPLIT_CHUNK = 64


def split_orders(n_people: int, n_splits: int, rng: np.random.Generator) -> np.ndarray:
    """One random permutation of the participants per split (its first half is half A)."""
    return rng.permuted(np.tile(np.arange(n_people), (n_splits, 1)), axis=1)


def _half_correlations(
    half_a: np.ndarray, half_b: np.ndarray, x0: np.ndarray, o: np.ndarray
) -> np.ndarray:
    """r between the two halves' mean ratings for a block of splits (rows of ``half_a/half_b``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_a = (half_a @ x0) / (half_a @ o)
        mean_b = (half_b @ x0) / (half_b @ o)
    both = np.isfinite(mean_a) & np.isfinite(mean_b)
    a = np.where(both, mean_a, 0.0)
    b = np.where(both, mean_b, 0.0)
    return pearson_from_sums(
        both.sum(1), a.sum(1), b.sum(1), (a * a).sum(1), (b * b).sum(1), (a * b).sum(1)
    )


@dataclass(frozen=True)
class SplitHalfReliability:
    """Group split-half reliability: mean r between half-group mean ratings, Spearman-Brown corrected."""

    r_half: float
    spearman_brown: float
    n_splits: int
    split_r: np.ndarray


def split_half_reliability(
    ratings: RatingArray | np.ndarray,
    n_splits: int = 1000,
    random_state: int | np.random.Generator | None = None,
) -> SplitHalfReliability:
    """Random halves of the participants; r between the halves' mean ratings; r_SB = 2r / (1 + r).

    Each split's half means are averages over the participants who rated an entry (missing ratings
    are skipped); r uses entries rated in both halves. The split memberships are drawn as one array
    and evaluated with matrix products in blocks of 64 splits. The mean r over splits is corrected
    with the Spearman-Brown formula for doubling.
    """
    values = np.asarray(getattr(ratings, "values", ratings), dtype=float)
    if values.ndim < 2:
        raise ValueError("ratings must have a participant axis and at least one item axis")
    x = values.reshape(values.shape[0], -1)
    n_people = x.shape[0]
    if n_people < 2:
        raise ValueError("split-half reliability needs at least two participants")
    if n_splits < 1:
        raise ValueError("n_splits must be positive")
    rng = np.random.default_rng(random_state)
    observed = np.isfinite(x)
    x0 = np.where(observed, x, 0.0)
    o = observed.astype(float)
    order = split_orders(n_people, n_splits, rng)
    half_a = np.zeros((n_splits, n_people))
    np.put_along_axis(half_a, order[:, : n_people // 2], 1.0, axis=1)
    half_b = 1.0 - half_a
    if n_people % 2:  # odd: leave the last participant of each permutation out of both halves
        np.put_along_axis(half_b, order[:, -1:], 0.0, axis=1)
    r = np.concatenate(
        [
            _half_correlations(half_a[i : i + _SPLIT_CHUNK], half_b[i : i + _SPLIT_CHUNK], x0, o)
            for i in range(0, n_splits, _SPLIT_CHUNK)
        ]
    )
    r_half = float(np.nanmean(r))
    return SplitHalfReliability(
        r_half=r_half,
        spearman_brown=float(spearman_brown(r_half)),
        n_splits=int(n_splits),
        split_r=r,
    )
