"""What error consistency scores from an export, chosen once for ``humanlike analyze ec``, the
report and the live panel: the classification trials, the rating trials read as decisions (their
own experiment ``<experiment>-ratings``, tied top ratings by the ``ties`` policy) and, with model
responses, each model's decision on the same rated images. Practice, catch and repeated trials and
the participants the export does not analyse are left out by the export reader."""

from __future__ import annotations

from typing import Literal

import pandas as pd

from humanlike.analysis.error_consistency.analysis import model_decision_trials, standard_trials
from humanlike.analysis.io.export import Export, flag

Ties = Literal["random", "incorrect"]
TIES: tuple[str, ...] = ("random", "incorrect")


class ModelsError(ValueError):
    """The model responses cannot be scored against this export (the CLI names --models)."""


def decision_trials(frame: pd.DataFrame, ties: Ties = "random") -> pd.DataFrame:
    """Rating decisions as standard trials, in their own experiment ``<experiment>-ratings``;
    with ``ties="incorrect"`` a decision among tied top ratings counts as wrong."""
    if ties == "incorrect" and "n_tied" in frame.columns:
        frame = frame.assign(correct=flag(frame, "correct") & (frame["n_tied"] <= 1))
    standard = standard_trials(frame)
    standard["experiment"] = standard["experiment"].astype(str) + "-ratings"
    return standard


def has_trials(export: Export) -> bool:
    """Whether the export holds anything error consistency scores."""
    return export.has("classifications") or export.has("decisions")


def ec_trials(export: Export, ties: Ties = "random",
              models: pd.DataFrame | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The standard trial frame (experiment, condition, observer, group, stimulus, correct) of
    everything the export lets error consistency score, with one note per selection step.
    ``ValueError`` when it holds none; :class:`ModelsError` when ``models`` cannot be scored."""
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
    frames, notes = [], []
    if export.has("classifications"):
        selection = export.classifications()
        frames.append(standard_trials(selection.frame))
        notes += [f"classifications: {n}" for n in selection.notes]
    if export.has("decisions"):
        selection = export.decisions()
        decisions = decision_trials(selection.frame, ties)
        frames.append(decisions)
        notes += [f"decisions: {n}" for n in selection.notes]
        if models is not None:
            cells = decisions.assign(category=selection.frame["category"].to_numpy())
            try:
                frames.append(model_decision_trials(models, cells))
            except ValueError as exc:
                raise ModelsError(str(exc)) from None
            notes.append(f"decisions: {models['model'].nunique()} models' decisions added")
    elif models is not None:
        raise ModelsError(f"model responses are scored against rating decisions, and "
                          f"{export.source} holds none")
    if not frames:
        raise ValueError(f"{export.source} holds no classifications or decisions")
    return pd.concat(frames, ignore_index=True), notes
