"""SONA credit grants: one row per completed participant of a study with a server-side completion
URL, written in the transaction that completes the participant, so a restart never loses one."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.tables.core import utcnow


class GrantState(StrEnum):
    """A grant's state: waiting to be sent (or re-sent after a network failure), claimed by one
    sender, credited by SONA, or refused by SONA (shown on the dashboard; retried by hand)."""

    PENDING = "pending"
    SENDING = "sending"
    GRANTED = "granted"
    FAILED = "failed"


class SonaGrant(db.Model):  # type: ignore[name-defined]  # dynamic base
    """The server-side credit grant of one participant; ``participant_id`` is unique."""

    __tablename__ = "sona_grant"
    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(sa.ForeignKey("participant.id"), unique=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    url: Mapped[str] = mapped_column(sa.Text)
    state: Mapped[str] = mapped_column(sa.String(16), default=GrantState.PENDING.value, index=True)
    attempts: Mapped[int] = mapped_column(sa.Integer, default=0)
    claimed_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    granted_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    last_error: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    reply: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
