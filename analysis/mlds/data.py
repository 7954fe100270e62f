"""MLDS trial frames: input layouts, canonical order, design matrices and count aggregation.

Two layouts are accepted (Knoblauch & Maloney 2008, J. Stat. Softw. 25(2), "Fitting with mlds"):

- the tidy export (``response, s1, s2, s3`` for triads, plus ``s4`` for quadruples), and
- R's MLDS data frames (``resp, S1, S2, S3[, S4]``),

both with 1-based stimulus levels. ``response``/``resp = 1`` means the second interval, (S2, S3) for
triads or (S3, S4) for quadruples, was judged the more different.

Rows are put in the canonical order the model assumes: triads with S1 > S3 are reversed
((S1, S2, S3) -> (S3, S2, S1), response -> 1 - response); quadruples get each pair in ascending
order and the pair with the smaller first level first (pairs swapped, response -> 1 - response).
Both operations leave the likelihood unchanged (R's ``SwapOrder``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

Design = Literal["triads", "quadruples"]

#: Weights of the decision variable on (S1, S2, S3[, S4]): Delta = sum_j w_j psi(S_j).
DESIGN_WEIGHTS: dict[str, tuple[float, ...]] = {
    "triads": (1.0, -2.0, 1.0),  # (psi3 - psi2) - (psi2 - psi1)
    "quadruples": (1.0, -1.0, -1.0, 1.0),  # (psi4 - psi3) - (psi2 - psi1)
}


@dataclass(frozen=True)
class CanonicalTrials:
    """Trials in canonical order: ``columns`` (k arrays of 1-based levels S1..Sk), ``response``
    (n, 0/1 ints), ``flipped`` (n, bool: the row was reversed/swapped and its response inverted)."""

    columns: tuple[np.ndarray, ...]
    response: np.ndarray
    flipped: np.ndarray
    design: str

    @property
    def n_trials(self) -> int:
        return int(self.response.shape[0])

    @property
    def max_level(self) -> int:
        return max(int(col.max()) for col in self.columns)

    @property
    def levels(self) -> np.ndarray:
        """(n, k) array of the canonical levels."""
        return np.column_stack(self.columns)

    def to_frame(self) -> pd.DataFrame:
        """R's layout: ``resp, S1, ..., Sk`` (canonical order)."""
        cols = {"resp": self.response}
        cols.update({f"S{j + 1}": col for j, col in enumerate(self.columns)})
        return pd.DataFrame(cols)


def check_design(design: str) -> str:
    if design not in DESIGN_WEIGHTS:
        raise ValueError(f"design must be 'triads' or 'quadruples', got {design!r}")
    return design


def level_columns(df: pd.DataFrame, design: str) -> tuple[str, list[str]]:
    """Names of the response column and of the level columns for ``df`` (tidy or R layout)."""
    check_design(design)
    k = len(DESIGN_WEIGHTS[design])
    if "resp" in df.columns and "S1" in df.columns:
        resp, cols = "resp", [f"S{j + 1}" for j in range(k)]
        extra = f"S{k + 1}"
    elif "response" in df.columns and "s1" in df.columns:
        resp, cols = "response", [f"s{j + 1}" for j in range(k)]
        extra = f"s{k + 1}"
    else:
        raise ValueError(
            "MLDS data need either the tidy columns 'response, s1, s2, s3' or R's "
            f"'resp, S1, S2, S3[, S4]'; got columns {list(df.columns)}"
        )
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"design={design!r} needs column(s) {missing}; got {list(df.columns)}")
    if design == "triads" and extra in df.columns:
        raise ValueError(f"column {extra!r} present but design='triads'; use design='quadruples'")
    return resp, cols


def canonical_trials(df: pd.DataFrame, design: Design = "triads") -> CanonicalTrials:
    """Validate an MLDS trial frame and return its trials in canonical order (see module doc)."""
    resp_col, cols = level_columns(df, design)
    if len(df) == 0:
        raise ValueError("MLDS data frame has no rows")
    s = [_int_column(df, c) for c in cols]
    resp = _binary_column(df[resp_col], resp_col)
    if design == "triads":
        flipped = s[0] > s[2]
        s = [np.where(flipped, s[2], s[0]), s[1], np.where(flipped, s[0], s[2])]
        bad = (s[0] >= s[1]) | (s[1] >= s[2])
        what = "is not three distinct levels with the reference in the middle"
    else:
        a, b = np.minimum(s[0], s[1]), np.maximum(s[0], s[1])
        c, d = np.minimum(s[2], s[3]), np.maximum(s[2], s[3])
        flipped = (a > c) | ((a == c) & (b > d))
        s = [np.where(flipped, c, a), np.where(flipped, d, b),
             np.where(flipped, a, c), np.where(flipped, b, d)]
        bad = (s[0] == s[1]) | (s[2] == s[3])
        what = "has a pair of identical levels"
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"row {i}: ({', '.join(cols)}) = {tuple(int(v[i]) for v in s)} {what}")
    resp = np.where(flipped, 1 - resp, resp)
    return CanonicalTrials(columns=tuple(s), response=resp, flipped=flipped, design=design)


