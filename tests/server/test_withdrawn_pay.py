# ruff: noqa: F811  (the fixtures of test_recruit_prolific are imported by name and used as arguments)
"""A participant who finishes and then withdraws is still paid: the withdrawal page tells them to
keep their Prolific submission, the withdrawal ledger keeps the submission owed (keyed hashes
only), and "Sync now" (the same code as ``recruit prolific sync``) approves it on the fake
Prolific, once, audited; a mid-study withdrawer's submission is not approved; a submission nobody
here knows is listed on the dashboard instead of being hidden behind "0 changed"."""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit

import numpy as np
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.rights.withdrawal import platform_advice
from humanlike.server.tables.core import AuditEntry
from humanlike.server.tables.sona import SonaGrant
from humanlike.server.tables.withdrawal import Withdrawal
from tests.server.admin.dashboard_helpers import csrf_from, login
from tests.server.conftest import enter
from tests.server.fake_sona import RunningSona
from tests.server.sources import answer, app_factory, spec_with
from tests.server.test_export import run_participant
from tests.server.test_recruit_prolific import (  # noqa: F401  (fixtures)
    fake,
    rapp,
    recruit,
    recruit_spec,
)
from tests.server.test_retention import every_text, holds
from tests.server.test_sona import sona_table


def text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def finish(rapp, fake, study_id: str, prolific_pid: str):
    """A participant joins on (fake) Prolific, does every trial and submits the code there;
    (public id, submission id, their browser)."""
    sid, url = fake.join(study_id, prolific_pid)
    client = rapp.test_client()
    pid, token = enter(client, urlsplit(url).query)
    run_participant(client, pid, token, np.random.default_rng(0))
    done = client.post(f"/api/v1/participants/{pid}/complete",
                       headers={"Authorization": f"Bearer {token}"}).get_json()
    fake.complete(sid, urlsplit(done["next"]["url"]).query.removeprefix("cc="))
    return pid, sid, client


def withdraw(client, pid: str) -> str:
    """Withdraw from this browser (its session holds the token); the confirmation page's text."""
    page = client.get(f"/withdraw/{pid}").get_data(as_text=True)
    done = client.post(f"/withdraw/{pid}", data={"csrf_token": csrf_from(page), "confirm": "yes"})
    assert done.status_code == 200 and "Your data have been deleted" in done.get_data(as_text=True)
    return text(page) + " " + text(done.get_data(as_text=True))


def approvals(fake) -> list[str]:
    return [path for method, path, body in fake.log
            if method == "POST" and path.endswith("/transition/") and "/submissions/" in path
            and (body or {}).get("action") == "APPROVE"]


def sync_now(admin) -> str:
    token = csrf_from(admin.get("/admin/experiments/small").get_data(as_text=True))
    assert admin.post("/admin/experiments/small/listing/sync",
                      data={"csrf_token": token}).status_code == 302
    return admin.get("/admin/experiments/small").get_data(as_text=True)


