"""A plan's inputs from files: model responses on the scored stimuli, their strata, and the human
noise SD (assumed, or fitted from a pilot export)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from humanlike.analysis.planning.recovery import PlanInputs
from humanlike.analysis.ratings.data import (
    SCORED_KINDS,
    category_order,
    rating_array,
    stimulus_order,
    stimulus_table,
)
from humanlike.analysis.ratings.scores import validate_model_responses


def plan_inputs(model_responses: pd.DataFrame, stimuli: pd.DataFrame, n_trials: int,
                noise_sd: float) -> PlanInputs:
    """Models' probabilities on the scored stimuli (natural, controversial) of ``stimuli``
    (columns ``stimulus``, ``kind`` and the targeted models), in the rating array's order."""
    frame = validate_model_responses(model_responses)
    table = stimuli.rename(columns={"kind": "stimulus_kind"})
    table = stimulus_table(table[table["stimulus_kind"].isin(SCORED_KINDS)])
    table = table.loc[stimulus_order(table)]
    missing = sorted(set(table.index) - set(frame["stimulus"]))
    if missing:
        raise ValueError(f"model responses lack {len(missing)} scored stimuli, e.g. {missing[0]!r}")
    models = tuple(sorted(frame["model"].unique()))
    if len(models) < 2:
        raise ValueError("a plan needs at least two candidate models")
    categories = category_order(frame["category"])
    wide = frame.pivot_table(index=["model", "stimulus"], columns="category", values="probability")
    y = np.stack([wide.loc[m].reindex(index=list(table.index), columns=categories).to_numpy(float)
                  for m in models])
    if not np.isfinite(y).all():
        raise ValueError("model responses lack some (model, stimulus, category) probabilities")
    if not noise_sd > 0:
        raise ValueError(f"the human noise SD must be positive, got {noise_sd}")
    return PlanInputs(y, models, tuple(table.index), tuple(table["stratum"].astype(str)),
                      int(min(n_trials, len(table))), float(noise_sd))


def fit_noise(ratings: pd.DataFrame) -> float:
    """The pilot's human noise SD: the pooled SD of ratings around each (stimulus, category)'s
    mean over participants, sqrt(sum (x - mean)^2 / sum (n - 1)) (first presentations)."""
    x = rating_array(ratings).values
    observed = np.isfinite(x)
    n = observed.sum(0)
    mean = np.where(n > 0, np.nansum(x, 0) / np.maximum(n, 1), 0.0)
    squares = np.nansum((x - mean) ** 2, 0)
    dof = np.clip(n - 1, 0, None).sum()
    if dof < 1:
        raise ValueError("the pilot has no (stimulus, category) rated by two participants")
    return float(np.sqrt(squares[n > 1].sum() / dof))


def read_model_responses(path: str | Path) -> pd.DataFrame:
    """A model-responses CSV (``humanlike analyze ratings --models``' format)."""
    from humanlike.analysis.ratings.scores import load_model_responses

    return load_model_responses(path)
