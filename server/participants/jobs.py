"""Bulk actions as background jobs: a dashboard request writes the job and one row per participant
(``action_job``, ``action_job_item``), works on it for at most ``ACTION_INLINE_SECONDS`` (a few
participants finish inside the request) and leaves the rest to a runner thread of the server
(``JobRunner``, started by the first job a process writes, by the panel thread and by
``humanlike panel-worker``). A 129-participant approval no longer runs past the app server's
request time-out; the dashboard shows the job's progress (``/admin/jobs/<id>``).

One runner at a time works on a job: it claims the job's lease with one atomic UPDATE and renews
it before each participant; a runner that died (a killed worker, a redeploy) leaves a lease that
expires after ``LEASE`` and any runner resumes the job at its first unfinished participant. Each
participant's item is marked *in flight* before its action starts and *done* with the result
after, so a resumed job never repeats a finished one; an in-flight one (interrupted mid-action) is
checked first: a participant already moved to the action's target status is reported as done
before the interruption and nothing is sent again, and a bonus is guarded by its payment row
(``server/participants/actions.py``: claimed, settled with the platform, never paid twice). A participant whose
data were deleted under the job (a withdrawal) is reported as such, not as an error. Bonuses go
``actions.BONUS_BATCH`` at a time (``actions.pay_bonuses``: one platform request per batch)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import threading
import time
import uuid
from typing import Any

import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.lifecycle import APPROVE, REJECT
from humanlike.server.participants import actions
from humanlike.server.tables.core import Experiment, Participant, utcnow
from humanlike.server.tables.jobs import ActionJob, ActionJobItem

log = logging.getLogger(__name__)
LEASE = dt.timedelta(minutes=2)
"""A job whose lease was not renewed for this long is resumed by another runner (a platform call
times out well before)."""
INLINE_SECONDS = 10.0
"""Default seconds of a job done inside the request that asked for it (``ACTION_INLINE_SECONDS``)."""
TARGET = {"approve": APPROVE.target.value, "reject": REJECT.target.value}
"""The status an interrupted approve / reject has reached when it was carried out."""


def enqueue(exp: Experiment, action: str, inputs: dict[str, str], actor: str,
            participants: list[str]) -> ActionJob:
    """Write a job acting on ``participants`` (public ids, in order) and commit it."""
    if action not in actions.BULK_ACTIONS:
        raise actions.ActionError(f"{action!r} is not a bulk action", "action")
    job = ActionJob(experiment_id=exp.id, action=action, inputs=dict(inputs), actor=actor[:120],
                    status="queued", total=len(participants), n_done=0, n_ok=0,
                    created_at=utcnow())
    db.session.add(job)
    db.session.flush()
    db.session.execute(sa.insert(ActionJobItem), [
        {"job_id": job.id, "position": i, "participant": pid, "state": "pending"}
        for i, pid in enumerate(participants)])
    db.session.commit()
    return job


def claim(job_id: int, owner: str) -> bool:
    """Atomically take the job's lease (queued, or running with an expired lease)."""
    now = utcnow()
    done = db.session.execute(
        sa.update(ActionJob)
        .where(ActionJob.id == job_id, ActionJob.status.in_(("queued", "running")),
               sa.or_(ActionJob.lease_until.is_(None), ActionJob.lease_until < now))
        .values(status="running", lease_owner=owner, lease_until=now + LEASE,
                started_at=sa.func.coalesce(ActionJob.started_at, now))
        .execution_options(synchronize_session=False))
    db.session.commit()
    return bool(getattr(done, "rowcount", 0) == 1)


def _renew(job_id: int, owner: str) -> bool:
    """Extend the lease; False when this runner no longer holds it."""
    done = db.session.execute(
        sa.update(ActionJob).where(ActionJob.id == job_id, ActionJob.lease_owner == owner)
        .values(lease_until=utcnow() + LEASE).execution_options(synchronize_session=False))
    db.session.commit()
    return bool(getattr(done, "rowcount", 0) == 1)


