"""Trial designs for MLDS: triads (or quadruples) of levels with random left/right placement.

A triad (s1, s2, s3) with s1 < s2 < s3 shows s2 as the reference in the centre and s1, s3 left and
right; ``swapped`` records that s1 was shown on the right. There are C(n, 3) triads of n levels
(35 for 7). A quadruple (s1, s2; s3, s4) with s1 < s2 < s3 < s4 shows two pairs, the first pair
on top unless ``swapped`` (C(n, 4) non-overlapping quadruples). Knoblauch & Maloney (2008, J. Stat.
Softw. 25(2), "A psychophysical experiment" and "The Method of Triads").
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd


def all_triads(n_levels: int = 7) -> np.ndarray:
    """(C(n, 3), 3) array of 1-based triads s1 < s2 < s3 in lexicographic order."""
    return _combinations(n_levels, 3)


def all_quadruples(n_levels: int = 7) -> np.ndarray:
    """(C(n, 4), 4) array of 1-based non-overlapping quadruples s1 < s2 < s3 < s4."""
    return _combinations(n_levels, 4)


def triad_design(
    n_levels: int = 7,
    *,
    subset: int | Sequence[Sequence[int]] | None = None,
    repeats: int = 0,
    replications: int = 1,
    rng: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """Triad trials ``[s1, s2, s3, swapped, repeat]`` in random order.

    ``subset``: None for all C(n, 3) triads, an int for that many drawn without replacement, or
    explicit triads. ``replications``: blocks of the whole set, each in a fresh random order.
    ``repeats``: how many trials of the first block are shown once more at the end, for
    test-retest reliability (``repeat = 1``; left/right placement drawn afresh)."""
    return _design(all_triads(n_levels), n_levels, subset, repeats, replications, rng,
                   ("s1", "s2", "s3"))


def quadruple_design(
    n_levels: int = 7,
    *,
    subset: int | Sequence[Sequence[int]] | None = None,
    repeats: int = 0,
    replications: int = 1,
    rng: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """Quadruple trials ``[s1, s2, s3, s4, swapped, repeat]`` (see :func:`triad_design`)."""
    return _design(all_quadruples(n_levels), n_levels, subset, repeats, replications, rng,
                   ("s1", "s2", "s3", "s4"))


def _combinations(n_levels: int, k: int) -> np.ndarray:
    if n_levels < k:
        raise ValueError(f"n_levels must be at least {k}, got {n_levels}")
    return np.array(list(combinations(range(1, n_levels + 1), k)), dtype=np.int64)


def _design(universe: np.ndarray, n_levels: int, subset, repeats: int, replications: int,
            rng, columns: tuple[str, ...]) -> pd.DataFrame:
    rng = np.random.default_rng(rng)
    k = universe.shape[1]
    if subset is None:
        chosen = universe
    elif isinstance(subset, (int, np.integer)):
        if not 1 <= subset <= len(universe):
            raise ValueError(f"subset must be between 1 and {len(universe)}, got {subset}")
        chosen = universe[np.sort(rng.choice(len(universe), size=int(subset), replace=False))]
    else:
        chosen = np.asarray(subset, dtype=np.int64)
        if chosen.ndim != 2 or chosen.shape[1] != k:
            raise ValueError(f"subset must be a list of {k}-tuples of levels")
        ordered = np.all(np.diff(chosen, axis=1) > 0, axis=1)
        in_range = (chosen >= 1).all(axis=1) & (chosen <= n_levels).all(axis=1)
        if not (ordered & in_range).all():
            i = int(np.flatnonzero(~(ordered & in_range))[0])
            raise ValueError(f"subset entry {chosen[i].tolist()} is not increasing levels "
                             f"within 1..{n_levels}")
    if replications < 1:
        raise ValueError(f"replications must be at least 1, got {replications}")
    if not 0 <= repeats <= len(chosen):
        raise ValueError(f"repeats must be between 0 and {len(chosen)}, got {repeats}")
    order = rng.permuted(np.tile(np.arange(len(chosen)), (replications, 1)), axis=1).ravel()
    first = chosen[order]
    again = first[np.sort(rng.choice(len(chosen), size=repeats, replace=False))]
    again = again[rng.permutation(len(again))]
    trials = np.vstack([first, again])
    out = pd.DataFrame(trials, columns=list(columns))
    out["swapped"] = rng.random(len(out)) < 0.5
    out["repeat"] = np.r_[np.zeros(len(first), int), np.ones(len(again), int)]
    return out
