"""Reader for the published long format of Golan, Raju & Kriegeskorte (2020, PNAS), "Controversial stimuli".

Human file: one row per (trial, response category) with ``subject code, image, image_repetition,
response_category, category_rating, rt`` (+ ``first_reaction_rt, trial, targeted_model_1/2,
targeted_class_1/2``; the targeted columns are empty for natural images). Model file: ``model, image,
response_category, category_rating`` (the model's sigmoid probability). Both become humanlike's
tidy frames (``participant, stimulus, category, rating, ...`` and ``model, stimulus, category,
probability``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from humanlike.vocabulary import StimulusKind

GOLAN_COLUMNS = (
    "subject code",
    "image",
    "image_repetition",
    "response_category",
    "category_rating",
)
GOLAN_MODEL_COLUMNS = ("model", "image", "response_category", "category_rating")
_TARGETED = ("targeted_model_1", "targeted_model_2", "targeted_class_1", "targeted_class_2")
_RENAME = {
    "subject code": "participant",
    "image": "stimulus",
    "response_category": "category",
    "category_rating": "rating",
    "rt": "rt_ms",
    "first_reaction_rt": "first_rt_ms",
    "trial": "trial_index",
}


def is_golan_frame(frame: pd.DataFrame) -> bool:
    """True if ``frame`` has the human-response columns of the Golan et al. files."""
    return all(c in frame.columns for c in GOLAN_COLUMNS)


def is_golan_model_frame(frame: pd.DataFrame) -> bool:
    """True if ``frame`` has the model-response columns of the Golan et al. files."""
    return (
        all(c in frame.columns for c in GOLAN_MODEL_COLUMNS) and "probability" not in frame.columns
    )


def _label(value: object) -> object:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return np.nan
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    text = str(value).strip()
    return text if text else np.nan


def golan_to_tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """Golan et al. human rows -> tidy rating rows with stimulus metadata.

    ``stimulus_kind`` is 'controversial' when ``targeted_model_1`` is set, else 'natural'. A natural
    image's ``true_class`` is the part of its name after the last '_' (``MNIST_<index>_<class>``) when
    that is one of the response categories.
    """
    missing = [c for c in GOLAN_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"Golan-format ratings lack column(s) {missing}")
    out = frame.rename(columns={k: v for k, v in _RENAME.items() if k in frame.columns}).copy()
    out["participant"] = out["participant"].astype(str)
    out["stimulus"] = out["stimulus"].astype(str)
    out["category"] = out["category"].map(_label)
    repetition = pd.to_numeric(out["image_repetition"], errors="coerce")
    if repetition.isna().any():
        raise ValueError("Golan-format column 'image_repetition' must be 0 or 1")
    out["is_repeat"] = repetition.to_numpy() > 0
    out = out.drop(columns="image_repetition")
    for column in _TARGETED:
        out[column] = out[column].map(_label) if column in out.columns else np.nan
    controversial = out["targeted_model_1"].notna()
    out["stimulus_kind"] = np.where(controversial, StimulusKind.CONTROVERSIAL.value, StimulusKind.NATURAL.value)
    suffix = out["stimulus"].str.rsplit("_", n=1).str[-1]
    known = suffix.isin(set(out["category"].dropna()))
    out["true_class"] = suffix.where(~controversial & known & out["stimulus"].str.contains("_"))
    return out


def golan_models_to_tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """Golan et al. model rows -> ``model, stimulus, category, probability`` (sigmoid outputs)."""
    missing = [c for c in GOLAN_MODEL_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"Golan-format model responses lack column(s) {missing}")
    return pd.DataFrame(
        {
            "model": frame["model"].astype(str),
            "stimulus": frame["image"].astype(str),
            "category": frame["response_category"].map(_label),
            "probability": pd.to_numeric(frame["category_rating"], errors="coerce"),
        }
    )


def read_golan(path: str | Path) -> pd.DataFrame:
    """Read a Golan et al. human-response CSV into the tidy rating frame."""
    return golan_to_tidy(pd.read_csv(path))
