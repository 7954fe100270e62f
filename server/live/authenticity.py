"""The authenticity screen's stored verdicts (``participant_authenticity``): recomputed for every
participant by the live panel's background pass (and by the breaker under ``max_flagged_share``),
read by the dashboard's participants table and page. The screen itself:
``server/export/authenticity.py`` over ``humanlike.analysis.authenticity``."""

from __future__ import annotations

from typing import Any

import numpy as np
import sqlalchemy as sa

from humanlike.server.export.authenticity import experiment_screen
from humanlike.server.extensions import db
from humanlike.server.tables.authenticity import ParticipantAuthenticity
from humanlike.server.tables.core import Experiment, Participant, utcnow


def _plain(value: Any) -> Any:
    """A JSON-storable scalar (NaN and infinities as None)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
        return number if np.isfinite(number) else None
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def refresh_authenticity(exp: Experiment) -> int:
    """Recompute and store every participant's verdict (the screen compares participants with
    each other, so all of them at once); how many stored."""
    screened = experiment_screen(exp)
    ids = dict(db.session.execute(sa.select(Participant.public_id, Participant.id).where(
        Participant.experiment_id == exp.id)).all())
    db.session.execute(sa.delete(ParticipantAuthenticity).where(
        ParticipantAuthenticity.experiment_id == exp.id))
    now = utcnow()
    rows = []
    for participant, row in screened.iterrows():  # one row per participant
        if participant not in ids:
            continue
        signals = {k: _plain(v) for k, v in row.items()
                   if k not in ("authenticity", "authenticity_reasons")}
        rows.append(ParticipantAuthenticity(
            participant_id=ids[participant], experiment_id=exp.id, verdict=row["authenticity"],
            reasons=row["authenticity_reasons"], signals=signals, computed_at=now))
    db.session.add_all(rows)
    db.session.commit()
    return len(rows)


def stored_verdicts(exp: Experiment, ids: list[int] | None = None) -> dict[int, ParticipantAuthenticity]:
    """The stored verdicts by participant database id (of ``ids`` where given)."""
    stmt = sa.select(ParticipantAuthenticity).where(ParticipantAuthenticity.experiment_id == exp.id)
    if ids is not None:
        stmt = stmt.where(ParticipantAuthenticity.participant_id.in_(ids))
    return {a.participant_id: a for a in db.session.execute(stmt).scalars()}


def authenticity_reasons(stored: ParticipantAuthenticity | None) -> list[str]:
    """A stored verdict's reasons, one per signal (the participant page lists them)."""
    return [r for r in (stored.reasons if stored is not None else "").split("; ") if r]
