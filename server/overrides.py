"""A researcher's include / exclude decision (``participant.analysis_override``) applied to the
export's participants table: ``exclude`` -> excluded with reason ``researcher: <reason>``;
``include`` -> not excluded whatever QC says, the QC reasons kept visible after
``researcher include: <reason>``."""

from __future__ import annotations

import pandas as pd
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.models import Participant


def overrides(experiment_id: int) -> dict[str, tuple[str, str]]:
    """public id -> (decision, reason) of the experiment's overridden participants."""
    rows = db.session.execute(
        sa.select(Participant.public_id, Participant.analysis_override,
                  Participant.analysis_override_reason)
        .where(Participant.experiment_id == experiment_id,
               Participant.analysis_override.is_not(None))).all()
    return {pid: (str(decision), reason or "") for pid, decision, reason in rows}


def _join(*parts: str) -> str:
    return ";".join(p for p in parts if p)


def apply_overrides(frame: pd.DataFrame, decisions: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """The participants table with the researcher's decisions applied to ``excluded`` and
    ``exclusion_reasons``."""
    if frame.empty or not decisions or "excluded" not in frame.columns:
        return frame
    frame = frame.copy()
    for index, participant in frame["participant"].items():
        if participant not in decisions:
            continue
        decision, reason = decisions[participant]
        qc_reasons = str(frame.at[index, "exclusion_reasons"] or "")
        if decision == "exclude":
            frame.at[index, "excluded"] = True
            frame.at[index, "exclusion_reasons"] = _join(f"researcher: {reason}", qc_reasons)
        elif decision == "include":
            frame.at[index, "excluded"] = False
            frame.at[index, "exclusion_reasons"] = _join(f"researcher include: {reason}",
                                                         qc_reasons)
    return frame
