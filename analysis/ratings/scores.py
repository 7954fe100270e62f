"""Human-vs-model scores for rating experiments: per-participant Pearson r and MSE, averaged.

A model's prediction for (stimulus, category) is its probability that the category is present. Each
participant's ratings are compared with the predictions over the entries that participant rated; the
model's score is the mean over participants (Golan, Raju & Kriegeskorte 2020, Methods). Optionally the
model's logits first get one slope and one intercept fitted by cross-entropy to the ratings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.special import expit

from humanlike.analysis.ratings.calibration import RatingCalibration, clipped_logit
from humanlike.analysis.ratings.ceilings import rating_matrix
from humanlike.analysis.ratings.pearson import mse_from_sums, pearson_from_sums

if TYPE_CHECKING:
    from humanlike.analysis.ratings.data import RatingArray

MODEL_COLUMNS = ("model", "stimulus", "category", "probability")


def load_model_responses(path: str | Path) -> pd.DataFrame:
    """Model-responses frame from CSV/Parquet (``model, stimulus, category, probability[, logit]``).

    The model CSV of Golan et al. (``model, image, response_category, category_rating``) is accepted.
    """
    from humanlike.analysis.io.golan import golan_models_to_tidy, is_golan_model_frame

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"model responses file {path} does not exist")
    if path.suffix.lower() == ".parquet":
        frame = pd.read_parquet(path)
    elif path.suffix.lower() == ".csv":
        frame = pd.read_csv(path, dtype={"model": str, "stimulus": str, "category": str})
    else:
        raise ValueError(f"{path}: model responses must be a .csv or .parquet file")
    if is_golan_model_frame(frame):
        frame = golan_models_to_tidy(frame)
    return validate_model_responses(frame)


def validate_model_responses(frame: pd.DataFrame) -> pd.DataFrame:
    """Check columns and ranges of a model-responses frame; ids become strings."""
    missing = [c for c in MODEL_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"model responses lack column(s) {missing}; expected {list(MODEL_COLUMNS)} (+ 'logit')"
        )
    out = frame.copy()
    for column in ("model", "stimulus", "category"):
        if out[column].isna().any():
            raise ValueError(f"model responses column {column!r} has empty values")
        out[column] = out[column].map(
            lambda v: str(int(v)) if isinstance(v, float) and float(v).is_integer() else str(v)
        )
    for column in ("probability", "logit"):
        if column not in out.columns:
            continue
        try:
            out[column] = pd.to_numeric(out[column], errors="raise").astype(float)
        except (TypeError, ValueError):
            raise ValueError(f"model responses column {column!r} must be numeric") from None
        if not np.all(np.isfinite(out[column])):
            raise ValueError(f"model responses column {column!r} has missing or infinite values")
    if not out["probability"].between(0.0, 1.0).all():
        raise ValueError("model responses column 'probability' must lie in [0, 1]")
    duplicated = out.duplicated(["model", "stimulus", "category"])
    if duplicated.any():
        row = out.loc[duplicated, ["model", "stimulus", "category"]].iloc[0].to_dict()
        raise ValueError(f"model responses have duplicate rows for {row}")
    return out


@dataclass(frozen=True)
class ModelPredictions:
    """Models x stimuli x categories probabilities and logits, aligned with a :class:`RatingArray`."""

    probabilities: np.ndarray
    logits: np.ndarray
    models: tuple[str, ...]
    stimuli: tuple[str, ...]
    categories: tuple[str, ...]


def model_predictions(
    frame: pd.DataFrame, ratings: RatingArray, eps: float = 1e-6
) -> ModelPredictions:
    """Arrange a model-responses frame on the stimuli and categories of ``ratings``.

    Every model must have a probability for every rated (stimulus, category); logits come from the
    ``logit`` column when present, else logit(clip(probability, eps, 1 - eps)).
    """
    frame = validate_model_responses(frame)
    models = tuple(sorted(frame["model"].unique()))
    stimuli = tuple(ratings.stimuli)
    categories = tuple(ratings.categories)
    rows = frame[frame["stimulus"].isin(stimuli) & frame["category"].isin(categories)]
    shape = (len(models), len(stimuli), len(categories))
    m = pd.Categorical(rows["model"], categories=models).codes
    s = pd.Categorical(rows["stimulus"], categories=stimuli).codes
    k = pd.Categorical(rows["category"], categories=categories).codes
    probabilities = np.full(shape, np.nan)
    probabilities[m, s, k] = rows["probability"].to_numpy(float)
    if np.isnan(probabilities).any():
        mi, si, ki = np.argwhere(np.isnan(probabilities))[0]
        n_missing = int(np.isnan(probabilities).sum())
        raise ValueError(
            f"model responses lack {n_missing} (model, stimulus, category) probabilities, e.g. "
            f"model {models[mi]!r}, stimulus {stimuli[si]!r}, category {categories[ki]!r}"
        )
    if "logit" in rows.columns:
        logits = np.full(shape, np.nan)
        logits[m, s, k] = rows["logit"].to_numpy(float)
    else:
        logits = clipped_logit(probabilities, eps)
    return ModelPredictions(probabilities, logits, models, stimuli, categories)


def _check_aligned(ratings: RatingArray, predictions: ModelPredictions) -> None:
    if tuple(ratings.stimuli) != tuple(predictions.stimuli):
        raise ValueError(
            "model predictions and ratings have different stimuli (use model_predictions)"
        )
    if tuple(ratings.categories) != tuple(predictions.categories):
        raise ValueError("model predictions and ratings have different categories")


def calibrate_predictions(
    predictions: ModelPredictions, ratings: RatingArray
) -> tuple[ModelPredictions, pd.DataFrame]:
    """Each model's probabilities replaced by sigmoid(slope * logit + intercept) fitted to the ratings.

    Returns the calibrated predictions and a table ``model, slope, intercept, cross_entropy``.
    """
    _check_aligned(ratings, predictions)
    x = rating_matrix(ratings)
    rows = []
    calibrated = np.empty_like(predictions.probabilities)
    logits = np.empty_like(predictions.logits)
    for index, name in enumerate(predictions.models):
        z = predictions.logits[index].reshape(1, -1)
        fit = RatingCalibration().fit(z, x)
        logits[index] = fit.transform(predictions.logits[index])
        calibrated[index] = expit(logits[index])
        rows.append(
            {
                "model": name,
                "slope": fit.slope_,
                "intercept": fit.intercept_,
                "cross_entropy": fit.cross_entropy_,
            }
        )
    return replace(predictions, probabilities=calibrated, logits=logits), pd.DataFrame(rows)


def participant_scores(
    ratings: RatingArray | np.ndarray, probabilities: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(models x participants) Pearson r and MSE over each participant's rated entries."""
    x = rating_matrix(ratings)
    y = np.asarray(probabilities, dtype=float).reshape(np.shape(probabilities)[0], -1)
    if y.shape[1] != x.shape[1]:
        raise ValueError(
            f"predictions cover {y.shape[1]} stimulus x category entries; the ratings {x.shape[1]}"
        )
    if not np.all(np.isfinite(y)):
        raise ValueError("model probabilities contain missing or infinite values")
    observed = np.isfinite(x)
    o = observed.astype(float)
    x0 = np.where(observed, x, 0.0)
    n, sx, sxx = o.sum(1), x0.sum(1), (x0 * x0).sum(1)
    sy, syy, sxy = y @ o.T, (y * y) @ o.T, y @ x0.T
    r = pearson_from_sums(n, sx, sy, sxx, syy, sxy)
    mse = mse_from_sums(n, sxx, syy, sxy)
    return r, mse


