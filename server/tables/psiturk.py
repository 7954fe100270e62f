"""psiTurk's tables beside humanlike's: one assignment per ``participant`` row, and the increments of
its data blob (trial records, question answers, events) as rows keyed by their place in the blob.

Column names of ``PsiturkAssignment`` are psiTurk's own (``uniqueid``, ``workerid``, ``cond`` ...), so
a project's ``custom.py`` that queries psiTurk's ``Participant`` model runs against it unchanged."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, backref, mapped_column, relationship

from humanlike.server.database import write_lock
from humanlike.server.extensions import db
from humanlike.server.tables.core import Participant, utcnow

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
        return blob_json(self)

    @datastring.setter
    def datastring(self, value: str) -> None:
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


# --------------------------------------------------------------------------- the blob as increments
# psiTurk's data blob stored as its increments: each ``PUT /sync`` adds the trial records and events
# past the longest list seen (``INSERT ... ON CONFLICT DO NOTHING`` on (assignment, position)) and
# merges question answers by key, in one transaction, so a repeated, reordered or stale PUT never
# duplicates or removes a record. ``GET /sync`` rebuilds the blob psiTurk would have stored.


#: the blob's list and object fields; every other top-level key is kept in ``meta``
LIST_FIELDS = ("data", "questiondata", "eventdata")


class BlobError(ValueError):
    """A PUT body that is not psiTurk's task data (names the field)."""


def _dumps(value: Any) -> str:
    return json.dumps(value)


def check_blob(blob: Any) -> tuple[list[Any], dict[str, Any], list[Any]]:
    """The blob's trial list, answers and events, or BlobError naming the malformed field."""
    if not isinstance(blob, dict):
        raise BlobError("the body must be a JSON object (psiTurk's task data)")
    data = blob.get("data", [])
    questions = blob.get("questiondata", {})
    events = blob.get("eventdata", [])
    if not isinstance(data, list):
        raise BlobError("field 'data' must be a list of trial records")
    if not isinstance(questions, dict):
        raise BlobError("field 'questiondata' must be an object")
    if not isinstance(events, list):
        raise BlobError("field 'eventdata' must be a list")
    return data, questions, events


def store_blob(assignment: PsiturkAssignment | int, blob: Any,
               seen: tuple[int, int] | None = None, own_connection: bool = False) -> dict[str, int]:
    """Store one PUT's blob as increments and commit; returns how many rows were new.

    ``seen`` is the (trials_seen, events_seen) the caller just read, saving a query. Rows go in
    before the counters rise in the same transaction, so a committed counter ``n`` means positions
    below ``n`` exist, and a concurrent PUT's overlap is absorbed by ON CONFLICT; the one lock taken
    is the assignment row's, by the guarded counter UPDATE, which orders the answer merges. ``own_connection`` (the PUT route) writes on a connection of its own instead of the
    ORM session's, the cheapest path; code holding session changes (``custom.py``) keeps it off."""
    data, questions, events = check_blob(blob)
    assignment_id = assignment if isinstance(assignment, int) else assignment.id
    with write_lock():
        if own_connection:
            with db.engine.begin() as conn:
                counts = _store(conn, assignment_id, blob, data, questions, events, seen)
        else:
            try:
                counts = _store(db.session.connection(), assignment_id, blob, data, questions,
                                events, seen)
                db.session.commit()
            except BaseException:
                db.session.rollback()
                raise
    if isinstance(assignment, PsiturkAssignment):
        db.session.expire(assignment)
    return counts


# plain SQL, prepared once: INSERT ... ON CONFLICT reads the same on SQLite (>= 3.24) and PostgreSQL
_SEEN = sa.text("SELECT trials_seen, events_seen FROM psiturk_assignment WHERE id = :id")
_INSERT_TRIALS = sa.text(
    "INSERT INTO psiturk_trial (assignment_id, position, current_trial, record, server_time) "
    "VALUES (:assignment_id, :position, :current_trial, :record, :server_time) "
    "ON CONFLICT (assignment_id, position) DO NOTHING"
).bindparams(sa.bindparam("server_time", type_=sa.DateTime(timezone=True)))
_INSERT_EVENTS = sa.text(
    "INSERT INTO psiturk_event (assignment_id, position, record) "
    "VALUES (:assignment_id, :position, :record) ON CONFLICT (assignment_id, position) DO NOTHING")
_QUESTIONS = "INSERT INTO psiturk_question (assignment_id, key, position, value) " \
    "VALUES (:assignment_id, :key, :position, :value) ON CONFLICT (assignment_id, key) "
