"""Conditional error consistency: kappa only on images the model gets right at baseline (Kato & He 2026).

Kato & He (2026, iScience, "Systematic image perturbations reveal persistent gaps between human and
machine vision"; Brain-Score ``Kato2026*-error_consistency``): "baseline" is the model's response to
the undistorted version of the same image (their ``Ori`` set; for sets made from silhouettes, the
silhouette ``Sil``). Images whose baseline the model gets wrong are dropped for the model and every
human, then Cohen's kappa (Geirhos et al. 2020, eq. 3) is taken per human and condition on the
rest, averaged over conditions, then humans. The baseline set itself is scored unfiltered. The
ceiling is the mean pairwise human-human kappa per condition on all images (no filter).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from humanlike.analysis.alignment.data import AlignmentData
from humanlike.analysis.alignment.shape_bias import cue_conflict_categories


def same_image(name: str) -> str:
    """The baseline of an image is the image of the same name (e.g. edge vs silhouette)."""
    return str(name)


def cue_conflict_shape_image(name: str) -> str:
    """The baseline of ``airplane1-bicycle2.png`` is the shape source image ``airplane1.png``."""
    text = str(name)
    shape, _ = cue_conflict_categories([text])
    if not shape[0]:
        return text
    stem, _, suffix = text.partition("-")
    return stem + (suffix[suffix.rfind("."):] if "." in suffix else "")


def baseline_correct(base_trials: pd.DataFrame) -> pd.Series:
    """Each (observer, stimulus) correctness of the baseline trials, as a boolean Series."""
    missing = [c for c in ("observer", "stimulus", "correct") if c not in base_trials.columns]
    if missing:
        raise ValueError(f"baseline trials lack column(s) {missing}")
    frame = base_trials.assign(observer=base_trials["observer"].astype(str),
                               stimulus=base_trials["stimulus"].astype(str))
    return frame.drop_duplicates(["observer", "stimulus"]).set_index(
        ["observer", "stimulus"])["correct"].astype(bool)


def baseline_mask(data: AlignmentData, baseline: pd.Series | None,
                  image_key: Callable[[str], str] = same_image) -> np.ndarray:
    """Images x models: whether the model got the image's baseline version right (all True without
    a baseline; False where the baseline lacks the image or the model)."""
    if baseline is None:
        return np.ones((data.images.size, len(data.models)), dtype=bool)
    keys = [image_key(name) for name in data.images]
    index = pd.MultiIndex.from_tuples([(m, k) for k in keys for m in data.models])
    values = baseline.reindex(index).fillna(False).to_numpy(dtype=bool)
    return values.reshape(data.images.size, len(data.models))
