"""The benchmark's numbers in numpy alone (no Brain-Score import, so they can be checked anywhere):
ratings as a subjects x (stimulus x category) matrix, each subject's Pearson r with a prediction
over the entries the subject rated, the mean over subjects (Golan, Raju & Kriegeskorte 2020,
Methods), and the leave-one-out noise ceiling (mean over subjects of r with the mean of the other
subjects' ratings)."""

import numpy as np
import pandas as pd


def rating_matrix(frame: pd.DataFrame):
    """(subjects x entries matrix with NaN where not rated, stimulus ids, categories) from a long
    frame subject, stimulus_id, category, rating; entries ordered stimulus-major."""
    stimuli = list(dict.fromkeys(frame["stimulus_id"]))
    categories = list(dict.fromkeys(frame["category"]))
    subjects = sorted(frame["subject"].unique())
    s = pd.Categorical(frame["subject"], categories=subjects).codes
    i = pd.Categorical(frame["stimulus_id"], categories=stimuli).codes
    k = pd.Categorical(frame["category"], categories=categories).codes
    values = np.full((len(subjects), len(stimuli), len(categories)), np.nan)
    values[s, i, k] = frame["rating"].to_numpy(dtype=float)
    return values.reshape(len(subjects), -1), tuple(stimuli), tuple(categories)


def subject_r(ratings: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """Per subject, Pearson r between the subject's ratings and ``prediction`` (one row per subject,
    or one row for all) over the entries both have."""
    prediction = np.broadcast_to(prediction, ratings.shape)
    mask = np.isfinite(ratings) & np.isfinite(prediction)
    n = mask.sum(1)
    x = np.where(mask, ratings, 0.0)
    y = np.where(mask, prediction, 0.0)
    mx, my = x.sum(1) / n, y.sum(1) / n
    dx = np.where(mask, x - mx[:, None], 0.0)
    dy = np.where(mask, y - my[:, None], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (dx * dy).sum(1) / np.sqrt((dx * dx).sum(1) * (dy * dy).sum(1))


def mean_subject_r(ratings: np.ndarray, prediction: np.ndarray) -> float:
    """Mean over subjects (those with an r) of :func:`subject_r`."""
    return float(np.nanmean(subject_r(ratings, prediction)))


def leave_one_out_ceiling(ratings: np.ndarray) -> float:
    """Mean over subjects of r(subject, mean of the other subjects' ratings)."""
    observed = np.isfinite(ratings)
    total = np.where(observed, ratings, 0.0)
    count = observed.sum(0) - observed
    with np.errstate(invalid="ignore", divide="ignore"):
        others = np.where(count > 0, (total.sum(0) - total) / count, np.nan)
    return mean_subject_r(ratings, others)
