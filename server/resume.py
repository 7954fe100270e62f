"""Resuming a participant after a browser restart: same platform identity or a local resume code,
a fresh write token (the old one revoked), and an admin's lock reset."""

from __future__ import annotations

import hashlib
import hmac

import sqlalchemy as sa
from flask import current_app

from humanlike.server import auth_cache
from humanlike.server.extensions import db
from humanlike.server.lifecycle import PRE_TRIAL, ParticipantStatus
from humanlike.server.models import Experiment, Participant
from humanlike.server.platforms import Entry, Platform
from humanlike.server.tokens import hash_token, new_token

RESUMABLE = PRE_TRIAL | {ParticipantStatus.STARTED}
"""Statuses a participant may resume from: arrived, consented or mid-task (not finished, returned
or timed out)."""


def resumable(participant: Participant) -> bool:
    """True while the participant has not finished, returned or timed out."""
    return participant.status in RESUMABLE


def same_identity(participant: Participant, entry: Entry) -> bool:
    """Prolific: the same SESSION_ID; MTurk: the same assignmentId. A reset lock (the stored id
    cleared by ``reset_lock``) accepts the next id once. Local links carry no identity."""
    if entry.platform == Platform.PROLIFIC:
        stored, given = participant.session_id, entry.session_id
    elif entry.platform == Platform.MTURK:
        stored, given = participant.assignment_id, entry.assignment_id
    else:
        return False
    if given is None:
        return False
    return stored is None or hmac.compare_digest(stored, given)


def bind(participant: Participant, entry: Entry) -> None:
    """Record the session / assignment the participant resumes with (after a reset it is new)."""
    if entry.platform == Platform.PROLIFIC:
        participant.session_id = entry.session_id
        participant.study_id = entry.study_id or participant.study_id
    elif entry.platform == Platform.MTURK:
        participant.assignment_id = entry.assignment_id
        participant.hit_id = entry.hit_id or participant.hit_id
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


def reset_lock(participant: Participant) -> dict[str, str | None]:
    """Let the next entry with this platform id resume: clear the bound session / assignment id.
    Returns what was cleared (for the audit log); the status and the stored trials are kept."""
    cleared = {"session_id": participant.session_id, "assignment_id": participant.assignment_id}
    if participant.platform == Platform.PROLIFIC:
        participant.session_id = None
    elif participant.platform == Platform.MTURK:
        participant.assignment_id = None
    return cleared
