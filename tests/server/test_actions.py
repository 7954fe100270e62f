"""Researcher actions: state checked first, one audit row each, local-only said out loud, and a
bonus paid at most once for a participant and reason (double clicks, retries, two processes)."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.participants import actions
from humanlike.server.tables.core import AuditEntry, Participant, Payment
from tests.server.conftest import enter

GOOD_MESSAGE = ("Your submission could not be approved because the attention checks embedded in "
                "the task were answered incorrectly on most occasions.")


class CountingRecruiter:
    """A platform stand-in for our own Recruiter protocol (the real clients are tested against
    fakes of the platforms' APIs): counts money moved, fails the pay step when told to."""

    def __init__(self):
        self.paid: list[str] = []
        self.created: list[str] = []
        self.fail_pay = 0
        self.lock = threading.Lock()

    def approve(self, participant):
        return {"status": "APPROVED"}

    def reject(self, participant, message, category):
        return {"status": "REJECTED", "category": category}

    def pay_bonus(self, participant, payment, save):
        with self.lock:
            if payment.platform_ref is None:  # step 1: create (Prolific's two steps)
                payment.platform_ref = f"bonus-{len(self.created) + 1}"
                self.created.append(payment.platform_ref)
                save()
            if self.fail_pay:
                self.fail_pay -= 1
                raise actions.PlatformError("pay step failed", {"status": 502})
            self.paid.append(payment.platform_ref)
        return {"paid": payment.platform_ref}


@pytest.fixture
def recruiter():
    fake = CountingRecruiter()
    actions.register_recruiter("prolific", lambda experiment: fake)
    yield fake
    actions._RECRUITERS.pop("prolific", None)


def completed_participant(app, client, query="PROLIFIC_PID=abc123&STUDY_ID=s1&SESSION_ID=x1"):
    pid, _ = enter(client, query)
    with app.app_context():
        row = db.session.execute(sa.select(Participant).where(Participant.public_id == pid)
                                 ).scalar_one()
        row.status = "completed"
        db.session.commit()
    return pid


def load(pid: str) -> Participant:
    return db.session.execute(sa.select(Participant).where(Participant.public_id == pid)).scalar_one()


def audit_rows(action: str) -> list[AuditEntry]:
    return list(db.session.execute(sa.select(AuditEntry).where(AuditEntry.action == action)
                                   ).scalars())


def test_approve_without_a_platform_client_changes_local_status_and_says_so(app, client):
    pid = completed_participant(app, client)
    with app.app_context():
        result = actions.approve(load(pid), "admin:alice")
        assert result.ok and result.local_only and "local status only" in result.message
        assert load(pid).status == "approved"
        [row] = audit_rows("approve")
        assert (row.actor, row.target, row.detail["local_only"]) == ("admin:alice", pid, True)


def test_approving_a_participant_who_has_not_finished_is_refused_and_changes_nothing(app, client):
    pid, _ = enter(client)
    with app.app_context():
        with pytest.raises(actions.ActionError, match="allocated") as err:
            actions.approve(load(pid), "admin:alice")
        assert err.value.status == 409
        assert load(pid).status == "allocated" and audit_rows("approve") == []


def test_a_short_rejection_message_is_refused_before_any_request(app, client, recruiter):
    pid = completed_participant(app, client)
    with app.app_context():
        with pytest.raises(actions.ActionError, match="100 characters") as err:
            actions.reject(load(pid), "admin:alice", "Too fast.", "TOO_QUICKLY")
        assert err.value.field == "message"
        with pytest.raises(actions.ActionError, match="category"):
            actions.reject(load(pid), "admin:alice", GOOD_MESSAGE, "BAD")
        assert load(pid).status == "completed" and audit_rows("reject") == []
        result = actions.reject(load(pid), "admin:alice", GOOD_MESSAGE, "FAILED_CHECK")
        assert result.ok and not result.local_only and load(pid).status == "rejected"


def test_a_bonus_asked_twice_is_paid_once(app, client, recruiter):
    pid = completed_participant(app, client)
    with app.app_context():
        first = actions.pay_bonus(load(pid), "admin:alice", "0.50", "accuracy")
        second = actions.pay_bonus(load(pid), "admin:alice", 0.5, "accuracy")
        assert first.ok and first.message == "paid"
        assert second.ok and second.detail["duplicate"]
        assert recruiter.paid == ["bonus-1"] and float(load(pid).bonus) == 0.5
        assert len(audit_rows("bonus")) == 2


def test_a_bonus_whose_pay_step_fails_is_paid_exactly_once_on_retry(app, client, recruiter):
    pid = completed_participant(app, client)
    recruiter.fail_pay = 1
    with app.app_context():
        failed = actions.pay_bonus(load(pid), "admin:alice", "1.00", "accuracy")
        assert not failed.ok and load(pid).bonus is None
        payment = db.session.execute(sa.select(Payment)).scalar_one()
        assert (payment.status, payment.platform_ref) == ("created", "bonus-1")
        retried = actions.pay_bonus(load(pid), "admin:alice", "1.00", "accuracy")
        assert retried.ok
    # created once (the retry paid the bonus already created), paid once
    assert recruiter.created == ["bonus-1"] and recruiter.paid == ["bonus-1"]


def test_concurrent_double_clicks_pay_one_bonus(app, client, recruiter):
    pid = completed_participant(app, client)
    results: list[actions.ActionResult] = []
    barrier = threading.Barrier(4)

    def click():
        with app.app_context():
            barrier.wait()
            results.append(actions.pay_bonus(load(pid), "admin:alice", "0.25", "speed"))
            db.session.remove()

    threads = [threading.Thread(target=click) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 4 and recruiter.paid == ["bonus-1"]
    with app.app_context():
        assert db.session.execute(sa.select(sa.func.count()).select_from(Payment)).scalar_one() == 1
        assert float(load(pid).bonus) == 0.25


def test_twenty_concurrent_bonuses_leave_the_total_equal_to_the_paid_rows(app, client, recruiter):
    """Ten concurrent bonuses once left participant.bonus at 4.00-7.00 of 10.00 paid (a Python
    read-modify-write); the total must be the sum of the paid payment rows."""
    pid = completed_participant(app, client)
    barrier = threading.Barrier(20)
    errors: list[BaseException] = []

    def pay(i):
        with app.app_context():
            try:
                barrier.wait()
                assert actions.pay_bonus(load(pid), "admin:alice", "1.00", f"round {i}").ok
            except BaseException as exc:  # reported below: a thread's assert is not the test's
                errors.append(exc)
            finally:
                db.session.remove()

    threads = [threading.Thread(target=pay, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and len(recruiter.paid) == 20
    with app.app_context():
        paid = db.session.execute(sa.select(sa.func.sum(Payment.amount)).where(
            Payment.status == "paid")).scalar_one()
        assert float(paid) == 20.0 and float(load(pid).bonus) == 20.0


def test_a_different_amount_for_the_same_reason_is_refused(app, client):
    pid = completed_participant(app, client)
    with app.app_context():
        assert actions.pay_bonus(load(pid), "admin:alice", "0.50", "accuracy").local_only
        with pytest.raises(actions.ActionError, match="already exists"):
            actions.pay_bonus(load(pid), "admin:alice", "0.75", "accuracy")
        for bad in ("-1", "abc", "0", "nan", "1e9"):
            with pytest.raises(actions.ActionError) as err:
                actions.pay_bonus(load(pid), "admin:alice", bad, "other")
            assert err.value.field == "amount"


def test_bulk_approve_reports_refusals_and_audits_each_approval(app, client):
    done = [completed_participant(app, client, f"PROLIFIC_PID=p{i}&STUDY_ID=s&SESSION_ID=x{i}")
            for i in range(3)]
    unfinished, _ = enter(client, "PROLIFIC_PID=late&STUDY_ID=s&SESSION_ID=y")
    with app.app_context():
        rows = [load(pid) for pid in [*done, unfinished]]
        results = actions.bulk(rows, lambda p: actions.approve(p, "admin:bob"))
        assert [r.ok for r in results] == [True, True, True, False]
        assert len(audit_rows("approve")) == 3


def test_an_analysis_override_needs_a_reason_and_is_audited(app, client):
    pid = completed_participant(app, client)
    with app.app_context():
        with pytest.raises(actions.ActionError, match="reason"):
            actions.set_analysis_override(load(pid), "admin:alice", "exclude", " ")
        actions.set_analysis_override(load(pid), "admin:alice", "exclude", "eyes closed")
        row = load(pid)
        assert (row.analysis_override, row.analysis_override_reason) == ("exclude", "eyes closed")
        assert audit_rows("exclude")[0].detail["reason"] == "eyes closed"
