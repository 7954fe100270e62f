"""Repeat consistency: how often a participant gives a repeated image the answer it gave first."""

from __future__ import annotations

import pandas as pd


def repeat_consistency(trials: pd.DataFrame) -> pd.DataFrame:
    """Per participant with repeated images (within a ``task`` where given: a rating and a
    classification of one image are two tasks): ``n_repeats`` (presentations after the first) and
    ``repeat_agreement`` (share answered as the first presentation was; the double-pass agreement
    of Green 1964). Humans stay below 1 wherever they make errors; a deterministic program gives 1."""
    order = [c for c in ("participant", "trial_index") if c in trials]
    keys = ["participant", *(["task"] if "task" in trials else []), "stimulus"]
    frame = trials.dropna(subset=["response"]).sort_values(order, kind="stable")[[*keys, "response"]]
    first = frame.groupby(keys)["response"].transform("first")
    later = frame.groupby(keys).cumcount() > 0
    same = (frame["response"] == first)[later]
    grouped = same.groupby(frame.loc[later, "participant"])
    return pd.DataFrame({"n_repeats": grouped.size(), "repeat_agreement": grouped.mean()})
