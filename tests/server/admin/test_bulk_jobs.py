"""Bulk actions as background jobs (server/participants/jobs.py): the request that asks for one returns at once
with a progress page, the job runner does the work, an interrupted job resumes without acting on
anyone twice, a participant withdrawn under a job is reported as such; and the QC pass stores the
other participants' QC when one is withdrawn under it, without a raw SQL error."""

from __future__ import annotations

import datetime as dt
import re
from typing import ClassVar

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.live import panel, qc
from humanlike.server.participants import actions, jobs
from humanlike.server.rights.withdrawal import withdraw
from humanlike.server.tables.core import (
    AuditEntry,
    Experiment,
    Participant,
    ParticipantQC,
    Payment,
    utcnow,
)
from humanlike.server.tables.jobs import ActionJob, ActionJobItem
from tests.server.admin.dashboard_helpers import csrf_from, login, run_participant
from tests.server.admin.test_experiment_page import completed


class CountingRecruiter:
    """A platform that approves and pays, counting the calls per participant."""

    calls: ClassVar[dict[tuple[str, str], int]] = {}

    def __init__(self, experiment) -> None:
        self.experiment = experiment

    def _count(self, what: str, participant) -> dict:
        key = (what, participant.public_id)
        self.calls[key] = self.calls.get(key, 0) + 1
        return {"status": "ok"}

    def approve(self, participant):
        return self._count("approve", participant)

    def reject(self, participant, message, category):
        return self._count("reject", participant)

    def pay_bonus(self, participant, payment, save):
        return self._count("bonus", participant)


@pytest.fixture
def counting(monkeypatch):
    CountingRecruiter.calls = {}
    monkeypatch.setitem(actions._RECRUITERS, "prolific", CountingRecruiter)
    return CountingRecruiter.calls


def small(app) -> Experiment:
    return db.session.execute(sa.select(Experiment).where(Experiment.slug == "small")).scalar_one()


def participant(public_id: str) -> Participant:
    return db.session.execute(sa.select(Participant).where(
        Participant.public_id == public_id)).scalar_one()


def test_a_bulk_approval_returns_at_once_and_the_runner_does_it_with_progress(app, client,
                                                                             counting):
    app.config.update(ACTION_INLINE_SECONDS=0, JOB_THREAD=False)  # all of it in the background
    pids = [completed(app, client, f"BULK000{i}") for i in range(4)]
    login(app, client)
    token = csrf_from(client.get("/admin/experiments/small").get_data(as_text=True))
    resp = client.post("/admin/experiments/small/actions/apply", data={
        "csrf_token": token, "action": "approve", "confirmed": "yes", "participant": pids})
    assert resp.status_code == 303 and re.fullmatch(r"/admin/jobs/\d+", resp.headers["Location"])
    page = client.get(resp.headers["Location"]).get_data(as_text=True)
    assert 'data-job-status="running"' in page and 'data-done="0" data-total="4"' in page
    assert "hx-trigger=\"every 1s\"" in page and counting == {}  # nothing done in the request
    listed = client.get("/admin/experiments/small/jobs").get_data(as_text=True)
    assert "<progress" in listed and "0 of 4" in listed and "every 2s" in listed
    with app.app_context():
        withdraw(participant(pids[3]))  # withdrawn while the job waits
        assert jobs.run_due("runner-1") == 1
        statuses = {p: s for p, s in db.session.execute(sa.select(
            Participant.public_id, Participant.status).where(
            Participant.public_id.in_(pids))).all()}
        job = db.session.execute(sa.select(ActionJob)).scalar_one()
        assert (job.status, job.n_done, job.n_ok, job.lease_owner) == ("done", 4, 3, None)
    assert statuses == {p: "approved" for p in pids[:3]}
    assert counting == {("approve", p): 1 for p in pids[:3]}
    done = client.get(resp.headers["Location"]).get_data(as_text=True)
    assert 'data-job-status="done"' in done and "hx-trigger" not in done
    assert done.count('data-result="ok"') == 3 and done.count('data-result="failed"') == 1
    assert "data were deleted (withdrawn)" in done
    assert "every 2s" not in client.get("/admin/experiments/small/jobs").get_data(as_text=True)


