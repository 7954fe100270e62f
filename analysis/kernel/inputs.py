"""Inputs for kernel analysis: feature files (.npy, .csv, .parquet), labels, neural recordings.

Feature tables have one row per image: an image-id column (default ``image``), optionally a label
column (default ``label``), and every other column a numeric feature. A ``.npy`` file is an
images x features array whose image ids are the row numbers ``"0", "1", ...``. Neural recordings
are sites x images (one row per recording site, one column per image id, plus a column of each
site's rate to blank images), normalised as in Cadieu et al. (2013, Appendix B).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

TABLE_SUFFIXES = (".csv", ".parquet")
SUFFIXES = (".npy", *TABLE_SUFFIXES)


@dataclass(frozen=True)
class FeatureTable:
    """One representation: image ``ids`` (n, str), features ``X`` (n x D), ``labels`` (n,) or None."""

    name: str
    ids: np.ndarray
    X: np.ndarray
    labels: np.ndarray | None = None


def _read_table(path: Path) -> pd.DataFrame:
    if path.suffix == ".csv":
        return pd.read_csv(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    raise ValueError(f"{path}: unsupported file type {path.suffix!r}; use one of {SUFFIXES}")


def _numeric_block(frame: pd.DataFrame, path: Path, what: str) -> np.ndarray:
    bad = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    if bad:
        raise ValueError(f"{path}: {what} columns must be numeric; non-numeric: {bad[:5]}")
    values = frame.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(values)):
        rows, cols = np.nonzero(~np.isfinite(values))
        raise ValueError(
            f"{path}: missing or infinite value in column {frame.columns[cols[0]]!r}, row {rows[0]}"
        )
    return values


def read_features(
    path: str | Path,
    *,
    index_col: str = "image",
    label_col: str = "label",
    name: str | None = None,
) -> FeatureTable:
    """Read an images x features file; labels come along if the table has ``label_col``."""
    path = Path(path)
    name = name or path.stem
    if not path.is_file():
        raise ValueError(f"{path}: feature file not found")
    if path.suffix == ".npy":
        X = np.load(path, allow_pickle=False)
        if X.ndim != 2 or not np.issubdtype(X.dtype, np.number):
            raise ValueError(f"{path}: expected a numeric images x features array, got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError(f"{path}: features contain NaN or infinite values")
        return FeatureTable(name, np.arange(X.shape[0]).astype(str), X)
    frame = _read_table(path)
    if index_col not in frame.columns:
        raise ValueError(
            f"{path}: missing image-id column {index_col!r} (columns: {list(frame.columns)[:8]})"
        )
    ids = frame[index_col].astype(str).to_numpy()
    if len(set(ids)) != len(ids):
        dup = pd.Series(ids)[pd.Series(ids).duplicated()].iloc[0]
        raise ValueError(f"{path}: column {index_col!r} lists image {dup!r} twice")
    labels = frame[label_col].to_numpy() if label_col in frame.columns else None
    if labels is not None and frame[label_col].isna().any():
        raise ValueError(f"{path}: column {label_col!r} has empty labels")
    X = _numeric_block(
        frame.drop(columns=[c for c in (index_col, label_col) if c in frame]), path, "feature"
    )
    if X.shape[1] == 0:
        raise ValueError(f"{path}: no feature columns besides {index_col!r}/{label_col!r}")
    return FeatureTable(name, ids, X, labels)


def read_labels(
    path: str | Path, *, index_col: str = "image", label_col: str = "label"
) -> pd.Series:
    """Labels indexed by image id (str) from a .csv/.parquet with ``index_col`` and ``label_col``."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: labels file not found")
    frame = _read_table(path)
    for col in (index_col, label_col):
        if col not in frame.columns:
            raise ValueError(f"{path}: missing column {col!r} (columns: {list(frame.columns)})")
    if frame[label_col].isna().any():
        raise ValueError(f"{path}: column {label_col!r} has empty labels")
    series = pd.Series(frame[label_col].to_numpy(), index=frame[index_col].astype(str))
    if series.index.duplicated().any():
        dup = series.index[series.index.duplicated()][0]
        raise ValueError(f"{path}: column {index_col!r} lists image {dup!r} twice")
    return series


