"""The withdrawal ledger: every deletion of a participant (their own withdrawal or an admin's
``delete-participant``) as keyed hashes, twice: a ``withdrawal`` row in the database and a line in
a journal file outside it (``HUMANLIKE_WITHDRAWALS``, default ``<instance>/withdrawals.jsonl``),
written before the deletion commits. A restored backup predates the withdrawals made since; ``humanlike
withdrawals reapply`` (run by ``deploy/restore.sh``) reads the journal and deletes those
participants again. The row also keeps what a finished participant's pay needs: a submission the
participant finished is ``owed`` until the platform's sync settles it (``settle``)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from flask import current_app

from humanlike.server import audit
from humanlike.server.extensions import db
from humanlike.server.lifecycle import ParticipantStatus
from humanlike.server.platforms import Platform
from humanlike.server.rights.pseudonyms import key_from_secret, keyed_hash
from humanlike.server.tables.core import Experiment, Participant, utcnow
from humanlike.server.tables.withdrawal import Withdrawal

JOURNAL = "withdrawals.jsonl"
OWED_STATUSES = frozenset({ParticipantStatus.COMPLETED, ParticipantStatus.SUBMITTED})
"""Finished and neither approved nor rejected yet: the platform still has to pay the submission."""
PAID_THROUGH_US = frozenset({Platform.PROLIFIC})
"""Platforms where the researcher approves each submission (SONA credits at completion)."""
SETTLED_ON_PLATFORM = {"APPROVED": ParticipantStatus.APPROVED.value,
                       "PARTIALLY APPROVED": ParticipantStatus.APPROVED.value,
                       "REJECTED": ParticipantStatus.REJECTED.value,
                       "RETURNED": ParticipantStatus.RETURNED.value,
                       "TIMED-OUT": ParticipantStatus.TIMED_OUT.value,
                       "SCREENED OUT": "screened_out"}
"""A Prolific status that ends a submission -> the settlement noted (nothing is sent)."""
AWAITING = "AWAITING REVIEW"
FIELDS = ("experiment", "action", "platform", "public_id_hmac", "platform_id_hmac",
          "session_id_hmac", "phase", "status", "owed")


def journal_path() -> Path:
    """Where the journal is: ``HUMANLIKE_WITHDRAWALS``, else ``withdrawals.jsonl`` in the instance
    folder (shared by every app process of one machine)."""
    configured = os.environ.get("HUMANLIKE_WITHDRAWALS") or current_app.config.get(
        "WITHDRAWAL_JOURNAL")
    return Path(configured) if configured else Path(current_app.instance_path) / JOURNAL


def _hash(slug: str, value: str | None) -> str | None:
    if not value:
        return None
    return keyed_hash(key_from_secret(current_app.config["SECRET_KEY"]), slug, value)


def _session(participant: Participant) -> str | None:
    return participant.session_id or participant.assignment_id


def entry_for(participant: Participant, actor: str, action: str, phase: str | None,
              credit: str | None = None) -> dict[str, Any]:
    """The ledger entry of a participant about to be deleted (keyed hashes only); ``credit``: the
    state of a SONA credit grant sent on the way out (``granted``: settled, else still owed)."""
    slug = participant.experiment.slug
    entry = {"experiment": slug, "actor": actor, "action": action,
             "platform": participant.platform,
             "public_id_hmac": _hash(slug, participant.public_id),
             "platform_id_hmac": _hash(slug, participant.platform_id),
             "session_id_hmac": _hash(slug, _session(participant)), "phase": phase,
             "status": participant.status,
             "owed": (participant.status in OWED_STATUSES
                      and participant.platform in PAID_THROUGH_US)}
    if credit is not None:
        entry["owed"] = credit != "granted"
        entry["settlement"] = "credited" if credit == "granted" else None
    return entry


def append_journal(entry: dict[str, Any], path: Path | None = None) -> None:
    """Append one entry to the journal (locked, flushed to disk) before the deletion commits."""
    path = path or journal_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({**entry, "at": utcnow().isoformat()}, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def read_journal(path: Path) -> Iterator[dict[str, Any]]:
    """The journal's entries (an absent file has none); a damaged line is a ValueError naming it."""
    if not path.is_file():
        return
    with path.open() as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}, line {number}: not JSON ({exc})") from exc
            if not isinstance(entry, dict) or not entry.get("experiment") \
                    or not entry.get("public_id_hmac"):
                raise ValueError(f"{path}, line {number}: experiment and public_id_hmac are needed")
            yield entry


