"""A researcher's include / exclude decision (``participant.analysis_override``, an
``AnalysisOverride``) beats QC, and this module is the one place that says how:

- ``exclude``: excluded, with reason ``researcher: <reason>`` before QC's reasons;
- ``include``: not excluded whatever QC says, QC's reasons kept visible after
  ``researcher include: <reason>``;
- no decision: excluded when QC failed, with QC's reasons.

The rule is written once per language it runs in, and tested equal on every combination:
``excluded_clause`` (SQL, for the dashboard's filters and counts), ``decide`` (pandas, for the
export's participants table and the live panel) and ``excluded`` (one participant, for a page
row)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from humanlike.vocabulary import AnalysisOverride

if TYPE_CHECKING:
    import pandas as pd

RESEARCHER = "researcher: "
"""Prefix of the reason of a researcher's exclusion."""
RESEARCHER_INCLUDE = "researcher include: "
"""Prefix of the reason of a researcher's inclusion (QC's reasons follow)."""


def excluded_clause(override: Any, qc_failed: Any) -> sa.ColumnElement[bool]:
    """SQL: excluded from analysis, given the override column and QC's failed flag (either may be
    NULL: no decision, no QC row). Never NULL itself, so its negation selects the others."""
    decision = sa.func.coalesce(override, "")
    return sa.or_(
        decision == AnalysisOverride.EXCLUDE.value,
        sa.and_(sa.func.coalesce(qc_failed, sa.false()),
                decision != AnalysisOverride.INCLUDE.value),
    )


def excluded(decision: object, qc_failed: object) -> bool:
    """One participant: excluded from analysis, given the override (None: no decision) and QC's
    failed flag (None: no QC row)."""
    if decision == AnalysisOverride.EXCLUDE:
        return True
    return bool(qc_failed) and decision != AnalysisOverride.INCLUDE


def _text(value: object) -> str:
    """A reason cell as text: missing (None, NaN) is empty."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


def _join(*parts: str) -> str:
    return ";".join(p for p in parts if p)


def reason(decision: object, why: object, qc_reasons: object) -> str:
    """The ``exclusion_reasons`` of one participant (see the module docstring)."""
    qc, why = _text(qc_reasons), _text(why)
    if decision == AnalysisOverride.EXCLUDE:
        return _join(RESEARCHER + why, qc)
    if decision == AnalysisOverride.INCLUDE:
        return _join(RESEARCHER_INCLUDE + why, qc)
    return qc


def decide(override: pd.Series, why: pd.Series, qc_failed: pd.Series,
           qc_reasons: pd.Series) -> tuple[pd.Series, pd.Series]:
    """pandas: ``(excluded, exclusion_reasons)`` per row, from the override (None: no decision),
    its reason, QC's failed flag (None / NaN: no QC row, not failed) and QC's reasons."""
    import pandas as pd

    decision = override.astype(object)
    excluded = (decision == AnalysisOverride.EXCLUDE.value) | (
        qc_failed.eq(True) & (decision != AnalysisOverride.INCLUDE.value))
    reasons = pd.Series([reason(d, w, q) for d, w, q in zip(decision, why, qc_reasons)],
                        index=override.index, dtype=object)
    return excluded.astype(bool), reasons


def overrides(experiment_id: int) -> dict[str, tuple[str, str]]:
    """public id -> (decision, reason) of the experiment's overridden participants."""
    from humanlike.server.extensions import db
    from humanlike.server.tables.core import Participant

    rows = db.session.execute(
        sa.select(Participant.public_id, Participant.analysis_override,
                  Participant.analysis_override_reason)
        .where(Participant.experiment_id == experiment_id,
               Participant.analysis_override.is_not(None))).all()
    return {pid: (str(decision), reason or "") for pid, decision, reason in rows}


def apply_overrides(frame: pd.DataFrame, decisions: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """The export's participants table (QC's ``excluded`` and ``exclusion_reasons``) with the
    researcher's decisions applied (``decide``)."""
    if frame.empty or not decisions or "excluded" not in frame.columns:
        return frame
    import pandas as pd

    frame = frame.copy()
    chosen = frame["participant"].isin(list(decisions))
    rows = frame[chosen]
    override = pd.Series([decisions[p][0] for p in rows["participant"]], index=rows.index)
    why = pd.Series([decisions[p][1] for p in rows["participant"]], index=rows.index)
    excluded, reasons = decide(override, why, rows["excluded"], rows["exclusion_reasons"])
    frame.loc[chosen, "excluded"] = excluded
    frame.loc[chosen, "exclusion_reasons"] = reasons
    return frame
