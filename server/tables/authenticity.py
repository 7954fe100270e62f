"""The authenticity screen's stored verdict per participant (what it means:
``humanlike.analysis.authenticity.verdict``; computed by ``server/live/authenticity.py``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.tables.core import JSONType, utcnow


class ParticipantAuthenticity(db.Model):  # type: ignore[name-defined]  # dynamic base
    """A participant's verdict (flagged, review, pass, not_screened), its reasons in words and
    every signal, as of the last pass over the experiment (the dashboard and the breaker read it)."""

    __tablename__ = "participant_authenticity"
    participant_id: Mapped[int] = mapped_column(sa.ForeignKey("participant.id"), primary_key=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    verdict: Mapped[str] = mapped_column(sa.String(16))
    reasons: Mapped[str] = mapped_column(sa.Text, default="")
    signals: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    computed_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
