"""What the alignment profile scores from an export and model responses, chosen once for the
report and ``humanlike score``: the humans' trials error consistency scores (``ec_trials``:
classifications, and rating trials read as decisions in ``<experiment>-ratings``) beside each
model's decision (its most probable category) on the same images; only experiments with both
humans and models are kept."""

from __future__ import annotations

import pandas as pd

from humanlike.analysis.error_consistency.analysis import model_decision_trials, standard_trials
from humanlike.analysis.error_consistency.inputs import ModelsError, ec_trials
from humanlike.analysis.io.export import Export


def profile_trials(export: Export, models: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The tidy trial frame (experiment, condition, observer, group, stimulus, correct) the
    profile scores, with one note per thing left out; empty when no experiment has both."""
    notes: list[str] = []
    try:
        frame, _ = ec_trials(export, models=models if export.has("decisions") else None)
    except ModelsError as exc:
        frame, _ = ec_trials(export)
        notes.append(f"rating decisions: the models are not scored ({exc})")
    if export.has("classifications"):
        selection = export.classifications()
        cells = standard_trials(selection.frame).assign(
            category=selection.frame["category"].astype(str).to_numpy())
        try:
            frame = pd.concat([frame, model_decision_trials(models, cells)], ignore_index=True)
        except ValueError as exc:
            notes.append(f"classifications: the models are not scored ({exc})")
    frame = frame.assign(experiment=frame["experiment"].astype(str),
                         condition=frame["condition"].astype(str))
    twice = frame.duplicated(["experiment", "observer", "stimulus"])
    if twice.any():
        notes.append(f"{int(twice.sum())} repeated (observer, image) trials: the first counted")
        frame = frame[~twice]
    groups = {str(e): set(g.astype(str)) for e, g in frame.groupby("experiment")["group"]}
    both = [e for e, g in groups.items() if {"human", "model"} <= g]
    for experiment in sorted(set(groups) - set(both)):
        notes.append(f"{experiment}: no {'models' if 'human' in groups[experiment] else 'humans'}"
                     " to compare, not profiled")
    return frame[frame["experiment"].isin(both)].reset_index(drop=True), notes
