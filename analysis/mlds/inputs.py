"""What MLDS fits from an export, chosen once for ``humanlike analyze mlds``, the report and the
live panel: the scoring triads (practice, catch and repeated trials out) of the participants the
export analyses (``analysed``; all of them with ``include_excluded``)."""

from __future__ import annotations

import pandas as pd

from humanlike.analysis.io.export import Export


def has_trials(export: Export) -> bool:
    """Whether the export holds triad trials."""
    return export.has("triads")


def mlds_trials(export: Export) -> tuple[pd.DataFrame, list[str]]:
    """The triads MLDS fits, with one note per selection step (``ValueError`` without triads)."""
    selection = export.triads()
    return selection.frame, list(selection.notes)
