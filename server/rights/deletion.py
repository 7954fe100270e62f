"""Deleting a participant (an admin's ``delete-participant`` or the participant's own withdrawal):
every row that refers to them, in every table, the webhook events about their submission, their
ids hashed wherever else they occur, and an audit entry with a keyed hash of the platform id
instead of the id itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import sqlalchemy as sa
from flask import current_app

from humanlike.server import audit
from humanlike.server.extensions import db
from humanlike.server.participants import auth_cache
from humanlike.server.rights.pseudonyms import key_from_secret, keyed_hash, pseudonym
from humanlike.server.tables.core import Event, Experiment, Participant, Trial
from humanlike.server.tables.platform_events import PlatformEvent


@dataclass(frozen=True)
class Deletion:
    """What was deleted: the participant's public id, platform, status and row counts."""

    public_id: str
    platform: str
    status: str
    n_trials: int
    n_events: int
    rows: dict[str, int] = field(default_factory=dict)
    """Rows deleted per table (the participant's own row included)."""


def find_participant(slug: str, ident: str) -> Participant:
    """The participant of experiment ``slug`` with this public id or platform id (LookupError)."""
    exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == slug)).scalar_one_or_none()
    if exp is None:
        raise LookupError(f"no experiment {slug!r} in the database")
    matches = db.session.execute(
        sa.select(Participant).where(
            Participant.experiment_id == exp.id,
            sa.or_(Participant.public_id == ident, Participant.platform_id == ident),
        )
    ).scalars().all()
    if not matches:
        raise LookupError(f"experiment {slug!r} has no participant with id {ident!r}")
    if len(matches) > 1:
        ids = ", ".join(p.public_id for p in matches)
        raise LookupError(f"{ident!r} matches several participants ({ids}): name one by public id")
    return matches[0]


def count_rows(participant: Participant) -> tuple[int, int]:
    """(trials, events) stored for a participant."""
    def count(model: type[Trial] | type[Event]) -> int:
        return db.session.execute(sa.select(sa.func.count()).select_from(model).where(
            model.participant_id == participant.id)).scalar_one()
    return count(Trial), count(Event)


def referring(table: sa.Table) -> list[tuple[sa.Table, sa.Column[Any]]]:
    """Every (table, column) of the schema with a foreign key to ``table`` (trials, events, QC,
    payments, psiTurk's tables ... and whatever is added later)."""
    found = []
    for other in reversed(db.metadata.sorted_tables):  # dependants first
        for fk in other.foreign_keys:
            if fk.column.table is table and fk.parent.table is other:
                found.append((other, fk.parent))
    return found


def _rowcount(result: sa.Result[Any]) -> int:
    """Rows a DELETE removed (a DML statement's result is a ``CursorResult``)."""
    return int(cast(sa.CursorResult[Any], result).rowcount or 0)


def delete_referring(table: sa.Table, ids: list[Any], counts: dict[str, int]) -> None:
    """Delete the rows of every table that refer to ``table``'s rows ``ids``, deepest first."""
    if not ids:
        return
    for child, column in referring(table):
        [key] = list(child.primary_key.columns) or [column]
        child_ids = list(db.session.execute(sa.select(key).where(column.in_(ids))).scalars())
        if child is not table:
            delete_referring(child, child_ids, counts)
        gone = _rowcount(db.session.execute(sa.delete(child).where(column.in_(ids))))
        counts[child.name] = counts.get(child.name, 0) + gone


def own_ids(participant: Participant) -> list[str]:
    """The participant's own ids on the platform still in clear (platform, session, assignment)."""
    from humanlike.server.rights.retention import PERSONAL_COLUMNS, is_hashed

    values = (getattr(participant, c) for c in PERSONAL_COLUMNS)
    return sorted({v for v in values if v and not is_hashed(v)})


def platform_id_hmac(participant: Participant) -> str:
    """The keyed hash (HMAC-SHA256 with the server's secret) of the participant's platform id."""
    key = key_from_secret(current_app.config["SECRET_KEY"])
    return keyed_hash(key, participant.experiment.slug, participant.platform_id)


def erase(participant: Participant, actor: str, action: str,
          detail: dict[str, Any] | None = None) -> Deletion:
    """Delete the participant, every row referring to them and the webhook events about their
    submission, hash their ids wherever else they occur (``retention.scrub_elsewhere``), audited as
    ``action`` with the keyed hash of the platform id; one transaction, committed here."""
    from humanlike.server.rights.retention import scrub_elsewhere  # retention builds on this module

    slug = participant.experiment.slug
    n_trials, n_events = count_rows(participant)
    counts: dict[str, int] = {}
    table = Participant.__table__
    audit.record(actor, action, experiment=slug, target=participant.public_id, detail={
        **(detail or {}), "platform": participant.platform, "status": participant.status,
        "platform_id_hmac": platform_id_hmac(participant),
        "n_trials": n_trials, "n_events": n_events,
    })
    public_id, platform, status = participant.public_id, participant.platform, participant.status
    ids = own_ids(participant)
    mapping = {v: pseudonym(key_from_secret(current_app.config["SECRET_KEY"]), slug, v)
               for v in ids}
    db.session.flush()
    delete_referring(table, [participant.id], counts)
    db.session.expunge(participant)
    counts["participant"] = _rowcount(db.session.execute(
        sa.delete(table).where(table.c.id == participant.id)))
    if ids:  # the webhook events about their submission are rows about them too
        counts["platform_event"] = _rowcount(db.session.execute(sa.delete(PlatformEvent).where(
            PlatformEvent.platform == platform, PlatformEvent.resource_id.in_(ids))))
    scrub_elsewhere(mapping)  # any other mention (the audit log's platform replies ...): hashed
    db.session.commit()
    auth_cache.forget(public_id)
    return Deletion(public_id, platform, status, n_trials, n_events, counts)


def delete_participant(participant: Participant, actor: str, reason: str = "") -> Deletion:
    """An admin's deletion (``humanlike delete-participant``): everything about the participant,
    kept in the withdrawal ledger so a restored backup deletes them again."""
    from humanlike.server.rights import ledger as withdrawal_ledger

    withdrawal_ledger.record(participant, actor, "delete_participant")
    return erase(participant, actor, "delete_participant", {"reason": reason})