_MERGE_ANSWERS = sa.text(_QUESTIONS + "DO UPDATE SET value = excluded.value")
_KEEP_ANSWERS = sa.text(_QUESTIONS + "DO NOTHING")
_RAISE_EVENTS = "events_seen = CASE WHEN events_seen < :ne THEN :ne ELSE events_seen END"
_ADVANCE = sa.text(
    f"UPDATE psiturk_assignment SET trials_seen = :n, meta = :meta, {_RAISE_EVENTS} "
    "WHERE id = :id AND trials_seen <= :n"  # the guard keeps a longer copy committed meanwhile
).bindparams(sa.bindparam("meta", type_=JSONType))
_EVENTS_ONLY = sa.text(f"UPDATE psiturk_assignment SET {_RAISE_EVENTS} WHERE id = :id")


def _store(conn: sa.Connection, assignment_id: int, blob: dict[str, Any], data: list[Any],
           questions: dict[str, Any], events: list[Any], seen: tuple[int, int] | None) -> dict[str, int]:
    if seen is None:
        row = conn.execute(_SEEN, {"id": assignment_id}).one()
        seen = (int(row.trials_seen or 0), int(row.events_seen or 0))
    trials_seen, events_seen = seen
    now = utcnow()
    new_trials = [
        {"assignment_id": assignment_id, "position": i, "record": _dumps(data[i]), "server_time": now,
         "current_trial": _int_or_none(data[i].get("current_trial") if isinstance(data[i], dict) else None)}
        for i in range(trials_seen, len(data))
    ]
    new_events = [{"assignment_id": assignment_id, "position": i, "record": _dumps(events[i])}
                  for i in range(events_seen, len(events))]
    added_trials = conn.execute(_INSERT_TRIALS, new_trials).rowcount if new_trials else 0
    added_events = conn.execute(_INSERT_EVENTS, new_events).rowcount if new_events else 0
    n, ne = len(data), len(events)
    # Whether this copy is the latest is decided by the guarded UPDATE, not by ``seen``: the UPDATE
    # takes the assignment's row lock (PostgreSQL re-checks the guard against a longer copy that
    # committed meanwhile), and answers are merged only after it, under that lock, so a shorter copy
    # racing a longer one can never overwrite the longer one's answers.
    advanced = n >= trials_seen and conn.execute(_ADVANCE, {
        "id": assignment_id, "n": n, "ne": ne,
        "meta": {k: v for k, v in blob.items() if k not in LIST_FIELDS}}).rowcount == 1
    if not advanced and new_events:
        conn.execute(_EVENTS_ONLY, {"id": assignment_id, "ne": ne})
    if questions:
        conn.execute(_MERGE_ANSWERS if advanced else _KEEP_ANSWERS, [
            {"assignment_id": assignment_id, "key": str(k)[:500], "position": i, "value": _dumps(v)}
            for i, (k, v) in enumerate(questions.items())])
    return {"trials": max(added_trials or 0, 0), "events": max(added_events or 0, 0)}


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**31 else None


def store_blob_text(assignment: PsiturkAssignment, text: str) -> None:
    """Store a blob given as JSON text (psiTurk's ``datastring``), e.g. from ``custom.py``."""
    try:
        blob = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise BlobError(f"datastring is not JSON: {exc}") from exc
    store_blob(assignment, blob)


def stored_lists(assignment_id: int) -> tuple[list[Any], dict[str, Any], list[Any]]:
    """The stored trial records, answers (in first-seen order) and events of one assignment."""
    session = db.session
    trials = session.execute(
        sa.select(PsiturkTrial.record).where(PsiturkTrial.assignment_id == assignment_id)
        .order_by(PsiturkTrial.position)).scalars()
    events = session.execute(
        sa.select(PsiturkEvent.record).where(PsiturkEvent.assignment_id == assignment_id)
        .order_by(PsiturkEvent.position)).scalars()
    questions = session.execute(
        sa.select(PsiturkQuestion.key, PsiturkQuestion.value)
        .where(PsiturkQuestion.assignment_id == assignment_id)
        .order_by(PsiturkQuestion.position, PsiturkQuestion.id)).all()
    return ([json.loads(r) for r in trials], {k: json.loads(v) for k, v in questions},
            [json.loads(r) for r in events])


def blob(assignment: PsiturkAssignment) -> dict[str, Any] | None:
    """The blob psiTurk would hold for this assignment, or None before its first PUT."""
    if assignment.meta is None and not assignment.trials_seen and not assignment.events_seen:
        return None
    data, questions, events = stored_lists(assignment.id)
    out = dict(assignment.meta or {})
    out.update(data=data, questiondata=questions, eventdata=events)
    return out


def blob_json(assignment: PsiturkAssignment) -> str | None:
    """``blob`` as psiTurk's ``datastring`` text."""
    value = blob(assignment)
    return None if value is None else json.dumps(value)


def fallback_blob(assignment: PsiturkAssignment) -> dict[str, Any]:
    """What psiTurk's ``GET /sync`` answers before any data was saved."""
    return {"condition": assignment.cond, "counterbalance": assignment.counterbalance,
            "assignmentId": assignment.assignmentid, "workerId": assignment.workerid,
            "hitId": assignment.hitid, "bonus": assignment.bonus}
