"""The tables of the researcher's background jobs (bulk platform actions): one row per job with its
progress and lease, one row per participant it acts on."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.tables.core import utcnow

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


class ActionJob(db.Model):  # type: ignore[name-defined]  # dynamic base
    """A bulk action (approve, reject, bonus, ...) asked for on the dashboard: who asked, the
    inputs, how far it got, and the lease of the runner working on it (``server/participants/jobs.py``)."""

    __tablename__ = "action_job"
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    action: Mapped[str] = mapped_column(sa.String(32))
    inputs: Mapped[dict[str, Any]] = mapped_column(JSONType)
    actor: Mapped[str] = mapped_column(sa.String(120))
    status: Mapped[str] = mapped_column(sa.String(16), default="queued", index=True)
    """queued, running (a runner holds or held the lease), done."""
    total: Mapped[int] = mapped_column(sa.Integer, default=0)
    n_done: Mapped[int] = mapped_column(sa.Integer, default=0)
    n_ok: Mapped[int] = mapped_column(sa.Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True),
                                                           nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True),
                                                            nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    lease_until: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True),
                                                            nullable=True)


class ActionJobItem(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One participant of a job: pending, in flight (the action was started: on resume it is
    checked, never blindly repeated) or done with its result. The participant is named by public id,
    so a withdrawal (the row deleted) leaves the item to say so."""

    __tablename__ = "action_job_item"
    __table_args__ = (sa.UniqueConstraint("job_id", "position", name="uq_action_job_item"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("action_job.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(sa.Integer)
    participant: Mapped[str] = mapped_column(sa.String(64))
    state: Mapped[str] = mapped_column(sa.String(16), default="pending")
    ok: Mapped[bool | None] = mapped_column(sa.Boolean, nullable=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    attempted_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True),
                                                             nullable=True)
