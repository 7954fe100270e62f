"""Webhook events from a recruitment platform (Prolific's), one row each, kept once by the event id
the platform sends (``X-Event-ID``: the same on every retry of one event) and once by the delivery's
signature (a replayed delivery under a new, unsigned event id), so a redelivery changes nothing;
``happened_at`` is the signed request time (``X-Prolific-Request-Timestamp``); the unsigned
``X-Timestamp`` is kept in ``detail`` and trusted for nothing."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.tables.core import JSONType, utcnow


class EventOutcome(StrEnum):
    """What receiving an event did: moved a participant or listing (applied), nothing because an
    event of the same resource that happened later was applied already (stale), nothing because the
    participant was there already (unchanged) or the lifecycle does not allow it (conflict), or
    nothing because no participant here has that submission (unknown)."""

    APPLIED = "applied"
    STALE = "stale"
    UNCHANGED = "unchanged"
    CONFLICT = "conflict"
    UNKNOWN = "unknown"


class PlatformEvent(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One received webhook event; ``event_id`` is unique."""

    __tablename__ = "platform_event"
    id: Mapped[int] = mapped_column(primary_key=True)
    platform: Mapped[str] = mapped_column(sa.String(16))
    event_id: Mapped[str] = mapped_column(sa.String(128), unique=True)
    delivery: Mapped[str | None] = mapped_column(sa.String(64), nullable=True, unique=True,
                                                 index=True)
    """SHA-256 of the delivery's signature: a captured delivery replayed under another X-Event-ID
    is the same delivery (migration 0023)."""
    event_type: Mapped[str] = mapped_column(sa.String(64))
    resource_id: Mapped[str] = mapped_column(sa.String(128), index=True)
    status: Mapped[str | None] = mapped_column(sa.String(32), nullable=True)
    happened_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True),
                                                            nullable=True)
    received_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    outcome: Mapped[str] = mapped_column(sa.String(16))
    experiment_id: Mapped[int | None] = mapped_column(sa.ForeignKey("experiment.id"), nullable=True,
                                                      index=True)
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
