"""psiTurk's tables beside humanlike's: one assignment per ``participant`` row, and the increments of
its data blob (trial records, question answers, events) as rows keyed by their place in the blob.

Column names of ``PsiturkAssignment`` are psiTurk's own (``uniqueid``, ``workerid``, ``cond`` ...), so
a project's ``custom.py`` that queries psiTurk's ``Participant`` model runs against it unchanged."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, backref, mapped_column, relationship

from humanlike.server.extensions import db
from humanlike.server.models import Participant, utcnow

JSONType = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")


class PsiturkAssignment(db.Model):  # type: ignore[name-defined]  # dynamic base
    """psiTurk's participant record (its ``assignments`` table) without the ``datastring`` blob."""

    __tablename__ = "psiturk_assignment"
    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(sa.ForeignKey("participant.id"), unique=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    uniqueid: Mapped[str] = mapped_column(sa.String(260), unique=True)
    assignmentid: Mapped[str] = mapped_column(sa.String(128))
    workerid: Mapped[str] = mapped_column(sa.String(128), index=True)
    hitid: Mapped[str] = mapped_column(sa.String(128))
    ipaddress: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    browser: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    platform: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    language: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    cond: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    counterbalance: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    codeversion: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    beginhit: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    beginexp: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    endhit: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    bonus: Mapped[float | None] = mapped_column(sa.Float, default=0)
    status: Mapped[int] = mapped_column(sa.Integer, default=1)
    mode: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    #: the blob's scalar fields (condition, currenttrial, useragent, ...) from its longest PUT
    meta: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    #: the longest trial list seen: a shorter (stale) PUT does not overwrite meta or answers
    trials_seen: Mapped[int] = mapped_column(sa.Integer, default=0)
    #: the longest event list seen
    events_seen: Mapped[int] = mapped_column(sa.Integer, default=0)

    #: ``participant.psiturk`` is the assignment of a psiTurk participant (None for any other)
    participant: Mapped[Participant] = relationship(
        backref=backref("psiturk", uselist=False, lazy="select"))

    @property
    def datastring(self) -> str | None:
        """psiTurk's blob, rebuilt from the rows (what ``GET /sync`` answers); None before any PUT."""
        from humanlike.server.psiturk.storage import blob_json

        return blob_json(self)

    @datastring.setter
    def datastring(self, value: str) -> None:
        from humanlike.server.psiturk.storage import store_blob_text

        store_blob_text(self, value)


class PsiturkTrial(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One trial record of the blob's ``data`` list; (assignment, position) is the idempotency key."""

    __tablename__ = "psiturk_trial"
    __table_args__ = (sa.UniqueConstraint("assignment_id", "position", name="uq_psiturk_trial_pos"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(sa.ForeignKey("psiturk_assignment.id"), index=True)
    position: Mapped[int] = mapped_column(sa.Integer)
    current_trial: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    #: the record as JSON text, key order kept (psiTurk's CSV writes trialdata in the sent order)
    record: Mapped[str] = mapped_column(sa.Text)
    server_time: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)


class PsiturkEvent(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One entry of the blob's ``eventdata`` list; (assignment, position) is the idempotency key."""

    __tablename__ = "psiturk_event"
    __table_args__ = (sa.UniqueConstraint("assignment_id", "position", name="uq_psiturk_event_pos"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(sa.ForeignKey("psiturk_assignment.id"), index=True)
    position: Mapped[int] = mapped_column(sa.Integer)
    record: Mapped[str] = mapped_column(sa.Text)


class PsiturkQuestion(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One key of the blob's ``questiondata`` object; (assignment, key) is unique, merged by key."""

    __tablename__ = "psiturk_question"
    __table_args__ = (sa.UniqueConstraint("assignment_id", "key", name="uq_psiturk_question_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(sa.ForeignKey("psiturk_assignment.id"), index=True)
    key: Mapped[str] = mapped_column(sa.String(500))
    position: Mapped[int] = mapped_column(sa.Integer)
    value: Mapped[str] = mapped_column(sa.Text)
