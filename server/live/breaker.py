"""The quality circuit breaker (spec ``[breaker]``): rules over a rolling window of participants
that pause recruitment when a study goes wrong (a link posted in the wrong place, a bot wave, a
broken stimulus), and never on fewer than ``min_participants`` sources.

What counts (issue 45: a stranger must not stop a study cheaply): participants who arrived in the
last ``window_minutes`` (and since the last resume) and either finished the task or returned it as
the platform confirms (a Prolific ``RETURNED`` webhook, a ``recruit sync`` or "Sync now" that moved
them, or a return after the first trial, which only the platform can record). Declining consent
before any stimulus weighs nothing. Each finished participant's network (``source_of``: the IPv4
address or IPv6 /64 the completion came from, as a keyed hash) counts once: a source's participants
share one participant's weight, so forged ids from one address are one source.

Rules: share failing QC (the dashboard's QC, ``admin.qc``); share returning (confirmed returns over
counted participants); server error rate (5xx answers of the participant API, one tally in the
database shared by every app process, ``ErrorTally``); the median, over sources, of the ratio of time
on task (sum of reaction times) to the timeline's estimate for the same trials
(``trial_types.seconds_per_trial``).

A trip is one ``breaker_trip`` row (taken under the experiment's lock, so two processes never trip
twice), then Prolific's PAUSE transition where the experiment has a Prolific listing
(``deploy.prolific.ProlificClient.transition_study``); the study link admits no new participant
from any source until a researcher resumes (one confirmed, audited action that sends START)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from flask import Blueprint, Response, current_app, request
from sqlalchemy.dialects import postgresql, sqlite

from humanlike.server import audit
from humanlike.server.database import write_lock
from humanlike.server.extensions import db
from humanlike.server.lifecycle import DONE, ParticipantStatus
from humanlike.server.rights.pseudonyms import key_from_secret, keyed_hash
from humanlike.server.study import experiments
from humanlike.server.study.spec import BreakerRules
from humanlike.server.tables.breaker import BreakerCount, BreakerSource, BreakerTrip
from humanlike.server.tables.core import (
    AuditEntry,
    Experiment,
    Participant,
    ParticipantQC,
    Trial,
    utcnow,
)
from humanlike.server.tables.platform_events import EventOutcome, PlatformEvent
from humanlike.server.trial_types.registry import TRIAL_TYPES

log = logging.getLogger(__name__)
bp = Blueprint("breaker", __name__)

HORIZON_MINUTES = 24 * 60
"""Shared counts and sources are kept this long, or the longest served window if longer."""
CONFIRMED_RETURN_ACTIONS = ("sync_return", "hook_return")
"""Audit actions of a return the platform reported (``deploy.sync.apply``, ``prolific_hooks``)."""
_DONE = sorted(s.value for s in DONE)


def _insert(dialect: str) -> Any:
    """The dialect's INSERT with ON CONFLICT (SQLite and PostgreSQL)."""
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


def horizon_minutes() -> int:
    """How far back any served breaker window reaches (at least ``HORIZON_MINUTES``)."""
    windows = [loaded.spec.breaker.window_minutes for loaded in experiments.registry().values()
               if loaded.spec.breaker is not None]
    return max([HORIZON_MINUTES, *windows])


