"""Read the raw trial CSVs of model-vs-human (Geirhos et al. 2021) into one tidy frame.

Layout (bethgelab/model-vs-human ``raw-data/<experiment>/<experiment>_<observer>_session...csv``),
header ``subj,session,trial,rt,object_response,category,condition,imagename``. Trials of
different observers are joined on the part of ``imagename`` after its last ``_`` (humans see
``0001_edg_s01_0_oven_00_oven10.png``, models ``oven10.png``); a response ``na`` (a human timeout)
counts as wrong. Humans are the ``subject-NN`` observers, everyone else is a model.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

MVH_COLUMNS = (
    "subj",
    "session",
    "trial",
    "rt",
    "object_response",
    "category",
    "condition",
    "imagename",
)
_HUMAN = re.compile(r"^subject-\d+$")


def _csv_files(path: Path) -> list[Path]:
    if path.is_file():
        if path.suffix.lower() != ".csv":
            raise ValueError(f"{path} is not a .csv file")
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.csv") if p.is_file())
        if not files:
            raise ValueError(f"folder {path} holds no .csv files")
        return files
    raise FileNotFoundError(f"no such file or folder: {path}")


def _read_csv(path: Path, nrows: int | None = None) -> pd.DataFrame:
    """The CSV as text cells; ValueError naming the file when it is not readable as CSV."""
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, nrows=nrows)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable CSV file ({type(exc).__name__})") from None
    raw.columns = [str(c).strip().lower() for c in raw.columns]  # most published files say 'Session'
    return raw


def is_trial_file(path: str | Path) -> bool:
    """Whether ``path`` is a readable CSV whose header (any case) has every model-vs-human column."""
    try:
        header = _read_csv(Path(path), nrows=0).columns
    except ValueError:
        return False
    return all(c in header for c in MVH_COLUMNS)


def _read_one(path: Path) -> pd.DataFrame:
    raw = _read_csv(path)
    missing = [c for c in MVH_COLUMNS if c not in raw.columns]
    if missing:
        raise ValueError(
            f"{path} is not a model-vs-human trial file: missing column(s) {missing} "
            f"(expected header {','.join(MVH_COLUMNS)})"
        )
    for column in ("subj", "category", "imagename"):
        if (raw[column].str.strip() == "").any():
            raise ValueError(f"{path}: column {column!r} has empty values")
    experiment = path.name.split("_", 1)[0] if "_" in path.name else path.parent.name
    observer = raw["subj"].str.strip()
    response = raw["object_response"].str.strip()
    category = raw["category"].str.strip()
    condition = raw["condition"].str.strip()
    condition = condition.mask(condition.str.lower().isin(["", "nan", "na", "none"]))
    return pd.DataFrame(
        {
            "experiment": experiment,
            "observer": observer,
            "group": np.where(observer.str.match(_HUMAN), "human", "model"),
            "session": raw["session"].str.strip(),
            "trial": pd.to_numeric(raw["trial"], errors="coerce").astype("Int64"),
            "condition": condition,
            "stimulus": short_image_name(raw["imagename"].str.strip()),
            "imagename": raw["imagename"].str.strip(),
            "response": response,
            "category": category,
            "correct": response == category,  # "na" (timeout) never equals a category
            "rt_ms": pd.to_numeric(raw["rt"], errors="coerce") * 1000.0,
            "source_file": path.name,
        }
    )


def short_image_name(imagename: pd.Series) -> pd.Series:
    """model-vs-human's join key: the name after its last ``_``, keeping an ImageNet synset prefix.

    ``0001_edg_s01_0_oven_00_oven10.png`` -> ``oven10.png``;
    ``0001_cop_s01_c30_knife_10_n03041632_7380.png`` -> ``n03041632_7380.png`` (the part after the
    last ``_`` alone is not unique among ImageNet-based names)."""
    parts = imagename.str.rsplit("_", n=2, expand=True).reindex(columns=[0, 1, 2])
    last = parts.ffill(axis=1)[2]
    second = parts[1].where(parts[2].notna(), parts[0].where(parts[1].notna())).fillna("")
    synset = second.str.startswith("n0")
    return last.where(~synset, second + "_" + last)


def _fill_conditions(frame: pd.DataFrame) -> pd.Series:
    """Give rows without a condition (models) the condition humans saw that stimulus in."""
    known = frame.dropna(subset=["condition"])
    lookup = known.drop_duplicates(["experiment", "stimulus", "condition"])
    ambiguous = lookup.duplicated(["experiment", "stimulus"], keep=False)
    by_key = lookup[~ambiguous].set_index(["experiment", "stimulus"])["condition"]
    keys = pd.MultiIndex.from_frame(frame[["experiment", "stimulus"]])
    filled = frame["condition"].fillna(
        pd.Series(by_key.reindex(keys).to_numpy(), index=frame.index)
    )
    only = known.groupby("experiment")["condition"].unique()
    single = {exp: conds[0] for exp, conds in only.items() if len(conds) == 1}
    filled = filled.fillna(frame["experiment"].map(single))
    return filled.fillna("all")


def read_model_vs_human(
    path: str | Path, on_skip: Callable[[str], None] | None = None
) -> pd.DataFrame:
    """Return model-vs-human trials as a tidy frame, one row per (observer, image).

    ``path`` is one CSV or a folder searched recursively for CSVs. Columns: ``experiment`` (file
    name before its first ``_``), ``observer`` (``subj``), ``group`` (``human`` for ``subject-NN``,
    else ``model``), ``session``, ``trial``, ``condition`` (models, whose files say ``NaN``, get
    the condition the humans saw that image in), ``stimulus`` (join key: ``imagename`` after its
    last ``_``), ``imagename``, ``response``, ``category``, ``correct`` (``na`` = wrong),
    ``rt_ms``, ``source_file``.

    In a folder, CSVs without the trial header (the benchmark ships other tables next to the
    trials) are skipped, each with a notice to ``on_skip`` (default: a warning); a single file
    without it, or a trial file with bad values, raises ValueError naming the file and column.
    """
    files = _csv_files(Path(path))
    if len(files) > 1 or Path(path).is_dir():
        notify = on_skip or (lambda message: warnings.warn(message, stacklevel=3))
        trial_files = [f for f in files if is_trial_file(f)]
        for skipped in sorted(set(files) - set(trial_files)):
            notify(f"skipped {skipped}: not a model-vs-human trial file "
                   f"(header lacks {','.join(MVH_COLUMNS)})")
        if not trial_files:
            raise ValueError(f"folder {path} holds no model-vs-human trial files")
        files = trial_files
    frame = pd.concat([_read_one(f) for f in files], ignore_index=True)
    frame["condition"] = _fill_conditions(frame)
    return frame
