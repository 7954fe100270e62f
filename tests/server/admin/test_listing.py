# ruff: noqa: F811  (the fixtures of test_recruit_prolific are imported by name and used as arguments)
"""The Prolific listing on the experiment page: study id and link, status, places, reward, minutes,
money so far; "Sync now" (the CLI's sync) and publish / pause / resume / stop / add places, each
confirmed first and audited, fewer places refused before anything is sent."""

from __future__ import annotations

import re
import time

import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.participants import actions
from humanlike.server.tables.core import AuditEntry
from tests.server.admin.dashboard_helpers import csrf_from, login
from tests.server.test_recruit_prolific import (  # noqa: F401  (fixtures)
    fake,
    rapp,
    recruit,
    recruit_spec,
    row,
    take_part,
)


def listed(rapp, fake, database_url, recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    pid, sid = take_part(rapp, fake, study["id"], "PPL0001")
    admin = rapp.test_client()
    login(rapp, admin)
    return study, pid, sid, admin


def audits(action):
    return list(db.session.execute(sa.select(AuditEntry).where(AuditEntry.action == action)
                                   ).scalars())


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_listing_panel_and_sync_now(rapp, fake, database_url, recruit_spec):
    study, pid, _, admin = listed(rapp, fake, database_url, recruit_spec)
    with rapp.app_context():
        assert actions.pay_bonus(row(pid), "admin:alice", "0.75", "accuracy").ok
    html = admin.get("/admin/experiments/small").get_data(as_text=True)
    assert f'href="https://app.prolific.com/researcher/workspaces/studies/{study["id"]}"' in html
    page = text(html)
    assert "last sync never" in page and "reward 1.50" in page and "listed 10" in page
    # the fake reports fees of a third of the bonus (25 of 75 cents) when it is set up
    assert "bonuses 0.75 · bonus fees 0.25" in page
    token = csrf_from(html)
    assert admin.post("/admin/experiments/small/listing/sync").status_code == 400  # no CSRF
    resp = admin.post("/admin/experiments/small/listing/sync", data={"csrf_token": token})
    assert resp.status_code == 302
    with rapp.app_context():
        assert row(pid).status == "submitted"  # AWAITING REVIEW on Prolific
        [entry] = audits("listing_sync")
        assert entry.detail["changed"] == 1
    html = admin.get("/admin/experiments/small").get_data(as_text=True)
    page = text(html)
    assert "places 1 / 20" in page and "status ACTIVE" in page and "last sync never" not in page
    # the outcome is said inside the panel the redirect scrolls to (#listing), not above the page
    panel = text(re.search(r'<section id="listing".*?</section>', html, re.S).group(0))
    assert "Synced with Prolific: 1 submission(s), 1 changed" in panel
    assert page.count("Synced with Prolific") == 1


def test_listing_actions_are_confirmed_audited_and_fewer_places_refused_here(
        rapp, fake, database_url, recruit_spec):
    study, _, _, admin = listed(rapp, fake, database_url, recruit_spec)
    token = csrf_from(admin.get("/admin/experiments/small").get_data(as_text=True))
    confirm = admin.post("/admin/experiments/small/listing/confirm",
                         data={"csrf_token": token, "action": "pause"})
    assert confirm.status_code == 200 and "Pause the study?" in confirm.get_data(as_text=True)
    assert study["status"] == "ACTIVE"  # nothing done before confirming
    done = admin.post("/admin/experiments/small/listing/apply",
                      data={"csrf_token": token, "action": "pause", "confirmed": "yes"})
    assert done.status_code == 302 and study["status"] == "PAUSED"
    sent = len(fake.log)
    for step in ("confirm", "apply"):
        fewer = admin.post(f"/admin/experiments/small/listing/{step}",
                           data={"csrf_token": token, "action": "places", "total": "15",
                                 "confirmed": "yes"})
        assert fewer.status_code == 400
        assert "only allows increasing them" in fewer.get_data(as_text=True)
    assert len(fake.log) == sent and study["total_available_places"] == 20
    more = admin.post("/admin/experiments/small/listing/apply",
                      data={"csrf_token": token, "action": "places", "total": "30",
                            "confirmed": "yes"})
    assert more.status_code == 302 and study["total_available_places"] == 30
    with rapp.app_context():
        assert [(a.action, a.detail["ok"]) for a in audits("listing_pause")] == [("listing_pause",
                                                                                   True)]
        [places] = audits("listing_places")
        assert places.detail["total"] == 30 and places.actor == "admin:alice"


def test_failed_webhook_deliveries_and_a_high_return_rate_show_after_sync(
        rapp, fake, database_url, recruit_spec):
    study, _, _, admin = listed(rapp, fake, database_url, recruit_spec)
    assert recruit(database_url, recruit_spec, "hooks", "--workspace", "ws1").exit_code == 0
    [sub] = [s for s in fake.subscriptions.values()
             if s["event_type"] == "submission.status.change"]
    fake.deliveries.append({"id": "d1", "subscription_id": sub["id"], "status": "FAILED",
                            "event_type": "submission.status.change"})
    page = text(admin.get("/admin/experiments/small").get_data(as_text=True))
    assert "webhook deliveries failed" not in page and "no webhooks" not in page
    token = csrf_from(admin.get("/admin/experiments/small").get_data(as_text=True))
    assert admin.post("/admin/experiments/small/listing/sync",
                      data={"csrf_token": token}).status_code == 302
    sent = int(time.time()) - 30  # the signed request time is shown, not the unsigned X-Timestamp
    body, headers = fake.event("study.has_high_return_rate", study["id"], None,
                               "2026-11-25T12:00:00Z", stamp=sent)
    assert rapp.test_client().post("/hooks/prolific", data=body, headers=headers).status_code == 200
    page = text(admin.get("/admin/experiments/small").get_data(as_text=True))
    assert "1 webhook deliveries failed" in page
    shown = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(sent))
    assert f"Prolific reports a high return rate ({shown})" in page
