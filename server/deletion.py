"""Deleting a participant on request (privacy): their trials, events and row, audit-logged with a
keyed hash of the platform id instead of the id itself."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from flask import current_app

from humanlike.server import audit
from humanlike.server.extensions import db
from humanlike.server.models import Event, Experiment, Participant, Trial
from humanlike.server.pseudonyms import key_from_secret, keyed_hash


@dataclass(frozen=True)
class Deletion:
    """What was deleted: the participant's public id, platform, status and row counts."""

    public_id: str
    platform: str
    status: str
    n_trials: int
    n_events: int


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


def delete_participant(participant: Participant, actor: str, reason: str = "") -> Deletion:
    """Delete the participant with their trials and events and record it, in one transaction."""
    slug = participant.experiment.slug
    n_trials, n_events = count_rows(participant)
    done = Deletion(participant.public_id, participant.platform, participant.status,
                    n_trials, n_events)
    key = key_from_secret(current_app.config["SECRET_KEY"])
    db.session.execute(sa.delete(Event).where(Event.participant_id == participant.id))
    db.session.execute(sa.delete(Trial).where(Trial.participant_id == participant.id))
    audit.record(actor, "delete_participant", experiment=slug, target=done.public_id, detail={
        "reason": reason, "platform": done.platform, "status": done.status,
        "platform_id_hmac": keyed_hash(key, slug, participant.platform_id),
        "n_trials": n_trials, "n_events": n_events,
    })
    db.session.delete(participant)
    db.session.commit()
    return done
