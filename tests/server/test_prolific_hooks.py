"""Prolific's webhooks (https://docs.prolific.com/api-reference/webhooks): ``recruit prolific hooks``
creates the workspace secret and confirms one subscription per event type against the fake; the
receiver checks the signature (401 and nothing changed when it is wrong), keeps each event once by
its X-Event-ID, ignores one older (X-Timestamp) than the last applied for the same submission, and
moves a participant only along the lifecycle."""

# ruff: noqa: F811  (the fixtures of test_recruit_prolific are imported by name and used as arguments)
from __future__ import annotations

import base64
import hashlib
import hmac
import time

import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.tables.core import AuditEntry, Experiment
from humanlike.server.tables.platform_events import PlatformEvent
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
    assert all(fake.delivering(s["event_type"], s["target_url"]) == [s["id"]] for s in subs)


TARGET = "https://study.example.org/hooks/prolific"


def test_a_subscription_whose_reply_was_lost_is_replaced_not_reported_as_done(
        rapp, fake, database_url, recruit_spec):
    """The reply to creating a subscription is lost: Prolific holds it (listed as enabled, as
    every subscription is) but it was never confirmed, so nothing is delivered. The run says so;
    the next run does not take it for a working one: it deletes it, subscribes and confirms
    anew, and reports only what Prolific shows afterwards."""
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    fake.lose_hook_reply = 1
    out = recruit(database_url, recruit_spec, "hooks", "--workspace", "ws1")
    assert out.exit_code == 1 and "may or may not" in out.output, out.output
    [orphan] = fake.subscriptions  # created at Prolific, unconfirmed
    assert fake.delivering("submission.status.change", TARGET) == []
    again = recruit(database_url, recruit_spec, "hooks", "--workspace", "ws1")
    assert again.exit_code == 0, again.output
    assert orphan not in fake.subscriptions
    for kind in ("submission.status.change", "study.status.change",
                 "study.has_high_return_rate"):
        [sid] = fake.delivering(kind, TARGET)
        assert f"{kind} -> {TARGET} (subscription {sid})" in again.output
    assert len(fake.subscriptions) == 3 and set(fake.subscriptions) == fake.confirmed
    assert ("GET", f"/api/v1/hooks/subscriptions/{sid}/", None) in fake.log  # read back


def test_a_subscription_prolific_does_not_show_enabled_after_confirming_is_an_error(
        rapp, fake, database_url, recruit_spec, monkeypatch):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    confirm = fake.hooks

    def disabled_after_confirming(request, method, path, body):
        data, status = confirm(request, method, path, body)
        if method == "POST" and (body or {}).get("secret"):
            data["is_enabled"] = False  # Prolific turned it off
        return data, status

    monkeypatch.setattr(fake, "hooks", disabled_after_confirming)
    out = recruit(database_url, recruit_spec, "hooks", "--workspace", "ws1")
    assert out.exit_code == 1 and "does not show these subscriptions enabled" in out.output
    assert " -> https://" not in out.output  # nothing reported as subscribed