def _act(job: ActionJob, item: ActionJobItem, resumed: bool) -> actions.ActionResult:
    """Apply the job's action to the item's participant (see the module's docstring)."""
    participant = db.session.execute(sa.select(Participant).where(
        Participant.experiment_id == job.experiment_id,
        Participant.public_id == item.participant)).scalar_one_or_none()
    if participant is None:
        return actions.ActionResult(item.participant, job.action, False,
                                    "not done: the participant's data were deleted (withdrawn)",
                                    "deleted")
    if resumed and TARGET.get(job.action) == participant.status:
        return actions.ActionResult(
            item.participant, job.action, True,
            f"already {participant.status} before the job was interrupted: nothing sent again",
            participant.status)
    return actions.bulk([participant], actions.action_runner(job.action, job.inputs, job.actor))[0]


def run(job_id: int, owner: str, budget: float | None = None) -> bool:
    """Work on the job while this runner holds its lease, at most ``budget`` seconds (None: to
    the end); True when the job is finished. Releases the lease when it stops early."""
    started = time.monotonic()
    while True:
        if not _renew(job_id, owner):
            return False
        item = db.session.execute(
            sa.select(ActionJobItem).where(ActionJobItem.job_id == job_id,
                                           ActionJobItem.state != "done")
            .order_by(ActionJobItem.position).limit(1)).scalar_one_or_none()
        if item is None:
            db.session.execute(sa.update(ActionJob).where(
                ActionJob.id == job_id, ActionJob.lease_owner == owner).values(
                status="done", finished_at=utcnow(), lease_owner=None, lease_until=None))
            db.session.commit()
            return True
        if budget is not None and time.monotonic() - started >= budget:
            db.session.execute(sa.update(ActionJob).where(
                ActionJob.id == job_id, ActionJob.lease_owner == owner).values(
                lease_owner=None, lease_until=None))
            db.session.commit()
            return False
        if db.session.get(ActionJob, job_id).action == "bonus":  # type: ignore[union-attr]
            _bonus_batch(job_id)
            continue
        resumed = item.state == "in_flight"
        item.state, item.attempted_at = "in_flight", utcnow()
        db.session.commit()
        job = db.session.get(ActionJob, job_id)
        assert job is not None
        try:
            result = _act(job, item, resumed)
        except Exception as exc:  # not a refusal: reported on the item, the job goes on
            db.session.rollback()
            log.exception("job %s: %s of %s failed", job_id, job.action, item.participant)
            result = actions.ActionResult(item.participant, job.action, False,
                                          f"failed: {type(exc).__name__}", "unknown")
        item = db.session.get(ActionJobItem, item.id)
        assert item is not None
        item.state, item.ok = "done", bool(result.ok)
        item.result = _shown(result)
        db.session.execute(sa.update(ActionJob).where(ActionJob.id == job_id).values(
            n_done=ActionJob.n_done + 1, n_ok=ActionJob.n_ok + int(bool(result.ok))))
        db.session.commit()


