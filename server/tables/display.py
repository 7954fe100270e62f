"""The display calibration record: one row per measurement of a participant's display (virtual
chinrest and refresh rate; what it means: ``server/participants/display.py``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.tables.core import JSONType, utcnow


class DisplayCalibration(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One measurement of a participant's display before the first trial (a resume measures
    again; the latest row is the one the certificate reads)."""

    __tablename__ = "display_calibration"
    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(sa.ForeignKey("participant.id"), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    refresh_hz: Mapped[float] = mapped_column(sa.Float)
    frame_ms: Mapped[float] = mapped_column(sa.Float)
    n_intervals: Mapped[int] = mapped_column(sa.Integer)
    px_per_mm: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    viewing_distance_mm: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    px_per_deg: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    image_height_px: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    image_height_deg: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    window_width: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    window_height: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    device_pixel_ratio: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    suitable: Mapped[bool] = mapped_column(sa.Boolean)
    reason: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