def _row(entry: dict[str, Any]) -> Withdrawal | None:
    return db.session.execute(sa.select(Withdrawal).where(
        Withdrawal.experiment == entry["experiment"],
        Withdrawal.public_id_hmac == entry["public_id_hmac"])).scalar_one_or_none()


def add_row(entry: dict[str, Any]) -> Withdrawal:
    """The entry's ``withdrawal`` row, added to the session unless it is there already."""
    existing = _row(entry)
    if existing is not None:
        return existing
    row = Withdrawal(**{k: entry.get(k) for k in FIELDS}, created_at=utcnow())
    row.owed = bool(entry.get("owed"))
    row.status = str(entry.get("status") or "")
    row.action = str(entry.get("action") or "withdraw")
    row.platform = str(entry.get("platform") or "")
    if entry.get("settlement"):
        row.settlement, row.settled_at = str(entry["settlement"]), utcnow()
    db.session.add(row)
    return row


def record(participant: Participant, actor: str, action: str, phase: str | None = None,
           credit: str | None = None) -> dict[str, Any]:
    """Write the participant's entry to the journal, then add its row (the caller deletes and
    commits): a deletion that commits is always in the journal."""
    entry = entry_for(participant, actor, action, phase, credit)
    append_journal(entry)
    add_row(entry)
    return entry


def matches(slug: str, platform: str | None, platform_id: str | None,
            action: str | None = None) -> bool:
    """True when the ledger holds this platform id for ``slug`` (``action``: of that kind only)."""
    digest = _hash(slug, platform_id)
    if digest is None:
        return False
    query = sa.select(Withdrawal.id).where(Withdrawal.experiment == slug,
                                           Withdrawal.platform_id_hmac == digest)
    if platform is not None:
        query = query.where(Withdrawal.platform == platform)
    if action is not None:
        query = query.where(Withdrawal.action == action)
    return db.session.execute(query.limit(1)).first() is not None


@dataclass
class Reapplied:
    """What ``reapply`` did: entries read, rows added to the ledger, participants deleted again."""

    entries: int = 0
    added: int = 0
    deleted: list[str] = field(default_factory=list)


def reapply(entries: Iterable[dict[str, Any]], actor: str) -> Reapplied:
    """Make the database agree with the ledger: each entry's row present (with the audit entry the
    restore lost: same action, the platform id's HMAC only), and any participant it names (by
    public id, or platform id on the same platform) deleted again, audited as
    ``reapply_withdrawal``; idempotent, committed per entry."""
    from humanlike.server.rights.deletion import erase

    done = Reapplied()
    hashes: dict[str, dict[str, list[int]]] = {}
    for entry in entries:
        done.entries += 1
        slug = entry["experiment"]
        if _row(entry) is None:
            row = add_row(entry)
            db.session.flush()
            audit.record(str(entry.get("actor") or actor), row.action, experiment=slug,
                         target=f"withdrawal:{row.id}", detail={
                             "phase": row.phase, "platform": row.platform, "status": row.status,
                             "platform_id_hmac": row.platform_id_hmac, "reapplied_by": actor,
                             "at": entry.get("at")})
            done.added += 1
        if slug not in hashes:
            hashes[slug] = _participant_hashes(slug)
        known = hashes[slug]
        ids = set(known.get(entry["public_id_hmac"], []))
        if entry.get("platform_id_hmac"):
            ids |= set(known.get(f"{entry.get('platform')}:{entry['platform_id_hmac']}", []))
        for participant_id in sorted(ids):
            participant = db.session.get(Participant, participant_id)
            if participant is None:
                continue
            gone = erase(participant, actor, "reapply_withdrawal", {
                "phase": entry.get("phase"), "ledger_action": entry.get("action")})
            done.deleted.append(gone.public_id)
        db.session.commit()
    return done


