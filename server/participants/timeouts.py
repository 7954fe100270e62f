"""Time-outs: a participant idle longer than its spec's ``timeout_minutes`` becomes ``timed_out``.

Idle means no allocation, consent, start, trial or event in that time. The sweep runs for one
experiment before each allocation (so idle places are freed) and for all of them from
``humanlike sweep-timeouts``; a timed-out participant who comes back is resumed by the API."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.lifecycle import TIME_OUT
from humanlike.server.study.spec import ExperimentSpec
from humanlike.server.tables.core import Event, Experiment, Participant, Trial, utcnow

DEFAULT_TIMEOUT_MINUTES: int = ExperimentSpec.model_fields["timeout_minutes"].default


def timeout_minutes(spec: dict[str, Any]) -> int:
    """The experiment's ``timeout_minutes`` from its stored spec (the default when absent)."""
    value = spec.get("timeout_minutes")
    return int(value) if isinstance(value, int) and value > 0 else DEFAULT_TIMEOUT_MINUTES


def overdue(experiment_id: int, minutes: int, now: dt.datetime) -> sa.ColumnElement[bool]:
    """Participants of the experiment that may time out and did nothing since ``now - minutes``."""
    limit = now - dt.timedelta(minutes=minutes)
    recent_trial = sa.exists().where(Trial.participant_id == Participant.id, Trial.server_time >= limit)
    recent_event = sa.exists().where(Event.participant_id == Participant.id, Event.server_time >= limit)
    # a psiTurk participant's saves are rows of psiturk_trial (server/psiturk/)
    from humanlike.server.tables.psiturk import PsiturkAssignment, PsiturkTrial

    recent_psiturk = sa.exists().where(
        PsiturkAssignment.participant_id == Participant.id,
        PsiturkTrial.assignment_id == PsiturkAssignment.id, PsiturkTrial.server_time >= limit)
    return sa.and_(
        Participant.experiment_id == experiment_id,
        Participant.status.in_(TIME_OUT.sources),
        Participant.created_at < limit,
        sa.or_(Participant.consented_at.is_(None), Participant.consented_at < limit),
        sa.or_(Participant.started_at.is_(None), Participant.started_at < limit),
        ~recent_trial,
        ~recent_event,
        ~recent_psiturk,
    )


def sweep_experiment(experiment: Experiment, now: dt.datetime | None = None) -> int:
    """Time out the experiment's idle participants (in the caller's transaction); how many."""
    now = now or utcnow()
    minutes = timeout_minutes(experiment.spec)
    result = db.session.execute(
        sa.update(Participant)
        .where(overdue(experiment.id, minutes, now))
        .values(**TIME_OUT.values(now))
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]  # CursorResult


def sweep(now: dt.datetime | None = None) -> dict[str, int]:
    """Time out idle participants of every experiment and commit; participants timed out per slug."""
    now = now or utcnow()
    counts = {}
    for experiment in db.session.execute(sa.select(Experiment)).scalars().all():
        counts[experiment.slug] = sweep_experiment(experiment, now)
    db.session.commit()
    return counts
