"""The quality circuit breaker's tables: one row per trip, open until a researcher resumes it; the
participant API's answers per minute, shared by every app process; the source (network) each
finished participant completed from, so that one source counts once."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.tables.core import utcnow

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


class BreakerTrip(db.Model):  # type: ignore[name-defined]  # dynamic base
    """A trip of the breaker: the rules that fired with their numbers, what the platform was told,
    and the researcher's resume (``resumed_at`` NULL: recruitment is paused)."""

    __tablename__ = "breaker_trip"
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    tripped_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    reason: Mapped[str] = mapped_column(sa.Text)
    numbers: Mapped[dict[str, Any]] = mapped_column(JSONType)
    platform_action: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    """What the recruitment platform was told: ``prolific: PAUSE``, its error, or ``local only``."""
    resumed_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    resumed_by: Mapped[str | None] = mapped_column(sa.String(120), nullable=True)


class BreakerCount(db.Model):  # type: ignore[name-defined]  # dynamic base
    """The participant API's answers and 5xx answers in one minute, summed over every app process
    (each adds its own counts, ``breaker.ErrorTally``)."""

    __tablename__ = "breaker_count"
    minute: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    """UNIX time // 60."""
    answers: Mapped[int] = mapped_column(sa.Integer, default=0, server_default="0")
    errors: Mapped[int] = mapped_column(sa.Integer, default=0, server_default="0")


class BreakerSource(db.Model):  # type: ignore[name-defined]  # dynamic base
    """The network a participant completed from: a keyed hash of the IPv4 address or of the IPv6
    /64, kept only as long as a breaker window can reach back (``breaker.prune``)."""

    __tablename__ = "breaker_source"
    participant_id: Mapped[int] = mapped_column(
        sa.ForeignKey("participant.id", ondelete="CASCADE"), primary_key=True, autoincrement=False)
    source: Mapped[str] = mapped_column(sa.String(64))
    seen_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow,
                                                 index=True)