class ErrorTally:
    """The participant API's answers and 5xx answers per minute in ``breaker_count``, one table
    that every app process adds to: a process keeps its own counts for at most ``flush_s`` seconds
    and then adds them in one upsert (a process that dies loses at most that much). Counts wait
    per database, so a process serving several apps (tests, a CLI) adds each app's to its own."""

    def __init__(self, flush_s: float = 5.0) -> None:
        self.flush_s = flush_s
        self._pending: dict[str, dict[int, list[int]]] = {}
        self._flushed: dict[str, float] = {}
        self._pruned: dict[str, float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _database() -> str:
        """The current app's database, as the key its waiting counts are kept under."""
        return db.engine.url.render_as_string(hide_password=True)

    def add(self, error: bool, now: float | None = None) -> None:
        """Count one answer at ``now`` (UNIX seconds) in this process, for the app's database."""
        minute = int((time.time() if now is None else now) // 60)
        database = self._database()
        with self._lock:
            counts = self._pending.setdefault(database, {}).setdefault(minute, [0, 0])
            counts[0] += 1
            counts[1] += int(error)

    def due(self) -> bool:
        """True when the app's counts have waited ``flush_s`` seconds since its last flush."""
        database = self._database()
        return (bool(self._pending.get(database))
                and time.monotonic() - self._flushed.get(database, -float("inf")) >= self.flush_s)

    def flush(self) -> None:
        """Add this process's counts to the app's database (they stay here if that fails); at most
        hourly, drop minutes and sources older than ``horizon_minutes``."""
        database = self._database()
        with self._lock:
            pending = self._pending.pop(database, {})
            self._flushed[database] = now = time.monotonic()
            prune_now = now - self._pruned.get(database, -float("inf")) >= 3600
            if prune_now:
                self._pruned[database] = now
        if not pending and not prune_now:
            return
        try:
            with write_lock(), db.engine.begin() as conn:
                if pending:
                    table = BreakerCount.__table__
                    stmt = _insert(conn.dialect.name)(table).values(
                        [{"minute": m, "answers": a, "errors": e} for m, (a, e) in sorted(pending.items())])
                    conn.execute(stmt.on_conflict_do_update(index_elements=[table.c.minute], set_={
                        "answers": table.c.answers + stmt.excluded.answers,
                        "errors": table.c.errors + stmt.excluded.errors}))
                if prune_now:
                    keep = horizon_minutes()
                    conn.execute(sa.delete(BreakerCount).where(
                        BreakerCount.minute < int(time.time() // 60) - keep))
                    conn.execute(sa.delete(BreakerSource).where(
                        BreakerSource.seen_at < utcnow() - dt.timedelta(minutes=keep)))
        except BaseException:
            with self._lock:
                waiting = self._pending.setdefault(database, {})
                for minute, (answers, errors) in pending.items():
                    counts = waiting.setdefault(minute, [0, 0])
                    counts[0] += answers
                    counts[1] += errors
            raise

    def rate(self, window_s: float, now: float | None = None) -> tuple[int, int]:
        """(answers, 5xx answers) of every process in the minutes that overlap the last
        ``window_s`` seconds (this process's own counts added first)."""
        self.flush()
        now = time.time() if now is None else now
        stmt = sa.select(sa.func.coalesce(sa.func.sum(BreakerCount.answers), 0),
                         sa.func.coalesce(sa.func.sum(BreakerCount.errors), 0)).where(
            BreakerCount.minute >= int((now - window_s) // 60), BreakerCount.minute <= int(now // 60))
        with db.engine.connect() as conn:  # not the session's snapshot: the counts as of now
            answers, errors = conn.execute(stmt).one()
        return int(answers), int(errors)


TALLY = ErrorTally()


def source_of(address: str | None) -> str:
    """A keyed hash (``pseudonyms.keyed_hash``, keyed from the app's secret) of a client's network:
    its IPv4 address, or the /64 of an IPv6 one (what one household or host is given)."""
    network = address or "unknown"
    try:
        ip = ipaddress.ip_address(network)
    except ValueError:
        pass
    else:
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        network = str(ipaddress.ip_network(f"{ip}/64", strict=False) if ip.version == 6 else ip)
    return keyed_hash(key_from_secret(current_app.config["SECRET_KEY"]), "breaker-source", network)


def note_source(public_id: str) -> None:
    """Keep the network participant ``public_id`` completed from (the first completion's)."""
    participant_id = db.session.execute(sa.select(Participant.id).where(
        Participant.public_id == public_id)).scalar_one_or_none()
    if participant_id is None:
        return
    with write_lock():
        try:
            dialect = db.session.get_bind().dialect.name
            db.session.execute(_insert(dialect)(BreakerSource.__table__).values(
                participant_id=participant_id, source=source_of(request.remote_addr),
                seen_at=utcnow()).on_conflict_do_nothing(index_elements=["participant_id"]))
            db.session.commit()
        except BaseException:
            db.session.rollback()
            raise


def _breakers_served() -> bool:
    return any(loaded.spec.breaker for loaded in experiments.registry().values())


def check_all() -> list[BreakerTrip]:
    """``check`` every served experiment that has breaker rules; the new trips."""
    slugs = [slug for slug, loaded in experiments.registry().items() if loaded.spec.breaker]
    exps = db.session.execute(sa.select(Experiment).where(Experiment.slug.in_(slugs))).scalars().all()
    return [trip for exp in exps if (trip := check(exp)) is not None]


def _check_after_request(response: Response) -> None:
    """Check the breaker where the window may have changed: a completion (whose network is kept
    first), a Prolific webhook delivered, a "Sync now" on the dashboard."""
    view_args = request.view_args or {}
    if request.endpoint == "api.complete" and response.status_code == 200:
        note_source(str(view_args["pid"]))
        check_participant(str(view_args["pid"]))
    elif request.endpoint == "prolific_hooks.receive" and response.status_code == 200:
        check_all()
    elif request.endpoint == "admin.listing_sync" and response.status_code < 400:
        exp = db.session.execute(sa.select(Experiment).where(
            Experiment.slug == view_args.get("slug"))).scalar_one_or_none()
        if exp is not None:
            check(exp)


@bp.after_app_request
def _count(response: Response) -> Response:
    """Count the participant API's answers; check the breaker after what may change its window."""
    try:
        if request.blueprint == "api" and request.view_args and "pid" in request.view_args:
            TALLY.add(response.status_code >= 500)
            if TALLY.due():
                TALLY.flush()
        if _breakers_served():
            _check_after_request(response)
    except Exception:  # the breaker must never fail a participant's request
        log.exception("circuit breaker count or check failed")
        try:
            db.session.rollback()
        except Exception:
            log.exception("rollback after the breaker check failed")
    return response


@dataclass
class Reading:
    """The numbers the rules are checked against, and the rules that fired."""

    window_start: str
    n_arrived: int
    n_finished: int
    n_returned: int
    """Returns the platform confirmed (counted)."""
    n_declined: int
    """Returned without a stimulus and without the platform's word (declined consent): not counted."""
    n_sources: int
    """Distinct sources among the counted participants: the count the minimum applies to."""
    n_qc_failed: int
    qc_fail_share: float | None
    n_flagged: int
    flagged_share: float | None
    """Share of finished sources the authenticity screen flagged, as its last background pass
    stored the verdicts (read under ``max_flagged_share``; a participant not screened yet counts
    as not flagged)."""
    return_share: float | None
    api_answers: int
    api_errors: int
    error_rate: float | None
    median_time_share: float | None
    fired: list[str] = field(default_factory=list)

    @property
    def counted(self) -> int:
        """Distinct sources of finished or confirmed-returned participants: the minimum's count."""
        return self.n_sources


def rules_for(slug: str) -> BreakerRules | None:
    """The served spec's ``[breaker]`` rules (a deployment setting), or None (no breaker)."""
    loaded = experiments.registry().get(slug)
    return loaded.spec.breaker if loaded is not None else None


def _since(exp: Experiment, rules: BreakerRules, now: dt.datetime) -> dt.datetime:
    """Start of the window: ``window_minutes`` ago, or the last resume if later."""
    start = now - dt.timedelta(minutes=rules.window_minutes)
    resumed = db.session.execute(sa.select(sa.func.max(BreakerTrip.resumed_at)).where(
        BreakerTrip.experiment_id == exp.id)).scalar_one()
    if resumed is not None:
        resumed = resumed if resumed.tzinfo else resumed.replace(tzinfo=dt.UTC)
        start = max(start, resumed)
    return start


def time_shares(ids: list[int]) -> pd.Series:
    """Per participant: sum of reaction times over the timeline's estimate of the same trials
    (``seconds_per_trial`` of each stored non-practice task trial's type)."""
    if not ids:
        return pd.Series(dtype=float)
    rows = db.session.execute(
        sa.select(Trial.participant_id, Trial.trial_type, sa.func.count(),
                  sa.func.sum(sa.func.coalesce(Trial.rt_ms, 0.0)))
        .where(Trial.participant_id.in_(ids), Trial.practice.is_(False))
        .group_by(Trial.participant_id, Trial.trial_type)).all()
    frame = pd.DataFrame(rows, columns=["participant", "type", "n", "rt_ms"])
    internal = {name for name, t in TRIAL_TYPES.items() if t.internal}
    frame = frame[~frame["type"].isin(internal)]
    seconds = {name: t.seconds_per_trial for name, t in TRIAL_TYPES.items()}
    frame["expected_ms"] = frame["n"] * frame["type"].map(seconds).fillna(5.0) * 1000
    sums = frame.groupby("participant")[["rt_ms", "expected_ms"]].sum()
    return sums["rt_ms"] / sums["expected_ms"].where(sums["expected_ms"] > 0)


def confirmed_returns(exp: Experiment, ids: list[int]) -> set[int]:
    """Of the returned participants ``ids``, those whose return the platform reported: a Prolific
    webhook ``RETURNED`` for their submission (applied, or finding them returned already), or a
    sync / webhook that moved them (audited)."""
    if not ids:
        return set()
    hooked = sa.select(Participant.id).join(PlatformEvent, sa.and_(
        PlatformEvent.resource_id == Participant.session_id,
        PlatformEvent.experiment_id == exp.id)).where(
        Participant.id.in_(ids), PlatformEvent.status == "RETURNED",
        PlatformEvent.outcome.in_([EventOutcome.APPLIED.value, EventOutcome.UNCHANGED.value]))
    moved = sa.select(Participant.id).join(AuditEntry, AuditEntry.target == Participant.public_id).where(
        Participant.id.in_(ids), AuditEntry.experiment == exp.slug,
        AuditEntry.action.in_(CONFIRMED_RETURN_ACTIONS))
    return set(db.session.execute(sa.union(hooked, moved)).scalars())


def read(exp: Experiment, rules: BreakerRules, now: dt.datetime) -> Reading:
    """The window's numbers and the rules they break (none below the minimum count of sources,
    where the QC count is not computed either). Each source weighs as one participant: shares are
    means over sources of each source's share, the time share a median over sources."""
    from humanlike.server.live.authenticity import stored_verdicts
    from humanlike.server.live.qc import refresh_qc

    answers, errors = TALLY.rate(rules.window_minutes * 60.0)  # before QC's writes
    start = _since(exp, rules, now)
    frame = pd.DataFrame(db.session.execute(
        sa.select(Participant.id, Participant.status, Participant.started_at, BreakerSource.source)
        .outerjoin(BreakerSource, BreakerSource.participant_id == Participant.id)
        .where(Participant.experiment_id == exp.id, Participant.created_at >= start)).all(),
        columns=["id", "status", "started_at", "source"])
    finished = frame["status"].isin(_DONE)
    returned = frame["status"] == ParticipantStatus.RETURNED.value
    confirmed = returned & (frame["started_at"].notna() | frame["id"].isin(
        confirmed_returns(exp, frame.loc[returned, "id"].tolist())))
    counted = frame[finished | confirmed].copy()
    counted["source"] = counted["source"].fillna("participant:" + counted["id"].astype(str))
    counted["is_return"] = confirmed[finished | confirmed]
    n_sources = int(counted["source"].nunique())
    weight = 1.0 / counted.groupby("source")["id"].transform("size")
    done = counted[~counted["is_return"]]
    failed: set[int] = set()
    flagged: set[int] = set()
    if len(done) and n_sources >= rules.min_participants:  # QC only once it can matter
        refresh_qc(exp)
        failed = set(db.session.execute(sa.select(ParticipantQC.participant_id).where(
            ParticipantQC.participant_id.in_(done["id"].tolist()),
            ParticipantQC.qc_failed.is_(True))).scalars())
        if rules.max_flagged_share is not None:  # as the panel's background pass stored them:
            # the screen compares everyone, too much for the participant's completion request
            flagged = {pid for pid, a in stored_verdicts(exp, done["id"].tolist()).items()
                       if a.verdict == "flagged"}
    by_source = done.assign(failed=done["id"].isin(failed), flagged=done["id"].isin(flagged),
                            share=done["id"].map(time_shares(done["id"].tolist())))
    by_source = by_source.groupby("source")[["failed", "flagged", "share"]].mean()
    shares = by_source["share"].dropna()
    reading = Reading(
        window_start=start.isoformat(), n_arrived=len(frame), n_finished=int(finished.sum()),
        n_returned=int(confirmed.sum()), n_declined=int((returned & ~confirmed).sum()),
        n_sources=n_sources, n_qc_failed=len(failed),
        qc_fail_share=float(by_source["failed"].mean()) if len(by_source) else None,
        n_flagged=len(flagged),
        flagged_share=(float(by_source["flagged"].mean()) if len(by_source)
                       and rules.max_flagged_share is not None else None),
        return_share=float((weight * counted["is_return"]).sum() / n_sources) if n_sources else None,
        api_answers=answers, api_errors=errors, error_rate=errors / answers if answers else None,
        median_time_share=float(np.median(shares)) if len(shares) else None)
    if n_sources < rules.min_participants:
        return reading
    checks = [("qc_fail_share", reading.qc_fail_share, rules.max_qc_fail_share, ">"),
              ("return_share", reading.return_share, rules.max_return_share, ">"),
              ("error_rate", reading.error_rate, rules.max_error_rate, ">"),
              ("median_time_share", reading.median_time_share, rules.min_time_share, "<"),
              ("flagged_share", reading.flagged_share, rules.max_flagged_share, ">")]
    for name, value, limit, side in checks:
        if value is None or limit is None:
            continue
        if (value > limit) if side == ">" else (value < limit):
            reading.fired.append(f"{name} {value:.2f} {side} {limit:.2f}")
    return reading


def open_trip(exp: Experiment) -> BreakerTrip | None:
    """The trip that pauses ``exp`` now, if any."""
    return db.session.execute(sa.select(BreakerTrip).where(
        BreakerTrip.experiment_id == exp.id, BreakerTrip.resumed_at.is_(None))
        .order_by(BreakerTrip.id.desc()).limit(1)).scalar_one_or_none()


def paused(exp: Experiment) -> bool:
    """True while a trip is open: the study link admits no new participant."""
    return open_trip(exp) is not None


def _transition(exp: Experiment, action: str, actor: str) -> str:
    """Send ``action`` (PAUSE / START) to the experiment's Prolific study; what happened, in words."""
    prolific = exp.platform == "prolific" and os.environ.get("PROLIFIC_TOKEN")
    study = exp.recruitment_ref if prolific else None
    if not study:
        link = "closed to newcomers" if action == "PAUSE" else "open again"
        return f"local only (no Prolific listing or token): the study link is {link}"
    from humanlike.server.sources import listing
    from humanlike.server.sources.prolific import ProlificClient, ProlificError

    client = ProlificClient(retries=1, timeout=5.0)  # inside a participant's request: bounded
    try:
        listing.transition(exp, action, client, actor)
    except ProlificError as exc:
        return f"prolific: {action} failed: {exc}"
    finally:
        client.close()
    return f"prolific: {action} sent for study {study}"


def _lock(exp: Experiment) -> None:
    if db.session.get_bind().dialect.name == "postgresql":
        db.session.execute(sa.select(Experiment.id).where(Experiment.id == exp.id).with_for_update())


def check(exp: Experiment, now: dt.datetime | None = None) -> BreakerTrip | None:
    """Read the window; trip (once) when a rule fires: record, pause the platform. The new trip,
    or None (no rules, below the minimum, nothing fired, or already paused)."""
    rules = rules_for(exp.slug)
    if rules is None or paused(exp):
        return None
    now = now or utcnow()
    reading = read(exp, rules, now)
    if not reading.fired:
        return None
    with write_lock():
        try:
            _lock(exp)
            if paused(exp):
                db.session.rollback()
                return None
            trip = BreakerTrip(experiment_id=exp.id, tripped_at=now, reason="; ".join(reading.fired),
                               numbers=asdict(reading))
            db.session.add(trip)
            audit.record("breaker", "breaker_trip", experiment=exp.slug,
                         detail={"reason": trip.reason, "numbers": trip.numbers})
            db.session.commit()
        except BaseException:
            db.session.rollback()
            raise
    trip.platform_action = _transition(exp, "PAUSE", "breaker")
    db.session.commit()
    log.warning("circuit breaker tripped for %s: %s (%s)", exp.slug, trip.reason, trip.platform_action)
    return trip


def check_participant(public_id: str) -> BreakerTrip | None:
    """``check`` for the experiment of participant ``public_id``."""
    exp = db.session.execute(sa.select(Experiment).join(Participant).where(
        Participant.public_id == public_id)).scalar_one_or_none()
    return check(exp) if exp is not None else None


def notice(exp: Experiment) -> dict[str, Any] | None:
    """For the dashboard: the open trip's reason, numbers, time and what the platform was told."""
    trip = open_trip(exp)
    if trip is None:
        return None
    return {"id": trip.id, "tripped_at": trip.tripped_at, "reason": trip.reason,
            "numbers": trip.numbers, "platform_action": trip.platform_action}


def resume(exp: Experiment, actor: str, note: str = "") -> BreakerTrip | None:
    """The researcher's confirmed resume: close the open trip, audit it, send Prolific START; the
    rules then count only participants arriving after now. None when nothing was paused."""
    trip = open_trip(exp)
    if trip is None:
        return None
    trip.resumed_at, trip.resumed_by = utcnow(), actor[:120]
    action = _transition(exp, "START", actor)
    audit.record(actor, "breaker_resume", experiment=exp.slug, target=str(trip.id),
                 detail={"note": note, "reason": trip.reason, "platform_action": action})
    db.session.commit()
    return trip