def attach_labels(table: FeatureTable, labels: pd.Series) -> FeatureTable:
    """Give every image of ``table`` its label from ``labels`` (indexed by image id)."""
    missing = pd.Index(table.ids).difference(labels.index)
    if len(missing):
        raise ValueError(
            f"{table.name}: {len(missing)} image(s) have no label, e.g. {list(missing[:3])}"
        )
    return FeatureTable(table.name, table.ids, table.X, labels.loc[table.ids].to_numpy())


def normalise_sites(rates: np.ndarray, blank: np.ndarray, *, ddof: int = 1) -> np.ndarray:
    """Cadieu et al. (2013, App. B): ``(r[s, i] - blank[s]) / SD_i(r[s, :])``, returned images x sites.

    ``rates`` is sites x images, ``blank`` each site's mean rate to blank images. (The SD's
    ``ddof`` scales every site alike, which leaves kernel analysis unchanged.)
    """
    rates = np.asarray(rates, dtype=np.float64)
    blank = np.asarray(blank, dtype=np.float64).reshape(-1)
    if rates.ndim != 2:
        raise ValueError(f"rates must be sites x images, got shape {rates.shape}")
    if blank.shape[0] != rates.shape[0]:
        raise ValueError(f"blank must hold one rate per site ({rates.shape[0]}), got {blank.shape}")
    if not (np.all(np.isfinite(rates)) and np.all(np.isfinite(blank))):
        raise ValueError("rates and blank rates must be finite")
    sd = rates.std(axis=1, ddof=ddof)
    flat = np.flatnonzero(~(sd > 0))
    if flat.size:
        raise ValueError(f"site(s) {flat[:5].tolist()} have zero SD over images; drop them")
    return ((rates - blank[:, None]) / sd[:, None]).T


def _load_vector(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path, allow_pickle=False).reshape(-1).astype(np.float64)
    return _read_table(path).iloc[:, -1].to_numpy(dtype=np.float64)


def read_neural(
    path: str | Path,
    *,
    blank: str | Path | np.ndarray | None = "blank",
    site_col: str = "site",
    normalise: bool = True,
    name: str | None = None,
) -> FeatureTable:
    """Read sites x images recordings as an images x sites FeatureTable.

    Tables: one row per site, an optional ``site_col``, a column named ``blank`` with the site's
    blank-image rate, and one numeric column per image id. ``.npy``: a sites x images array
    (image ids are the column numbers). ``blank`` may instead be an array or a .npy/.csv file of
    per-site rates (a file's last column). With ``normalise`` the Appendix B normalisation of
    :func:`normalise_sites` is applied; without it the rates are used as they are.
    """
    path = Path(path)
    name = name or path.stem
    if not path.is_file():
        raise ValueError(f"{path}: neural data file not found")
    blank_rates = None
    if path.suffix == ".npy":
        rates = np.load(path, allow_pickle=False)
        if rates.ndim != 2 or not np.issubdtype(rates.dtype, np.number):
            raise ValueError(f"{path}: expected a numeric sites x images array, got {rates.shape}")
        ids = np.arange(rates.shape[1]).astype(str)
    else:
        frame = _read_table(path).drop(columns=[site_col], errors="ignore")
        if isinstance(blank, str) and blank in frame.columns:
            blank_rates = frame.pop(blank).to_numpy(dtype=np.float64)
        ids = np.asarray([str(c) for c in frame.columns])
        rates = _numeric_block(frame, path, "image")
    if blank_rates is None and blank is not None:
        if isinstance(blank, (str, Path)) and Path(blank).is_file():
            blank_rates = _load_vector(Path(blank))
        elif not isinstance(blank, (str, Path)):
            blank_rates = np.asarray(blank, dtype=np.float64)
    if not normalise:
        return FeatureTable(name, ids, np.asarray(rates, dtype=np.float64).T)
    if blank_rates is None:
        raise ValueError(
            f"{path}: blank-image rates {blank!r} not found (need a column of that name, "
            "a file, or an array) for the Appendix B normalisation"
        )
    return FeatureTable(name, ids, normalise_sites(rates, blank_rates))
