"""The quality circuit breaker's table: one row per trip, open until a researcher resumes it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.models import utcnow

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
