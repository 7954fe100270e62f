"""The numbers the dashboard shows per experiment, each from a few aggregate queries (no per-row
Python work over trials), so the pages stay fast at thousands of participants."""

from __future__ import annotations

import datetime as dt
import functools
import gc
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np
import sqlalchemy as sa

from humanlike.server.admin.charts import Chart, cumulative
from humanlike.server.database import as_utc
from humanlike.server.extensions import db
from humanlike.server.lifecycle import DONE, ParticipantStatus
from humanlike.server.participants import overrides
from humanlike.server.rights import withdrawal
from humanlike.server.tables.breaker import BreakerTrip
from humanlike.server.tables.core import AuditEntry, Experiment, Participant, ParticipantQC, Trial

STATUSES = [status.value for status in ParticipantStatus]
View = TypeVar("View", bound=Callable[..., Any])


def without_gc_pauses(view: View) -> View:
    """Run a page view with Python's cyclic garbage collector held off (and restored after)."""
    # A page of 820 trials makes thousands of short-lived objects; collected mid-page they are
    # promoted to the old generation, and every few pages a full collection walks the whole heap
    # (about 160,000 objects in a server process: 75-120 ms on the 2-core benchmark machine), which
    # was the dashboard pages' p99. Held off, they die with the page (reference counting) and
    # trigger no collection; cycles, if any, are collected by the next one.

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return view(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return cast(View, wrapper)


def excluded_clause() -> sa.ColumnElement[bool]:
    """Excluded from analysis (``overrides.excluded_clause``: the researcher's decision beats QC)
    of a participant row with its ``ParticipantQC`` outer-joined."""
    return overrides.excluded_clause(Participant.analysis_override, ParticipantQC.qc_failed)


@dataclass
class ExperimentSummary:
    """One experiments-page row."""

    id: int
    slug: str
    title: str
    status: str
    platform: str
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    completion_rate: float | None = None
    median_completion_s: float | None = None
    excluded: int = 0
    last_activity: dt.datetime | None = None
    paused_by_breaker: bool = False
    """An open circuit-breaker trip closes the study link to newcomers (``server/live/breaker.py``)."""
    withdrawn: int = 0
    """Participants who withdrew (their rows are gone; counted from the audit log)."""
    simulated: int = 0
    """Simulated participants (a rehearsal, ``server.rehearsal``), also counted in ``counts``."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (the polled endpoint)."""
        return {"slug": self.slug, "status": self.status, "platform": self.platform,
                "counts": self.counts, "total": self.total,
                "completion_rate": self.completion_rate,
                "median_completion_s": self.median_completion_s, "excluded": self.excluded,
                "last_activity": self.last_activity.isoformat() if self.last_activity else None,
                "paused_by_breaker": self.paused_by_breaker, "withdrawn": self.withdrawn,
                "simulated": self.simulated}


def _last_trial_time(experiment_id: int) -> dt.datetime | None:
    newest = (sa.select(Trial.server_time)
              .where(Trial.participant_id.in_(
                  sa.select(Participant.id).where(Participant.experiment_id == experiment_id)))
              .order_by(Trial.id.desc()).limit(1))
    return as_utc(db.session.execute(newest).scalar_one_or_none())


def summaries() -> list[ExperimentSummary]:
    """Every experiment with counts by status, completion rate and time, exclusions, last activity,
    whether the circuit breaker paused it, how many withdrew and how many are simulated (a fixed
    number of queries)."""
    rows = {e.id: ExperimentSummary(e.id, e.slug, e.title, e.status, e.platform)
            for e in db.session.execute(sa.select(Experiment).order_by(Experiment.slug)).scalars()}
    for exp_id, status, n, last, simulated in db.session.execute(
            sa.select(Participant.experiment_id, Participant.status, sa.func.count(),
                      sa.func.max(sa.func.coalesce(Participant.completed_at, Participant.started_at,
                                                   Participant.consented_at, Participant.created_at)),
                      sa.func.sum(sa.case((Participant.simulated, 1), else_=0)))
            .group_by(Participant.experiment_id, Participant.status)):
        row = rows[exp_id]
        row.counts[status] = n
        row.total += n
        row.simulated += int(simulated or 0)
        latest = as_utc(last)
        if latest is not None and (row.last_activity is None or latest > row.last_activity):
            row.last_activity = latest
    done = [s.value for s in DONE]
    durations: dict[int, list[float]] = {}
    for exp_id, created, completed in db.session.execute(
            sa.select(Participant.experiment_id, Participant.created_at, Participant.completed_at)
            .where(Participant.status.in_(done), Participant.completed_at.is_not(None))):
        durations.setdefault(exp_id, []).append(
            (as_utc(completed) - as_utc(created)).total_seconds())  # type: ignore[operator]
    for exp_id, n in db.session.execute(
            sa.select(Participant.experiment_id, sa.func.count())
            .outerjoin(ParticipantQC, ParticipantQC.participant_id == Participant.id)
            .where(excluded_clause()).group_by(Participant.experiment_id)):
        rows[exp_id].excluded = n
    for (exp_id,) in db.session.execute(sa.select(BreakerTrip.experiment_id).where(
            BreakerTrip.resumed_at.is_(None)).distinct()):
        if exp_id in rows:
            rows[exp_id].paused_by_breaker = True
    by_slug = {row.slug: row for row in rows.values()}
    for slug, n in db.session.execute(
            sa.select(AuditEntry.experiment, sa.func.count()).where(
                AuditEntry.action == withdrawal.ACTION).group_by(AuditEntry.experiment)):
        if slug in by_slug:
            by_slug[slug].withdrawn = n
    for row in rows.values():
        finished = sum(row.counts.get(s, 0) for s in done)
        row.completion_rate = finished / row.total if row.total else None
        if durations.get(row.id):
            row.median_completion_s = statistics.median(durations[row.id])
        if row.total:
            last_trial = _last_trial_time(row.id)
            if last_trial is not None and (row.last_activity is None or last_trial > row.last_activity):
                row.last_activity = last_trial
    return list(rows.values())


def stored_counts(participant_ids: list[int]) -> dict[int, int]:
    """Trials stored per participant, for the listed participants only (one indexed query); a
    psiTurk participant's are its stored trial records (``psiturk.progress.record_counts``)."""
    from humanlike.server.psiturk.progress import record_counts

    if not participant_ids:
        return {}
    counts: dict[int, int] = dict(db.session.execute(  # type: ignore[arg-type]
        sa.select(Trial.participant_id, sa.func.count())
        .where(Trial.participant_id.in_(participant_ids)).group_by(Trial.participant_id)).all())
    return {**record_counts(participant_ids), **counts}


def last_seen(participant_ids: list[int]) -> dict[int, dt.datetime]:
    """Time of each listed participant's newest trial."""
    if not participant_ids:
        return {}
    rows = db.session.execute(
        sa.select(Trial.participant_id, sa.func.max(Trial.server_time))
        .where(Trial.participant_id.in_(participant_ids)).group_by(Trial.participant_id)).all()
    return {pid: t for pid, t in ((pid, as_utc(t)) for pid, t in rows) if t is not None}


def condition_balance(experiment_id: int) -> list[tuple[str, int, int]]:
    """Per condition: (condition, participants, finished)."""
    done = [s.value for s in DONE]
    rows = db.session.execute(
        sa.select(Participant.condition, sa.func.count(),
                  sa.func.sum(sa.case((Participant.status.in_(done), 1), else_=0)))
        .where(Participant.experiment_id == experiment_id)
        .group_by(Participant.condition).order_by(Participant.condition)).all()
    return [(c, int(n), int(f or 0)) for c, n, f in rows]


_COMPLETIONS: dict[tuple[str, int], tuple[tuple[Any, ...], Chart]] = {}
"""Per (database, experiment): the completions chart and the (count, newest) completion it was
drawn from."""


def completions_chart(experiment_id: int) -> Chart:
    """The completions-over-time chart, redrawn only when a completion was added or removed."""
    key = tuple(db.session.execute(
        sa.select(sa.func.count(Participant.completed_at), sa.func.max(Participant.completed_at))
        .where(Participant.experiment_id == experiment_id)).one())
    where = (str(db.engine.url), experiment_id)
    cached = _COMPLETIONS.get(where)
    if cached is not None and cached[0] == key:
        return cached[1]
    chart = cumulative(completion_times(experiment_id))
    _COMPLETIONS[where] = (key, chart)
    return chart


def completion_times(experiment_id: int) -> list[dt.datetime]:
    """Completion times of the experiment's participants, oldest first (the completions chart)."""
    rows = db.session.execute(
        sa.select(Participant.completed_at)
        .where(Participant.experiment_id == experiment_id, Participant.completed_at.is_not(None))
        .order_by(Participant.completed_at)).scalars()
    return [t for t in (as_utc(r) for r in rows) if t is not None]


def finished_minutes(experiment_id: int) -> np.ndarray:
    """Minutes from start to completion of each finished participant (the time-taken histogram,
    the listing's measured median)."""
    rows = db.session.execute(sa.select(Participant.started_at, Participant.completed_at).where(
        Participant.experiment_id == experiment_id, Participant.completed_at.is_not(None),
        Participant.started_at.is_not(None))).all()
    return np.array([(done - began).total_seconds() / 60.0 for began, done in rows
                     if began is not None and done is not None], dtype=np.float64)
