"""Input provenance per participant from the task page's browser events: the ``input`` events of
``static/js/provenance.js`` (trusted and synthetic input, clicks, pastes, ``navigator.webdriver``),
the ``environment`` event's ``webdriver``, and focus losses and hidden pages."""

from __future__ import annotations

import numpy as np
import pandas as pd

COUNTS = {"trusted": "trusted_inputs", "untrusted": "untrusted_inputs", "clicks": "clicks",
          "clicks_without_move": "clicks_without_move", "pastes": "pastes"}
"""Keys of an ``input`` event's value summed per participant -> the column they become."""


def _flat_values(events: pd.DataFrame) -> pd.DataFrame:
    """Each event's value as columns: a dict's keys; a bare value (``"hidden"``) as ``value``, as the
    server stores it; absent keys NaN."""
    records = [v if isinstance(v, dict) else {"value": v} for v in events["value"]]
    return pd.DataFrame.from_records(records, index=events.index,
                                     columns=[*COUNTS, "webdriver", "value"])


def input_signals(events: pd.DataFrame) -> pd.DataFrame:
    """Per participant (columns ``participant``, ``type``, ``value``): summed input counts (NaN
    without an ``input`` event, ``input_recorded`` False), clicks_without_move / clicks, webdriver
    from any input or environment event, blur events, and visibility events that were ``hidden``."""
    who = events["participant"].rename("participant")
    kind = events["type"]
    flat = _flat_values(events)
    is_input = kind.eq("input")
    sums = (flat.loc[is_input, list(COUNTS)].apply(pd.to_numeric).groupby(who[is_input]).sum()
            .rename(columns=COUNTS).astype(float))
    people = pd.Index(pd.unique(who), name="participant")
    out = sums.reindex(people)
    clicks = out["clicks"].where(out["clicks"] > 0)
    webdriver = flat["webdriver"].eq(True) & kind.isin(["input", "environment"])
    return pd.DataFrame({
        "trusted_inputs": out["trusted_inputs"],
        "untrusted_inputs": out["untrusted_inputs"],
        "clicks": out["clicks"],
        "clicks_without_move_share": out["clicks_without_move"] / clicks,
        "pastes": out["pastes"],
        "webdriver": webdriver.groupby(who).any().reindex(people, fill_value=False).astype(bool),
        "focus_losses": kind.eq("blur").groupby(who).sum().reindex(people, fill_value=0).astype(np.int64),
        "hidden": (kind.eq("visibility") & flat["value"].eq("hidden")).groupby(who).sum()
                  .reindex(people, fill_value=0).astype(np.int64),
        "input_recorded": is_input.groupby(who).any().reindex(people, fill_value=False).astype(bool),
    }, index=people)