def test_a_finished_participant_who_withdraws_is_approved_by_sync_now(rapp, fake, database_url,
                                                                        recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    # a participant finishes, submits on Prolific, then withdraws from the completion page
    finished, finished_sid, client = finish(rapp, fake, study["id"], "PAYME0001")
    assert fake.submissions[finished_sid]["status"] == "AWAITING REVIEW"
    words = withdraw(client, finished)
    assert "can also return it" not in words and "do not return it" in words and "paid" in words
    # another withdraws mid-study (their submission stays active: not owed)
    quitter_sid, url = fake.join(study["id"], "QUIT00002")
    quitter_client = rapp.test_client()
    quitter, _ = enter(quitter_client, url.split("?", 1)[1])
    withdraw(quitter_client, quitter)
    # and someone took a place on Prolific whom this server never saw
    stranger_sid, _ = fake.join(study["id"], "STRANGER03")
    fake.complete(stranger_sid, "CODE1234")
    with rapp.app_context():
        rows = db.session.execute(sa.select(Withdrawal).order_by(Withdrawal.id)).scalars().all()
        assert [(r.status, r.owed, r.settlement) for r in rows] == [
            ("completed", True, None), ("allocated", False, None)]
    held = every_text(rapp)
    assert not holds(held, "PAYME0001") and not holds(held, finished_sid)  # keyed hashes only

    admin = rapp.test_client()
    login(rapp, admin)
    page = sync_now(admin)
    assert fake.submissions[finished_sid]["status"] == "APPROVED"
    assert fake.submissions[stranger_sid]["status"] == "AWAITING REVIEW"  # not ours to approve
    assert fake.submissions[quitter_sid]["status"] == "ACTIVE"
    assert approvals(fake) == [f"/api/v1/submissions/{finished_sid}/transition/"]
    panel = text(re.search(r'<section id="listing".*?</section>', page, re.S).group(0))
    assert "1 withdrawn participant's submission approved" in panel
    assert "1 unknown" in panel
    assert "Submissions nobody here knows" in panel  # listed, with what the researcher needs
    assert "STRANGER03" in panel and stranger_sid in panel and "AWAITING REVIEW" in panel
    assert "PAYME0001" not in panel and finished_sid not in panel  # withdrawn: never shown
    assert "QUIT00002" not in panel and quitter_sid not in panel
    with rapp.app_context():
        rows = db.session.execute(sa.select(Withdrawal).order_by(Withdrawal.id)).scalars().all()
        assert [(r.owed, r.settlement) for r in rows] == [(False, "approved"), (False, None)]
        [settled] = db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "settle_withdrawn")).scalars()
        assert settled.detail["settled"] == "approved" and settled.actor == "admin:alice"
        assert settled.target == f"withdrawal:{rows[0].id}"

    # a second sync approves nothing again
    sync_now(admin)
    assert len(approvals(fake)) == 1
    held = every_text(rapp)
    assert not holds(held, "PAYME0001") and not holds(held, finished_sid)


def test_the_cli_sync_approves_a_withdrawn_finisher_and_lists_the_unknown(rapp, fake, database_url,
                                                                          recruit_spec,
                                                                          monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "test-secret")  # the server's key, as cron would have it
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    finished, finished_sid, client = finish(rapp, fake, study["id"], "PAYME0004")
    withdraw(client, finished)
    fake.join(study["id"], "STRANGER05")
    out = recruit(database_url, recruit_spec, "sync")
    assert out.exit_code == 0, out.output
    assert fake.submissions[finished_sid]["status"] == "APPROVED"
    assert '"approved": 1' in out.output.replace("\n", " ") or '"settled": "approved"' in out.output
    assert "STRANGER05" in out.output and "PAYME0004" not in out.output


def test_the_advice_after_finishing_depends_on_whether_the_submission_was_reviewed():
    owed = platform_advice("prolific", finished=True)
    assert "do not return it" in owed and "paid" in owed and "can also return" not in owed
    done = platform_advice("prolific", finished=True, reviewed=True)
    assert "already been reviewed" in done and "paid" not in done
    assert "return the study on Prolific" in platform_advice("prolific", finished=False)


def test_a_sona_participant_who_withdraws_before_the_credit_went_through_is_credited(
        database_url, small_experiment, tmp_path, monkeypatch):
    sona = RunningSona()
    try:
        path = spec_with(small_experiment, tmp_path / "sona", sona_table(sona))
        with app_factory(database_url, tmp_path, monkeypatch) as make:
            app = make(path)
            code = sona.fake.sign_up()
            sona.fake.fail_next = 1  # SONA is down when the participant completes
            client = app.test_client()
            pid, token = enter(client, f"survey_code={code}")
            answer(client, pid, token)
            assert client.post(f"/api/v1/participants/{pid}/complete",
                               headers={"Authorization": f"Bearer {token}"}).status_code == 200
            assert sona.fake.credited(code) == 0
            with app.app_context():
                assert db.session.execute(sa.select(SonaGrant.state)).scalar_one() == "pending"
            withdraw(client, pid)
            assert sona.fake.credited(code) == 1  # sent before its row went with the data
            with app.app_context():
                assert db.session.execute(sa.select(SonaGrant)).first() is None
                row = db.session.execute(sa.select(Withdrawal)).scalar_one()
                assert (row.platform, row.status, row.owed) == ("sona", "completed", False)
                assert row.settlement == "credited"
            assert not holds(every_text(app), code)
    finally:
        sona.stop()
