"""A participant's own withdrawal: every row about them deleted (``deletion.erase``), an audit entry
with the keyed hash of their platform id, the withdrawal ledger's entry (``withdrawal_ledger``),
and the count of withdrawals per experiment."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from flask import current_app
from flask_babel import gettext

from humanlike.server.extensions import db
from humanlike.server.lifecycle import DONE
from humanlike.server.platforms import Platform
from humanlike.server.rights import ledger as withdrawal_ledger
from humanlike.server.rights.deletion import Deletion, erase
from humanlike.server.rights.pseudonyms import key_from_secret, keyed_hash
from humanlike.server.rights.retention import privacy
from humanlike.server.tables.core import AuditEntry, Participant, utcnow

ACTION = "withdraw"
"""The audit action of a participant's withdrawal (actor ``participant``)."""


def withdraw_until(slug: str) -> dt.date | None:
    """The last day participants of ``slug`` may withdraw (``[privacy] withdraw_until``), if set."""
    return privacy(slug).withdraw_until


def still_possible(slug: str, now: dt.datetime | None = None) -> bool:
    """True until the end of the spec's ``withdraw_until`` day (UTC), the data's publication."""
    until = withdraw_until(slug)
    return until is None or (now or utcnow()).date() <= until


def phase(participant: Participant) -> str:
    """``after_completion`` for a finished participant, else ``mid_study``."""
    return "after_completion" if participant.status in DONE else "mid_study"


def withdraw(participant: Participant) -> Deletion:
    """Delete everything stored about the participant at their own request, audited and kept in
    the withdrawal ledger (re-applied after a restore; a finished submission's pay stays owed)."""
    when = phase(participant)
    credit = send_credit(participant)
    withdrawal_ledger.record(participant, "participant", ACTION, when, credit=credit)
    return erase(participant, "participant", ACTION, {"phase": when})


def send_credit(participant: Participant) -> str | None:
    """A SONA credit grant not yet through is sent now, before its row goes with the data (the
    survey code it needs is deleted too); the grant's state, or None without one."""
    from humanlike.server.sources import sona
    from humanlike.server.tables.sona import GrantState

    state = sona.grant_state(participant)
    if state is None or state == GrantState.GRANTED:
        return state
    return sona.retry_one(participant, actor="participant")


def withdrawn_count(slug: str) -> int:
    """How many participants of ``slug`` withdrew (from the audit log: their rows are gone)."""
    return int(db.session.execute(
        sa.select(sa.func.count()).select_from(AuditEntry)
        .where(AuditEntry.action == ACTION, AuditEntry.experiment == slug)).scalar_one())


def platform_advice(platform: str, finished: bool, withdrawn: bool = False,
                    reviewed: bool = False) -> str:
    """What the participant does on the recruitment platform after withdrawing (in plain words);
    a local link has no platform: nothing before, "close this window" after. A finished
    participant keeps the submission (it is paid; ``reviewed``: approved or rejected already)."""
    if platform == Platform.PROLIFIC:
        if finished and reviewed:
            return gettext("On Prolific, your submission has already been reviewed; withdrawing "
                           "your data does not change it.")
        if finished:
            return gettext("On Prolific, please keep your submission and do not return it: "
                           "withdrawing deletes your answers, not your pay. You finished the "
                           "study, so your submission is approved and paid as it would have been.")
        return gettext("Please also return the study on Prolific (open the study in Prolific and "
                       "choose \u201cReturn\u201d): that is how Prolific is told that you "
                       "withdrew, and your place goes to someone else.")
    if platform == Platform.MTURK:
        return gettext("Please also return the HIT on Mechanical Turk.")
    return gettext("You can close this window.") if withdrawn else ""


def withdrew(slug: str, platform_id: str | None) -> bool:
    """True when the holder of ``platform_id`` withdrew from ``slug`` (the withdrawal ledger, or
    the audit entry's hash of a withdrawal made before the ledger)."""
    if not platform_id:
        return False
    if withdrawal_ledger.matches(slug, None, platform_id, ACTION):
        return True
    key = key_from_secret(current_app.config["SECRET_KEY"])
    digest = keyed_hash(key, slug, platform_id)
    details = db.session.execute(sa.select(AuditEntry.detail).where(
        AuditEntry.action == ACTION, AuditEntry.experiment == slug)).scalars()
    return any(isinstance(d, dict) and d.get("platform_id_hmac") == digest for d in details)
