"""The quality circuit breaker (spec ``[breaker]``): rules over a rolling window of participants
that pause recruitment when a study goes wrong (a link posted in the wrong place, a bot wave, a
broken stimulus), and never on fewer than ``min_participants`` finished ones.

Rules, over participants who arrived in the last ``window_minutes`` (and since the last resume):
share of finished participants failing QC (the dashboard's QC, ``admin.qc``); share returning
(returned / finished + returned); server error rate (5xx answers of the participant API in this
process over the window); the median ratio of time on task (sum of a participant's reaction times)
to the timeline's estimate for the same trials (``trial_types.seconds_per_trial``).

A trip is one ``breaker_trip`` row (taken under the experiment's lock, so two processes never trip
twice), then Prolific's PAUSE transition where the experiment has a Prolific listing
(``deploy.prolific.ProlificClient.transition_study``); the study link admits no new participant
from any source until a researcher resumes (one confirmed, audited action that sends START)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from flask import Blueprint, Response, request

from humanlike.server import audit, experiments
from humanlike.server.breaker_models import BreakerTrip
from humanlike.server.database import write_lock
from humanlike.server.extensions import db
from humanlike.server.lifecycle import DONE, ParticipantStatus
from humanlike.server.models import Experiment, Participant, ParticipantQC, Trial, utcnow
from humanlike.server.spec import BreakerRules
from humanlike.server.trial_types import TRIAL_TYPES

log = logging.getLogger(__name__)
bp = Blueprint("breaker", __name__)


class ErrorTally:
    """This process's participant-API answers in time order: (monotonic time, was it a 5xx)."""

    def __init__(self, horizon_s: float = 24 * 3600, limit: int = 200_000) -> None:
        self.horizon_s = horizon_s
        self._events: deque[tuple[float, bool]] = deque(maxlen=limit)
        self._lock = threading.Lock()

    def add(self, error: bool, now: float | None = None) -> None:
        with self._lock:
            self._events.append((time.monotonic() if now is None else now, error))

    def rate(self, window_s: float, now: float | None = None) -> tuple[int, int]:
        """(answers, 5xx answers) in the last ``window_s`` seconds."""
        now = time.monotonic() if now is None else now
        with self._lock:
            recent = [e for t, e in self._events if now - t <= window_s]
        return len(recent), sum(recent)


TALLY = ErrorTally()


@bp.after_app_request
def _count(response: Response) -> Response:
    """Count the participant API's answers; check the breaker after a completion or a decline."""
    if request.blueprint == "api" and request.view_args and "pid" in request.view_args:
        TALLY.add(response.status_code >= 500)
        returned = f'"{ParticipantStatus.RETURNED.value}"'.encode()  # the consent answer's status
        declined = request.endpoint == "api.consent" and returned in response.get_data()
        if response.status_code == 200 and (request.endpoint == "api.complete" or declined):
            try:
                if any(loaded.spec.breaker for loaded in experiments.registry().values()):
                    check_participant(str(request.view_args["pid"]))
            except Exception:  # the breaker must never fail a participant's request
                log.exception("circuit breaker check failed")
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
    n_qc_failed: int
    qc_fail_share: float | None
    return_share: float | None
    api_answers: int
    api_errors: int
    error_rate: float | None
    median_time_share: float | None
    fired: list[str] = field(default_factory=list)

    @property
    def counted(self) -> int:
        """Finished plus returned: the count the minimum applies to."""
        return self.n_finished + self.n_returned


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


def read(exp: Experiment, rules: BreakerRules, now: dt.datetime) -> Reading:
    """The window's numbers and the rules they break (none below the minimum count, where the QC
    count is not computed either)."""
    from humanlike.server.admin.qc import refresh_qc

    start = _since(exp, rules, now)
    rows = db.session.execute(sa.select(Participant.id, Participant.status).where(
        Participant.experiment_id == exp.id, Participant.created_at >= start)).all()
    finished = [pid for pid, status in rows if status in DONE]
    returned = [pid for pid, status in rows if status == ParticipantStatus.RETURNED]
    n_counted = len(finished) + len(returned)
    failed = 0
    if finished and n_counted >= rules.min_participants:  # QC only once it can matter
        refresh_qc(exp)
        failed = int(db.session.execute(sa.select(sa.func.count()).select_from(ParticipantQC).where(
            ParticipantQC.participant_id.in_(finished), ParticipantQC.qc_failed.is_(True))).scalar_one())
    answers, errors = TALLY.rate(rules.window_minutes * 60.0)
    shares = time_shares(finished).dropna()
    reading = Reading(
        window_start=start.isoformat(), n_arrived=len(rows), n_finished=len(finished),
        n_returned=len(returned), n_qc_failed=failed,
        qc_fail_share=failed / len(finished) if finished else None,
        return_share=len(returned) / n_counted if n_counted else None,
        api_answers=answers, api_errors=errors, error_rate=errors / answers if answers else None,
        median_time_share=float(np.median(shares)) if len(shares) else None)
    if n_counted < rules.min_participants:
        return reading
    checks = [("qc_fail_share", reading.qc_fail_share, rules.max_qc_fail_share, ">"),
              ("return_share", reading.return_share, rules.max_return_share, ">"),
              ("error_rate", reading.error_rate, rules.max_error_rate, ">"),
              ("median_time_share", reading.median_time_share, rules.min_time_share, "<")]
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


def _transition(exp: Experiment, action: str) -> str:
    """Send ``action`` (PAUSE / START) to the experiment's Prolific study; what happened, in words."""
    prolific = exp.platform == "prolific" and os.environ.get("PROLIFIC_TOKEN")
    study = exp.recruitment_ref if prolific else None
    if not study:
        link = "closed to newcomers" if action == "PAUSE" else "open again"
        return f"local only (no Prolific listing or token): the study link is {link}"
    from humanlike.deploy.prolific import ProlificClient, ProlificError

    client = ProlificClient(retries=1, timeout=5.0)  # inside a participant's request: bounded
    try:
        client.transition_study(study, action)
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
    trip.platform_action = _transition(exp, "PAUSE")
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
    action = _transition(exp, "START")
    audit.record(actor, "breaker_resume", experiment=exp.slug, target=str(trip.id),
                 detail={"note": note, "reason": trip.reason, "platform_action": action})
    db.session.commit()
    return trip
