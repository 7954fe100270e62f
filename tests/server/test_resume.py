"""Resume after a browser restart: same platform identity -> same participant, fresh token, old one
revoked; another SESSION_ID / assignment refused; local resume codes; `humanlike reset-lock`."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.server.extensions import db
from humanlike.server.tables.core import AuditEntry, Event, Participant
from tests.server.conftest import auth, enter
from tests.server.sources import app_factory, spec_with

LINK = "/start/small?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1"


def fragment_token(resp) -> tuple[str, str]:
    """(pid, token) from a /start redirect to /run/<pid>#token=..."""
    assert resp.status_code == 302, resp.get_data(as_text=True)
    m = re.search(r"/run/([0-9a-f]+)#token=([A-Za-z0-9_-]+)$", resp.headers["Location"])
    assert m, resp.headers["Location"]
    return m.group(1), m.group(2)


@pytest.fixture
def declared_app(database_url, small_experiment, tmp_path, monkeypatch):
    """``declared_app(line)``: the small experiment declaring ``line`` instead of Prolific (``""``:
    no platform, the local default that takes plain links)."""
    with app_factory(database_url, tmp_path, monkeypatch) as make:
        yield lambda line: make(spec_with(small_experiment, tmp_path / "declared", line))


def store_first_trial(client, pid, token):
    client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True}, headers=auth(token))
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    body = {"trial_index": 0, "trial_type": tl["trials"][0]["type"],
            "response": {"ratings": {str(d): 0.0 for d in range(10)}}}
    assert client.post(f"/api/v1/participants/{pid}/trials", json=body,
                       headers=auth(token)).status_code == 201


def test_the_start_redirect_hands_the_token_in_the_fragment_not_the_query(app):
    pid, token = fragment_token(app.test_client().get(LINK))
    page = app.test_client().get(f"/run/{pid}")
    assert page.status_code == 200 and token not in page.get_data(as_text=True)


def test_a_new_browser_with_the_same_session_id_resumes_with_a_fresh_token(app):
    first = app.test_client()
    pid, old = fragment_token(first.get(LINK))
    store_first_trial(first, pid, old)
    again = app.test_client()  # the browser restarted: no cookie, no storage
    pid2, new = fragment_token(again.get(LINK))
    assert pid2 == pid and new != old
    tl = again.get(f"/api/v1/participants/{pid}/timeline", headers=auth(new)).get_json()
    assert tl["acknowledged"] == [0] and tl["next_index"] == 1
    refused = first.get(f"/api/v1/participants/{pid}/timeline", headers=auth(old))
    assert refused.status_code == 403 and refused.get_json()["error"] == "forbidden"  # the old token, revoked
    with app.app_context():
        p = db.session.execute(sa.select(Participant)).scalar_one()
        assert len(p.token_hash) == 64 and old not in p.token_hash and new not in p.token_hash
        types = db.session.execute(sa.select(Event.type, Event.value)).all()
        assert ("resume", {"via": "prolific"}) in [tuple(t) for t in types]


def test_a_different_session_id_for_the_same_pid_stays_refused(app):
    enter(app.test_client(), "PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1")
    resp = app.test_client().get("/start/small?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X2")
    assert resp.status_code == 409 and "already taken part" in resp.get_data(as_text=True)


def test_a_finished_participant_cannot_resume(app):
    client = app.test_client()
    pid, token = enter(client, "PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1")
    client.post(f"/api/v1/participants/{pid}/consent", json={"agree": False}, headers=auth(token))
    resp = app.test_client().get(LINK)
    assert resp.status_code == 409


def test_mturk_resumes_on_the_same_assignment_and_refuses_another(declared_app):
    app = declared_app('platform = "mturk"\n')
    link = "/start/small?workerId=W1&assignmentId=A1&hitId=H1"
    pid, old = fragment_token(app.test_client().get(link))
    pid2, new = fragment_token(app.test_client().get(link))
    assert pid2 == pid and new != old
    other = app.test_client().get("/start/small?workerId=W1&assignmentId=A2&hitId=H1")
    assert other.status_code == 409


def test_a_local_resume_code_resumes_the_same_participant(declared_app):
    app = declared_app("")
    client = app.test_client()
    pid, token = fragment_token(client.get("/start/small"))
    page = client.get(f"/task/{pid}").get_data(as_text=True)
    code = re.search(r'"resume_code": ?"([0-9A-F]{8}-[0-9A-F]{8})"', page).group(1)
    pid2, new = fragment_token(app.test_client().get(f"/start/small?resume={code.lower()}"))
    assert pid2 == pid and new != token
    wrong = app.test_client().get("/start/small?resume=" + code[:-1] + ("0" if code[-1] != "0" else "1"))
    assert wrong.status_code == 404 and "not recognised" in wrong.get_data(as_text=True)


def test_the_run_page_without_a_token_explains_how_to_come_back(app, client):
    pid, _ = enter(client)
    page = app.test_client().get(f"/run/{pid}")
    assert page.status_code == 200 and "original study link" in page.get_data(as_text=True)


def test_reset_lock_lets_a_new_session_id_resume_once_and_is_audited(app, small_experiment):
    from humanlike.cli import main

    pid, _ = fragment_token(app.test_client().get(LINK))
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    result = CliRunner().invoke(main, ["reset-lock", "small", "P1", "--reason", "browser crash",
                                       "--database-url", url])
    assert result.exit_code == 0, result.output
    pid2, _ = fragment_token(app.test_client().get(
        "/start/small?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X2"))
    assert pid2 == pid
    third = app.test_client().get("/start/small?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X3")
    assert third.status_code == 409
    with app.app_context():
        entry = db.session.execute(sa.select(AuditEntry)).scalar_one()
        assert (entry.action, entry.experiment, entry.target) == ("reset_lock", "small", "P1")
        assert entry.detail["reason"] == "browser crash" and entry.detail["cleared"]["session_id"] == "X1"


def test_reset_lock_names_an_unknown_participant(app):
    from humanlike.cli import main

    result = CliRunner().invoke(main, ["reset-lock", "small", "nobody", "--database-url",
                                       app.config["SQLALCHEMY_DATABASE_URI"]])
    assert result.exit_code != 0 and "no participant 'nobody'" in result.output


def test_the_timeline_carries_the_experience_settings(app, client):
    pid, token = enter(client)
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    assert tl["blocks"]["ratings"]["trial_type"] == "rating"
    assert tl["fullscreen"] is False and tl["break_every"] is None
    assert tl["presentation"]["fixation_ms"] == 0 and tl["presentation"]["iti_ms"] == 0
    # 1 practice + 10 natural + 2 catch + 2 repeats = 15 ratings at 8 s, a 60 s debrief, 90 s setup
    assert tl["estimated_minutes"] == 5


def test_offline_online_and_resume_events_are_recorded(app, client):
    pid, token = enter(client)
    for kind, value in (("offline", {"since": 1.0}), ("online", {"offline_ms": 1500}),
                        ("resume", {"next_index": 3}), ("visibility", "hidden")):
        resp = client.post(f"/api/v1/participants/{pid}/events", json={"type": kind, "value": value},
                           headers=auth(token))
        assert resp.status_code == 201, (kind, resp.get_json())
    with app.app_context():
        kinds = db.session.execute(sa.select(Event.type).order_by(Event.id)).scalars().all()
    assert kinds == ["offline", "online", "resume", "visibility"]