def test_a_signed_event_delivered_twice_and_out_of_order_moves_a_participant_once(
        rapp, fake, database_url, recruit_spec):
    _, pid, sid = published(rapp, fake, database_url, recruit_spec)
    fake.set_status(sid, "APPROVED")  # Prolific's state when the later event is sent
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
        fake.set_status(sid, status)
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
    study["status"] = "PAUSED"  # what Prolific's study holds, read back
    sent = int(time.time()) - 30
    for kind, status in (("study.status.change", "PAUSED"), ("study.has_high_return_rate", None)):
        body, headers = fake.event(kind, study["id"], status, "2020-01-01T00:00:00Z", stamp=sent)
        assert deliver(rapp, body, headers).status_code == 200
    with rapp.app_context():
        meta = db.session.execute(sa.select(Experiment)).scalar_one().recruitment_meta
        assert meta["platform_status"] == "PAUSED"
        # the signed request time, not the unsigned X-Timestamp
        assert meta["high_return_rate_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                            time.gmtime(sent))


def test_the_handshake_echoes_the_hook_secret_and_changes_nothing(rapp, fake):
    resp = rapp.test_client().post("/hooks/prolific", headers={"X-Hook-Secret": "abc123"})
    assert resp.status_code == 200 and resp.headers["X-Hook-Secret"] == "abc123"


# --------------------------------------------------------------------------- issue 45, 11

def events_stored(rapp) -> list[tuple[str, str]]:
    with rapp.app_context():
        return [(e.event_id, e.outcome) for e in db.session.execute(
            sa.select(PlatformEvent).order_by(PlatformEvent.id)).scalars()]


def test_a_deeply_nested_or_oversized_body_is_answered_4xx_never_500(rapp, fake, database_url,
                                                                      recruit_spec):
    published(rapp, fake, database_url, recruit_spec, "PPH0005")
    stamp = str(int(time.time()))
    nested = b"[" * 30_000
    unsigned = {"X-Prolific-Request-Signature": "bm90IGEgc2lnbmF0dXJl",
                "X-Prolific-Request-Timestamp": stamp, "Content-Type": "application/json"}
    resp = deliver(rapp, nested, unsigned)
    assert resp.status_code == 401 and resp.get_json()["error"] == "bad_signature"
    secret = fake.secrets["ws1"].encode()
    signed = dict(unsigned, **{"X-Prolific-Request-Signature": base64.b64encode(hmac.new(
        secret, stamp.encode() + nested, hashlib.sha256).digest()).decode()})
    resp = deliver(rapp, nested, signed)  # even signed, it is no event
    assert resp.status_code == 400 and resp.get_json()["error"] == "bad_body"
    huge = deliver(rapp, b"{" + b" " * 70_000 + b"}", unsigned)
    assert huge.status_code == 413
    assert events_stored(rapp) == []


def test_a_signature_over_an_old_or_future_timestamp_is_refused(rapp, fake, database_url,
                                                                recruit_spec):
    _, pid, sid = published(rapp, fake, database_url, recruit_spec, "PPH0006")
    fake.set_status(sid, "RETURNED")
    now = int(time.time())
    for stamp in (1_590_000_000, now - 301, now + 301):  # 2020, and just outside five minutes
        body, headers = fake.event("submission.status.change", sid, "RETURNED",
                                   "2026-11-25T10:00:00Z", stamp=stamp)
        resp = deliver(rapp, body, headers)
        assert resp.status_code == 401 and resp.get_json()["error"] == "stale_signature"
    body, headers = fake.event("submission.status.change", sid, "RETURNED",
                               "2026-11-25T10:00:00Z", stamp=now - 60)
    assert deliver(rapp, body, headers).status_code == 200  # inside the window
    with rapp.app_context():
        assert row(pid).status == "returned"
    assert [outcome for _, outcome in events_stored(rapp)] == ["applied"]


def test_a_captured_delivery_replayed_with_a_new_event_id_is_not_stored_again(
        rapp, fake, database_url, recruit_spec):
    _, pid, sid = published(rapp, fake, database_url, recruit_spec, "PPH0007")
    body, headers = fake.event("submission.status.change", sid, "AWAITING REVIEW",
                               "2026-11-25T10:00:00Z", event_id="ev-genuine")
    assert deliver(rapp, body, headers).get_json()["outcome"] == "applied"
    for n in range(3):
        replay = dict(headers, **{"X-Event-ID": f"ev-replay-{n}"})
        resp = deliver(rapp, body, replay)
        assert resp.status_code == 200 and resp.get_json()["duplicate"] is True
    assert events_stored(rapp) == [("ev-genuine", "applied")]
    with rapp.app_context():
        assert row(pid).status == "submitted" and len(hook_audits()) == 1


def test_a_forged_x_timestamp_does_not_make_later_genuine_events_stale(
        rapp, fake, database_url, recruit_spec):
    """X-Timestamp is not signed: an event claiming to have happened in 2030 must not hide the
    genuine events after it. The status applied is Prolific's own, read back."""
    _, pid, sid = published(rapp, fake, database_url, recruit_spec, "PPH0008")
    body, headers = fake.event("submission.status.change", sid, "AWAITING REVIEW",
                               "2030-01-01T00:00:00Z")
    assert deliver(rapp, body, headers).status_code == 200
    fake.set_status(sid, "APPROVED")
    body, headers = fake.event("submission.status.change", sid, "APPROVED",
                               "2026-11-25T10:05:00Z", event_id="ev-later")
    assert deliver(rapp, body, headers).get_json()["outcome"] == "applied"
    with rapp.app_context():
        assert row(pid).status == "approved"
        assert [a.action for a in hook_audits()] == ["hook_submit", "hook_approve"]


def test_an_event_whose_status_prolific_no_longer_holds_applies_prolifics_own(
        rapp, fake, database_url, recruit_spec):
    """A RETURNED event delivered after Prolific's submission was approved (an older event, or a
    forged order) moves the participant to what Prolific holds now, never backwards."""
    _, pid, sid = published(rapp, fake, database_url, recruit_spec, "PPH0009")
    fake.set_status(sid, "APPROVED")
    body, headers = fake.event("submission.status.change", sid, "AWAITING REVIEW",
                               "2026-11-25T10:00:00Z", event_id="ev-old")
    assert deliver(rapp, body, headers).status_code == 200
    with rapp.app_context():
        assert row(pid).status == "approved"
        [event] = db.session.execute(sa.select(PlatformEvent)).scalars()
        assert (event.status, event.detail["platform_status"]) == ("AWAITING REVIEW", "APPROVED")


def test_prolific_unreachable_for_the_read_back_answers_503_and_keeps_nothing(
        rapp, fake, database_url, recruit_spec):
    _, pid, sid = published(rapp, fake, database_url, recruit_spec, "PPH0010")
    fake.fail_next = [503, 503, 503]
    body, headers = fake.event("submission.status.change", sid, "AWAITING REVIEW",
                               "2026-11-25T10:00:00Z", event_id="ev-retry")
    resp = deliver(rapp, body, headers)
    assert resp.status_code == 503 and resp.get_json()["error"] == "platform_unavailable"
    assert events_stored(rapp) == []  # Prolific retries it (the same X-Event-ID), and then
    fake.fail_next = []
    body, headers = fake.event("submission.status.change", sid, "AWAITING REVIEW",
                               "2026-11-25T10:00:00Z", event_id="ev-retry")
    assert deliver(rapp, body, headers).get_json()["outcome"] == "applied"
    with rapp.app_context():
        assert row(pid).status == "submitted"


def test_without_a_token_events_are_ordered_by_their_signed_timestamp(
        rapp, fake, database_url, recruit_spec, monkeypatch):
    """No PROLIFIC_TOKEN here: nothing to read back, so the signed request time orders the
    events of a submission (the unsigned X-Timestamp is kept, never trusted)."""
    _, pid, sid = published(rapp, fake, database_url, recruit_spec, "PPH0011")
    monkeypatch.delenv("PROLIFIC_TOKEN")
    now = int(time.time())
    approved = fake.event("submission.status.change", sid, "APPROVED", "2020-01-01T00:00:00Z",
                          event_id="ev-a", stamp=now - 10)
    submitted = fake.event("submission.status.change", sid, "AWAITING REVIEW",
                           "2030-01-01T00:00:00Z", event_id="ev-s", stamp=now - 20)
    assert deliver(rapp, *approved).status_code == 200
    assert deliver(rapp, *submitted).status_code == 200
    with rapp.app_context():
        assert row(pid).status == "approved"
    assert events_stored(rapp) == [("ev-a", "applied"), ("ev-s", "stale")]