@dataclass(frozen=True)
class ModelScores:
    """Model scores: ``table`` (model, pearson_r, mse, n_participants), long ``per_participant``
    (model, participant, pearson_r, mse) and the ``calibration`` table when calibrated."""

    table: pd.DataFrame
    per_participant: pd.DataFrame
    calibration: pd.DataFrame | None = None


def model_scores(
    ratings: RatingArray, predictions: ModelPredictions, calibrate: bool = False
) -> ModelScores:
    """Mean over participants of r(model probabilities, ratings) and of the MSE, per model.

    Participants whose ratings are constant on the scored entries have no r and are left out of the
    mean r. With ``calibrate=True`` each model's logits are recalibrated first
    (:func:`calibrate_predictions`).
    """
    _check_aligned(ratings, predictions)
    calibration = None
    if calibrate:
        predictions, calibration = calibrate_predictions(predictions, ratings)
    r, mse = participant_scores(ratings, predictions.probabilities)
    people = list(ratings.participants)
    long = pd.DataFrame(
        {
            "model": np.repeat(predictions.models, len(people)),
            "participant": np.tile(people, len(predictions.models)),
            "pearson_r": r.reshape(-1),
            "mse": mse.reshape(-1),
        }
    )
    table = pd.DataFrame(
        {
            "model": list(predictions.models),
            "pearson_r": np.nanmean(r, axis=1),
            "mse": np.nanmean(mse, axis=1),
            "n_participants": np.isfinite(r).sum(1),
        }
    )
    return ModelScores(table=table, per_participant=long, calibration=calibration)