def test_a_few_participants_are_done_inside_the_request(app, client, counting):
    pids = [completed(app, client, f"FEW000{i}") for i in range(2)]
    login(app, client)
    token = csrf_from(client.get("/admin/experiments/small").get_data(as_text=True))
    resp = client.post("/admin/experiments/small/actions/apply", data={
        "csrf_token": token, "action": "approve", "confirmed": "yes", "participant": pids})
    assert resp.status_code == 200 and resp.get_data(as_text=True).count('data-result="ok"') == 2
    with app.app_context():
        assert db.session.execute(sa.select(ActionJob.status)).scalar_one() == "done"


def test_an_interrupted_job_resumes_and_never_approves_or_pays_twice(app, client, counting):
    pids = [completed(app, client, f"CUT000{i}") for i in range(3)]
    with app.app_context():
        exp = small(app)
        approve = jobs.enqueue(exp, "approve", {}, "admin:alice", pids)
        bonus = jobs.enqueue(exp, "bonus", {"amount": "0.50", "reason": "accuracy"},
                             "admin:alice", pids)
        # a runner that died: the first participant done and recorded, the second approved and
        # paid on the platform but the runner killed before it recorded the item
        for job in (approve, bonus):
            assert jobs.claim(job.id, "dead-runner")
            first = db.session.execute(sa.select(ActionJobItem).where(
                ActionJobItem.job_id == job.id).order_by(ActionJobItem.position)).scalars().all()
            run = actions.action_runner(job.action, job.inputs, job.actor)
            assert run(participant(pids[0])).ok and run(participant(pids[1])).ok
            first[0].state, first[0].ok, first[0].result = "done", True, {"participant": pids[0]}
            first[1].state = "in_flight"
            db.session.execute(sa.update(ActionJob).where(ActionJob.id == job.id).values(
                n_done=1, n_ok=1, lease_until=utcnow() - dt.timedelta(minutes=5)))
            db.session.commit()
        assert jobs.run_due("runner-2") == 2
        assert counting == {(what, p): 1 for what in ("approve", "bonus") for p in pids}
        audits = db.session.execute(sa.select(AuditEntry.action, AuditEntry.target)).all()
        assert sorted(a for a in audits if a[0] == "approve") == sorted(
            ("approve", p) for p in pids)
        assert db.session.execute(sa.select(sa.func.count()).select_from(Payment)
                                  ).scalar_one() == 3
        items = db.session.execute(sa.select(ActionJobItem).where(
            ActionJobItem.job_id == approve.id).order_by(ActionJobItem.position)).scalars().all()
        assert [i.state for i in items] == ["done"] * 3
        assert "before the job was interrupted" in items[1].result["message"]
        assert set(items[2].result) == set(jobs.SHOWN)  # no platform reply (it names the ids)
        paid = db.session.execute(sa.select(ActionJobItem).where(
            ActionJobItem.job_id == bonus.id, ActionJobItem.position == 1)).scalar_one()
        assert "nothing paid again" in paid.result["message"]
        assert jobs.run_due("runner-3") == 0  # finished jobs are left alone


def test_a_withdrawal_during_the_qc_pass_keeps_the_others_qc(app, client, monkeypatch):
    pids = [run_participant(client, f"PROLIFIC_PID=QCW{i}&STUDY_ID=s&SESSION_ID=x{i}")
            for i in range(3)]
    compute = qc._compute

    def withdrawn_meanwhile(exp, ids, people, stimuli):
        rows = compute(exp, ids, people, stimuli)
        with app.app_context():  # another request, its own session: the participant withdraws
            withdraw(participant(pids[1]))
        return rows

    monkeypatch.setattr(qc, "_compute", withdrawn_meanwhile)
    with app.app_context():
        assert qc.refresh_qc(small(app)) == 3
        stored = db.session.execute(sa.select(Participant.public_id).join(
            ParticipantQC, ParticipantQC.participant_id == Participant.id)).scalars().all()
    assert sorted(stored) == sorted([pids[0], pids[2]])


def test_a_database_error_is_told_without_its_sql():
    from sqlalchemy.exc import IntegrityError

    class ForeignKeyViolation(Exception):
        pass

    exc = IntegrityError("INSERT INTO participant_qc (participant_id) VALUES (%(p)s)", {"p": 7},
                         ForeignKeyViolation('insert or update on table "participant_qc" violates '
                                             'foreign key constraint\nDETAIL: Key (id)=(7)'))
    text = panel.failure(exc)
    assert text.startswith("IntegrityError (ForeignKeyViolation): insert or update on table")
    assert "INSERT" not in text and "DETAIL" not in text and "[SQL" not in text
