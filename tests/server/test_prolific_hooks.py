"""Prolific's webhooks (https://docs.prolific.com/api-reference/webhooks): ``recruit prolific hooks``
creates the workspace secret and confirms one subscription per event type against the fake; the
receiver checks the signature (401 and nothing changed when it is wrong), keeps each event once by
its X-Event-ID, ignores one older (X-Timestamp) than the last applied for the same submission, and
moves a participant only along the lifecycle."""

# ruff: noqa: F811  (the fixtures of test_recruit_prolific are imported by name and used as arguments)
from __future__ import annotations

import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.models import AuditEntry, Experiment
from humanlike.server.platform_events import PlatformEvent
from tests.server.test_recruit_prolific import (  # noqa: F401  (fixtures)
    fake,
    rapp,
    recruit,
    recruit_spec,
    row,
    take_part,
)


def published(rapp, fake, database_url, recruit_spec, who="PPH0001"):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    out = recruit(database_url, recruit_spec, "hooks", "--workspace", "ws1")
    assert out.exit_code == 0, out.output
    [study] = fake.studies.values()
    pid, sid = take_part(rapp, fake, study["id"], who)
    return study, pid, sid


def deliver(rapp, body, headers):
    return rapp.test_client().post("/hooks/prolific", data=body, headers=headers)


def hook_audits():
    return [a for a in db.session.execute(sa.select(AuditEntry).order_by(AuditEntry.id)).scalars()
            if a.action.startswith("hook_")]


def test_hooks_creates_the_secret_and_confirms_a_subscription_per_event_type(
        rapp, fake, database_url, recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    out = recruit(database_url, recruit_spec, "hooks", "--workspace", "ws1")
    assert out.exit_code == 0, out.output
    subs = sorted(fake.subscriptions.values(), key=lambda s: s["event_type"])
    assert [(s["event_type"], s["target_url"], s["is_enabled"]) for s in subs] == [
        (kind, "https://study.example.org/hooks/prolific", True)
        for kind in ("study.has_high_return_rate", "study.status.change",
                     "submission.status.change")]
    assert fake.secrets["ws1"] not in out.output  # the secret is never printed
    again = recruit(database_url, recruit_spec, "hooks", "--workspace", "ws1")
    assert again.exit_code == 0 and len(fake.subscriptions) == 3  # existing ones are kept


def test_a_signed_event_delivered_twice_and_out_of_order_moves_a_participant_once(
        rapp, fake, database_url, recruit_spec):
    _, pid, sid = published(rapp, fake, database_url, recruit_spec)
    submitted = fake.event("submission.status.change", sid, "AWAITING REVIEW",
                           "2026-11-25T10:00:00Z", event_id="ev-submitted")
    approved = fake.event("submission.status.change", sid, "APPROVED",
                          "2026-11-25T10:05:00Z", event_id="ev-approved")
    answers = [deliver(rapp, *approved).status_code, deliver(rapp, *approved).status_code,
               deliver(rapp, *submitted).status_code, deliver(rapp, *submitted).status_code]
    assert answers == [200, 200, 200, 200]  # Prolific retries anything else
    with rapp.app_context():
        assert row(pid).status == "approved"
        [moved] = hook_audits()
        assert (moved.action, moved.target, moved.detail["to"]) == ("hook_approve", pid, "approved")
        events = {e.event_id: e.outcome for e in db.session.execute(
            sa.select(PlatformEvent)).scalars()}
        assert events == {"ev-approved": "applied", "ev-submitted": "stale"}


def test_in_order_events_each_move_once(rapp, fake, database_url, recruit_spec):
    _, pid, sid = published(rapp, fake, database_url, recruit_spec, "PPH0002")
    for when, status in (("2026-11-25T10:00:00Z", "AWAITING REVIEW"),
                         ("2026-11-25T10:05:00Z", "APPROVED")):
        body, headers = fake.event("submission.status.change", sid, status, when)
        assert deliver(rapp, body, headers).status_code == 200
    with rapp.app_context():
        assert row(pid).status == "approved"
        assert [a.action for a in hook_audits()] == ["hook_submit", "hook_approve"]


def test_a_bad_signature_is_refused_and_changes_nothing(rapp, fake, database_url, recruit_spec):
    _, pid, sid = published(rapp, fake, database_url, recruit_spec, "PPH0003")
    body, headers = fake.event("submission.status.change", sid, "RETURNED", "2026-11-25T10:00:00Z")
    forged = dict(headers, **{"X-Prolific-Request-Signature": "bm90IGEgc2lnbmF0dXJl"})
    tampered = body.replace(b"RETURNED", b"APPROVED")
    missing = {k: v for k, v in headers.items() if k != "X-Prolific-Request-Signature"}
    for b, h in ((body, forged), (tampered, headers), (body, missing)):
        resp = deliver(rapp, b, h)
        assert resp.status_code == 401 and resp.get_json()["error"] == "bad_signature"
    with rapp.app_context():
        assert row(pid).status == "completed" and hook_audits() == []
        assert db.session.execute(sa.select(sa.func.count()).select_from(PlatformEvent)
                                  ).scalar_one() == 0


def test_study_events_show_on_the_listing(rapp, fake, database_url, recruit_spec):
    study, _, _ = published(rapp, fake, database_url, recruit_spec, "PPH0004")
    for kind, status in (("study.status.change", "PAUSED"), ("study.has_high_return_rate", None)):
        body, headers = fake.event(kind, study["id"], status, "2026-11-25T11:00:00Z")
        assert deliver(rapp, body, headers).status_code == 200
    with rapp.app_context():
        meta = db.session.execute(sa.select(Experiment)).scalar_one().recruitment_meta
        assert meta["platform_status"] == "PAUSED"
        assert meta["high_return_rate_at"] == "2026-11-25T11:00:00Z"


def test_the_handshake_echoes_the_hook_secret_and_changes_nothing(rapp, fake):
    resp = rapp.test_client().post("/hooks/prolific", headers={"X-Hook-Secret": "abc123"})
    assert resp.status_code == 200 and resp.headers["X-Hook-Secret"] == "abc123"
