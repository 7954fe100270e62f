"""One experiment's classification trials as dense image-by-observer arrays (the alignment inputs).

Every alignment metric reads the same arrays: ``correct`` and ``present`` (images x observers),
the images' ``condition`` and optional ``key`` (the name that joins an image to its baseline
version), humans first, then models. Built from the tidy trial frame of the export reader or
``read_model_vs_human`` (columns ``observer, group, stimulus, correct``; optional ``condition``,
``response``, ``category``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

REQUIRED = ("observer", "group", "stimulus", "correct")


@dataclass(frozen=True)
class AlignmentData:
    """Images x observers correctness (``present`` marks a trial), conditions and responses."""

    images: np.ndarray
    humans: tuple[str, ...]
    models: tuple[str, ...]
    correct: np.ndarray
    present: np.ndarray
    condition: np.ndarray
    response: np.ndarray | None

    @property
    def observers(self) -> tuple[str, ...]:
        """Humans, then models: the column order of ``correct``."""
        return self.humans + self.models

    @property
    def n_humans(self) -> int:
        """How many human observers."""
        return len(self.humans)

    def human_accuracy_per_image(self) -> np.ndarray:
        """Share of the humans who saw each image and were right (NaN where none saw it)."""
        c, p = self.correct[:, : self.n_humans], self.present[:, : self.n_humans]
        with np.errstate(invalid="ignore", divide="ignore"):
            return (c & p).sum(axis=1) / p.sum(axis=1)


def check_trials(trials: pd.DataFrame) -> None:
    """Raise ``ValueError`` naming the missing columns, or a repeated (observer, stimulus)."""
    missing = [c for c in REQUIRED if c not in trials.columns]
    if missing:
        raise ValueError(f"trials lack column(s) {missing} (need {', '.join(REQUIRED)})")
    if trials.duplicated(["observer", "stimulus"]).any():
        raise ValueError("trials hold an (observer, stimulus) pair twice: pass one experiment "
                         "with one trial per observer and image")
    groups = set(trials["group"].astype(str))
    if not {"human", "model"} <= groups:
        raise ValueError(f"trials need observers of group 'human' and 'model', found {sorted(groups)}")


def alignment_data(trials: pd.DataFrame) -> AlignmentData:
    """Pivot one experiment's trials to dense arrays (images sorted, humans then models)."""
    check_trials(trials)
    frame = trials.assign(observer=trials["observer"].astype(str),
                          stimulus=trials["stimulus"].astype(str))
    humans = tuple(sorted(frame.loc[frame["group"] == "human", "observer"].unique()))
    models = tuple(sorted(frame.loc[frame["group"] == "model", "observer"].unique()))
    observers = list(humans + models)
    images = np.array(sorted(frame["stimulus"].unique()), dtype=object)
    row = pd.Index(images).get_indexer(frame["stimulus"])
    col = pd.Index(observers).get_indexer(frame["observer"])
    keep = col >= 0
    correct = np.zeros((images.size, len(observers)), dtype=bool)
    present = np.zeros_like(correct)
    correct[row[keep], col[keep]] = frame["correct"].to_numpy(dtype=bool)[keep]
    present[row[keep], col[keep]] = True
    if "condition" in frame.columns:
        by_image = frame.drop_duplicates("stimulus").set_index("stimulus")["condition"]
        condition = by_image.reindex(images).fillna("all").astype(str).to_numpy(dtype=object)
    else:
        condition = np.full(images.size, "all", dtype=object)
    response = None
    if "response" in frame.columns:
        response = np.full((images.size, len(observers)), "", dtype=object)
        response[row[keep], col[keep]] = frame["response"].astype(str).to_numpy()[keep]
    return AlignmentData(images, humans, models, correct, present, condition, response)