def infer_n_levels(trials: CanonicalTrials, n_levels: int | None) -> int:
    """Number of scale levels: ``n_levels`` if given (checked), else the highest level present."""
    top = trials.max_level
    if n_levels is None:
        n_levels = top
    if n_levels < 3:
        raise ValueError(f"MLDS needs at least 3 stimulus levels, got n_levels={n_levels}")
    if top > n_levels:
        raise ValueError(f"level {top} in the data exceeds n_levels={n_levels}")
    return int(n_levels)


def design_matrix(levels: np.ndarray, n_levels: int, design: Design) -> np.ndarray:
    """GLM design matrix (n x (N - 1)): weights (+1, -2, +1) or (+1, -1, -1, +1) at the levels,
    level 1's column dropped so that psi_1 = 0 (Knoblauch & Maloney 2008, GLM formulation)."""
    weights = DESIGN_WEIGHTS[check_design(design)]
    levels = np.asarray(levels)
    full = np.zeros((levels.shape[0], n_levels))
    rows = np.arange(levels.shape[0])
    for j, w in enumerate(weights):  # k <= 4 columns, not a loop over trials
        np.add.at(full, (rows, levels[:, j] - 1), w)
    return full[:, 1:]


def row_codes(levels: np.ndarray | tuple[np.ndarray, ...], n_levels: int) -> np.ndarray:
    """One integer per level tuple (rows of an (n, k) array or k columns): sum_j (S_j-1) N**j."""
    columns = list(levels.T) if isinstance(levels, np.ndarray) else list(levels)
    codes = np.zeros(columns[0].shape[0], dtype=np.int64)
    for col in reversed(columns):  # k <= 4 columns (Horner), not a loop over trials
        codes *= n_levels
        codes += col
    codes -= sum(n_levels**j for j in range(len(columns)))
    return codes


def decode_rows(codes: np.ndarray, n_levels: int, k: int) -> np.ndarray:
    """Inverse of :func:`row_codes`: (m, k) 1-based level tuples."""
    powers = n_levels ** np.arange(k, dtype=np.int64)
    return (np.asarray(codes, dtype=np.int64)[:, None] // powers) % n_levels + 1


def check_levels_present(trials: CanonicalTrials, n_levels: int) -> None:
    """Every level 1..N must occur in some trial, else its scale value is not identified."""
    seen = np.zeros(n_levels, bool)
    for col in trials.columns:
        seen[col - 1] = True
    if not seen.all():
        absent = (np.flatnonzero(~seen) + 1).tolist()
        raise ValueError(f"level(s) {absent} never occur in the trials; their scale values "
                         "are not identified (pass n_levels only if every level was shown)")


def _int_column(df: pd.DataFrame, name: str) -> np.ndarray:
    col = df[name]
    if pd.api.types.is_integer_dtype(col.dtype) and not col.hasnans:
        values = col.to_numpy(dtype=np.int64)
        bad = values < 1
    else:
        if pd.api.types.is_numeric_dtype(col.dtype):
            floats = col.to_numpy(dtype=float, na_value=np.nan)
        else:
            floats = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(floats) | (floats != np.round(floats)) | (floats < 1)
        values = np.where(bad, 1, floats).astype(np.int64)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"column {name!r} must hold 1-based integer stimulus levels; row {i} has "
            f"{col.iloc[i]!r}"
        )
    return values


def _binary_column(series: pd.Series, name: str) -> np.ndarray:
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
        values = series.to_numpy(dtype=float, na_value=np.nan)
    else:
        mapped = series.astype("object").replace({True: 1, False: 0})
        values = pd.to_numeric(mapped, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isin(values, (0.0, 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"column {name!r} must be 0/1 (or boolean); row {i} has {series.iloc[i]!r}"
        )
    return values.astype(np.int64)


@dataclass(frozen=True)
class TrialCounts:
    """Trials collapsed to binomial counts on the distinct level tuples (exact for the GLM).

    ``rows`` (U, k): distinct canonical level tuples; ``successes`` and ``trials`` (G, U): counts
    per group; ``row_of_trial`` (n,): index into ``rows`` of each trial."""

    rows: np.ndarray
    successes: np.ndarray
    trials: np.ndarray
    row_of_trial: np.ndarray


def count_trials(
    trials: CanonicalTrials,
    n_levels: int,
    groups: np.ndarray | None = None,
    n_groups: int = 1,
) -> TrialCounts:
    """Collapse trials (optionally split by group codes 0..G-1) to counts per distinct row."""
    codes = row_codes(trials.columns, n_levels)
    k = len(trials.columns)
    n_codes = n_levels**k
    if n_codes <= 50_000_000:  # dense lookup: O(n) instead of sorting
        present = np.bincount(codes, minlength=n_codes) > 0
        universe = np.flatnonzero(present)
        inverse = (np.cumsum(present) - 1)[codes]
    else:
        universe, inverse = np.unique(codes, return_inverse=True)
    n_rows = universe.size
    cell = inverse if groups is None else np.asarray(groups, dtype=np.int64) * n_rows + inverse
    size = n_groups * n_rows
    n = np.bincount(cell, minlength=size).reshape(n_groups, n_rows).astype(float)
    y = np.bincount(cell, weights=trials.response, minlength=size).reshape(n_groups, n_rows)
    return TrialCounts(
        rows=decode_rows(universe, n_levels, k),
        successes=y,
        trials=n,
        row_of_trial=inverse,
    )
