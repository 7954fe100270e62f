"""Resuming a participant after a browser restart: same platform identity or a local resume code,
a fresh write token (the old one revoked), and an admin's lock reset."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac

import sqlalchemy as sa
from flask import current_app

from humanlike.server.extensions import db
from humanlike.server.lifecycle import PRE_TRIAL, ParticipantStatus
from humanlike.server.participants import auth_cache
from humanlike.server.participants.tokens import hash_token, new_token
from humanlike.server.platforms import Entry, Platform, preset_for
from humanlike.server.tables.core import Event, Experiment, Participant, utcnow

LOCK_RESET = "lock_reset"
"""The event ``reset_lock`` records: the next session / assignment id may claim the participant."""
SIMULTANEOUS = dt.timedelta(seconds=60)
"""How long after its allocation a second request of the same link counts as the same arrival."""
RESUMABLE = PRE_TRIAL | {ParticipantStatus.STARTED}
"""Statuses a participant may resume from: arrived, consented or mid-task (not finished, returned
or timed out)."""


def resumable(participant: Participant) -> bool:
    """True while the participant has not finished, returned or timed out."""
    return participant.status in RESUMABLE


def just_allocated(participant: Participant) -> bool:
    """True for a participant allocated less than ``SIMULTANEOUS`` ago who has not consented: a
    second request of its link is the same arrival (a reload while ``/start`` ran), not a return."""
    if participant.status != ParticipantStatus.ALLOCATED or participant.created_at is None:
        return False
    created = participant.created_at
    if created.tzinfo is None:  # SQLite returns naive UTC
        created = created.replace(tzinfo=dt.UTC)
    return utcnow() - created < SIMULTANEOUS


def same_identity(participant: Participant, entry: Entry) -> bool:
    """The source's resume rule (server/platforms.py): ``same_session`` (Prolific's SESSION_ID,
    MTurk's assignmentId, a panel's session parameter; a participant who arrived without one is
    claimed by no later id, but a reset lock, the stored id cleared by ``reset_lock``, accepts the
    next id once), ``same_participant`` (a SONA survey code, a typed
    lab id), or none. Local links carry no identity."""
    if entry.platform == Platform.LOCAL:
        return False
    preset = preset_for(participant)
    if preset.resume == "same_participant":
        return True
    if preset.resume != "same_session":
        return False
    stored = getattr(participant, preset.session_column)
    given = getattr(entry, preset.session_column)
    if given is None:
        return False
    if stored is None:  # arrived without one: only after a reset lock may a new id claim it
        return lock_was_reset(participant)
    return hmac.compare_digest(stored, given)


def bind(participant: Participant, entry: Entry) -> None:
    """Record the session / assignment the participant resumes with (after a reset it is new)."""
    if entry.platform == Platform.LOCAL:
        return
    preset = preset_for(participant)
    for column in (preset.session_column, preset.study_column):
        setattr(participant, column, getattr(entry, column) or getattr(participant, column))
    if entry.platform == Platform.MTURK:
        participant.turk_submit_to = entry.turk_submit_to or participant.turk_submit_to


def reissue_token(participant: Participant) -> str:
    """A fresh write token; only its hash is stored, so the previous token stops working."""
    token = new_token()
    participant.token_hash = hash_token(token)
    auth_cache.forget(participant.public_id)
    return token


def _code_mac(public_id: str) -> str:
    key = str(current_app.config["SECRET_KEY"]).encode()
    return hmac.new(key, b"resume:" + public_id.encode(), hashlib.sha256).hexdigest()[:8]


def resume_code(participant: Participant) -> str:
    """A local participant's resume code: public id prefix + an HMAC (changes with SECRET_KEY)."""
    return (participant.public_id[:8] + "-" + _code_mac(participant.public_id)).upper()


def participant_for_code(exp: Experiment, code: str) -> Participant | None:
    """The local participant of ``exp`` whose resume code is ``code`` (case-insensitive), if any."""
    code = code.strip().lower()
    prefix, _, mac = code.partition("-")
    if len(prefix) != 8 or len(mac) != 8 or not prefix.isalnum():
        return None
    rows = db.session.execute(
        sa.select(Participant).where(Participant.experiment_id == exp.id,
                                     Participant.platform == Platform.LOCAL,
                                     Participant.public_id.startswith(prefix))
    ).scalars().all()
    for row in rows:
        if hmac.compare_digest(_code_mac(row.public_id), mac):
            return row
    return None


def lock_was_reset(participant: Participant) -> bool:
    """True when ``reset_lock`` ran for this participant (its ``lock_reset`` event)."""
    return db.session.execute(sa.select(Event.id).where(
        Event.participant_id == participant.id, Event.type == LOCK_RESET).limit(1)).first() is not None


def reset_lock(participant: Participant) -> dict[str, str | None]:
    """Let the next entry with this platform id resume: clear the bound session / assignment id
    and record a ``lock_reset`` event (a participant who arrived without one is claimable only
    then). Returns what was cleared (for the audit log); the status and the stored trials are kept."""
    cleared = {"session_id": participant.session_id, "assignment_id": participant.assignment_id}
    if participant.platform != Platform.LOCAL:
        setattr(participant, preset_for(participant).session_column, None)
        db.session.add(Event(participant_id=participant.id, type=LOCK_RESET, server_time=utcnow()))
    return cleared