def _participant_hashes(slug: str) -> dict[str, list[int]]:
    """The experiment's participants by the keyed hash of their public id and of
    ``platform:platform id`` (ids already replaced by retention never match: the public id does)."""
    rows = db.session.execute(
        sa.select(Participant.id, Participant.public_id, Participant.platform,
                  Participant.platform_id).join(Experiment)
        .where(Experiment.slug == slug)).all()
    found: dict[str, list[int]] = {}
    for ident, public_id, platform, platform_id in rows:
        found.setdefault(str(_hash(slug, public_id)), []).append(ident)
        if platform_id:
            found.setdefault(f"{platform}:{_hash(slug, platform_id)}", []).append(ident)
    return found


def withdrawn_submission(slug: str, platform_id: str | None,
                         submission_id: str | None) -> Withdrawal | None:
    """The ledger row of a deleted participant whose platform or submission id this is."""
    either = [c == h for c, h in ((Withdrawal.platform_id_hmac, _hash(slug, platform_id)),
                                  (Withdrawal.session_id_hmac, _hash(slug, submission_id)))
              if h is not None]
    if not either:
        return None
    return db.session.execute(sa.select(Withdrawal).where(
        Withdrawal.experiment == slug, sa.or_(*either)).order_by(Withdrawal.id).limit(1)
    ).scalar_one_or_none()


def settle(row: Withdrawal, platform_status: str, approve: Callable[[], Any] | None,
           actor: str) -> dict[str, Any]:
    """Settle a deleted participant's submission as its completion says: a finished one awaiting
    review is approved (``approve()``, the platform call), one the platform already ended is noted
    as such; anything else stays owed. What was done, keyed by the ledger row (never the id)."""
    from humanlike.server.participants.actions import PlatformError

    seen = {"withdrawal": row.id, "action": row.action, "platform": platform_status,
            "owed": row.owed, "settled": row.settlement}
    if not row.owed or row.settled_at is not None:
        return seen
    outcome: str | None = SETTLED_ON_PLATFORM.get(platform_status)
    if outcome is None and platform_status == AWAITING:
        if approve is None:
            return {**seen, "note": "approve it on the platform: no client here"}
        try:
            approve()
        except PlatformError as exc:
            audit.record(actor, "settle_withdrawn", experiment=row.experiment,
                         target=f"withdrawal:{row.id}",
                         detail={"ok": False, "platform": platform_status, "message": str(exc)})
            return {**seen, "error": str(exc)}
        outcome = ParticipantStatus.APPROVED.value
    if outcome is None:
        return seen  # not submitted yet (ACTIVE, RESERVED): the next sync looks again
    row.owed, row.settled_at, row.settlement = False, utcnow(), outcome
    audit.record(actor, "settle_withdrawn", experiment=row.experiment, target=f"withdrawal:{row.id}",
                 detail={"ok": True, "platform": platform_status, "settled": outcome})
    return {**seen, "owed": False, "settled": outcome}


def forget_late_events() -> int:
    """Delete the webhook events that arrived after a withdrawal about the deleted participant's
    submission (stored as ``unknown``, the id in clear), matched by keyed hash; how many."""
    from humanlike.server.tables.platform_events import EventOutcome, PlatformEvent

    ledger = db.session.execute(sa.select(
        Withdrawal.experiment, Withdrawal.session_id_hmac, Withdrawal.platform_id_hmac)).all()
    wanted = {(slug, h) for slug, *hashes in ledger for h in hashes if h}
    if not wanted:
        return 0
    slugs = sorted({slug for slug, _ in wanted})
    events = db.session.execute(sa.select(PlatformEvent.id, PlatformEvent.resource_id).where(
        PlatformEvent.outcome == EventOutcome.UNKNOWN.value)).all()
    late = [ident for ident, resource in events
            if any((slug, _hash(slug, resource)) in wanted for slug in slugs)]
    if late:
        db.session.execute(sa.delete(PlatformEvent).where(PlatformEvent.id.in_(late)))
    return len(late)


def owed(slug: str) -> list[Withdrawal]:
    """The experiment's deleted participants whose submission is still to be paid."""
    return list(db.session.execute(sa.select(Withdrawal).where(
        Withdrawal.experiment == slug, Withdrawal.owed.is_(True)).order_by(Withdrawal.id)).scalars())