def _bonus_batch(job_id: int) -> None:
    """The job's next ``actions.BONUS_BATCH`` unfinished bonuses paid together
    (``actions.pay_bonuses``: one platform request for them, each paid at most once; in-flight
    items of an interrupted job are guarded by their payment rows, as single bonuses are)."""
    job = db.session.get(ActionJob, job_id)
    assert job is not None
    items = db.session.execute(
        sa.select(ActionJobItem).where(ActionJobItem.job_id == job_id,
                                       ActionJobItem.state != "done")
        .order_by(ActionJobItem.position).limit(actions.BONUS_BATCH)).scalars().all()
    now = utcnow()
    for item in items:
        item.state, item.attempted_at = "in_flight", now
    db.session.commit()
    ids = [item.participant for item in items]
    rows = {p.public_id: p for p in db.session.execute(sa.select(Participant).where(
        Participant.experiment_id == job.experiment_id, Participant.public_id.in_(ids))).scalars()}
    found: list[actions.ActionResult] = []
    action, inputs, actor = job.action, dict(job.inputs), job.actor
    try:
        found = actions.pay_bonuses([rows[i] for i in ids if i in rows], actor,
                                    inputs["amount"], inputs["reason"],
                                    batch=actions.BONUS_BATCH)
    except actions.ActionError as exc:
        db.session.rollback()
        found = [actions.ActionResult(i, "refused", False, str(exc), rows[i].status,
                                      detail={"field": exc.field}) for i in ids if i in rows]
    except Exception as exc:  # not a refusal: reported on the items, the job goes on
        db.session.rollback()
        log.exception("job %s: bonus batch failed", job_id)
        found = [actions.ActionResult(i, action, False, f"failed: {type(exc).__name__}",
                                      "unknown") for i in ids if i in rows]
    by_id = {r.participant: r for r in found}
    for item_id, pid in [(item.id, item.participant) for item in items]:
        result = by_id.get(pid) or actions.ActionResult(
            pid, action, False, "not done: the participant's data were deleted (withdrawn)",
            "deleted")
        row = db.session.get(ActionJobItem, item_id)
        assert row is not None
        row.state, row.ok, row.result = "done", bool(result.ok), _shown(result)
    n_ok = sum(1 for pid in ids if pid in by_id and by_id[pid].ok)
    db.session.execute(sa.update(ActionJob).where(ActionJob.id == job_id).values(
        n_done=ActionJob.n_done + len(ids), n_ok=ActionJob.n_ok + n_ok))
    db.session.commit()


SHOWN = ("participant", "action", "ok", "message", "status", "local_only")
"""What a job keeps of each result: what its page shows. The platform's reply (which names the
participant's platform id) stays in the audit row only, which a withdrawal scrubs."""


def _shown(result: actions.ActionResult) -> dict[str, Any]:
    """The result's fields the job's page shows."""
    return {k: v for k, v in dataclasses.asdict(result).items() if k in SHOWN}


def run_due(owner: str) -> int:
    """Claim and finish every job that is queued or whose runner died; how many finished."""
    finished = 0
    now = utcnow()
    due = db.session.execute(sa.select(ActionJob.id).where(
        ActionJob.status.in_(("queued", "running")),
        sa.or_(ActionJob.lease_until.is_(None), ActionJob.lease_until < now))
        .order_by(ActionJob.id)).scalars().all()
    db.session.rollback()
    for job_id in due:
        if claim(job_id, owner):
            finished += int(run(job_id, owner))
    return finished


def results(job: ActionJob) -> list[dict[str, Any]]:
    """The finished items' results, in the job's order."""
    return [row.result or {} for row in db.session.execute(
        sa.select(ActionJobItem).where(ActionJobItem.job_id == job.id,
                                       ActionJobItem.state == "done")
        .order_by(ActionJobItem.position)).scalars()]


def new_owner() -> str:
    """A lease owner name unique to this process and call."""
    return f"{os.getpid()}-{uuid.uuid4().hex[:8]}"


class JobRunner(threading.Thread):
    """A server's background runner: ``run_due`` at once when woken, else every ``interval``
    seconds (a job whose runner died is found by the next pass)."""

    def __init__(self, app: Any, interval: float) -> None:
        super().__init__(name="humanlike-jobs", daemon=True)
        self.app, self.interval, self.owner = app, interval, new_owner()
        self.wakeup = threading.Event()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.wakeup.clear()
            with self.app.app_context():
                try:
                    run_due(self.owner)
                except Exception:
                    log.exception("background jobs pass failed")
                finally:
                    db.session.remove()
            self.wakeup.wait(self.interval)

    def stop(self) -> None:
        """Finish the current participant's action and end."""
        self._stop_event.set()
        self.wakeup.set()
        self.join(120)


_START = threading.Lock()


def wake(app: Any) -> JobRunner:
    """This process's runner (started on first use), told to look for work now."""
    with _START:
        runner = app.extensions.get("job_runner")
        if runner is None or not runner.is_alive():
            runner = JobRunner(app, float(app.config.get("JOB_INTERVAL", 5)))
            app.extensions["job_runner"] = runner
            runner.start()
    runner.wakeup.set()
    return runner
