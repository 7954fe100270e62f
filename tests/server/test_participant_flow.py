"""Entry from each platform, duplicates, exclusions, conditions, stimulus files and the admin gate."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.study import experiments
from humanlike.server.tables.core import AdminUser, Participant
from tests.server.conftest import auth, enter
from tests.server.sources import app_factory, spec_with

MOBILE_UA = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148"


@pytest.fixture
def declared_app(database_url, small_experiment, tmp_path, monkeypatch):
    """``declared_app(line)``: the small experiment declaring ``line`` instead of Prolific (``""``:
    no platform, the local default that takes plain, Prolific and MTurk-format links)."""
    with app_factory(database_url, tmp_path, monkeypatch) as make:
        yield lambda line: make(spec_with(small_experiment, tmp_path / "declared", line))


def n_participants(app) -> int:
    with app.app_context():
        return db.session.execute(sa.select(sa.func.count()).select_from(Participant)).scalar_one()


def test_prolific_entry_records_the_platform_ids(app, client):
    pid, _ = enter(client, "PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1")
    with app.app_context():
        p = db.session.execute(sa.select(Participant)).scalar_one()
        assert (p.platform, p.platform_id, p.study_id, p.session_id, p.public_id) == (
            "prolific", "P1", "S1", "X1", pid)
        assert p.status == "allocated" and len(p.token_hash) == 64


def test_the_same_platform_id_cannot_take_part_twice(app, client):
    enter(client, "PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1")
    other_browser = app.test_client()
    resp = other_browser.get("/start/small?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X9")
    assert resp.status_code == 409
    assert "already taken part" in resp.get_data(as_text=True)
    assert n_participants(app) == 1


def test_the_same_browser_resumes_its_unfinished_session(app, client):
    pid, _ = enter(client, "PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1")
    resp = client.get("/start/small?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1")
    assert resp.status_code == 302 and resp.headers["Location"].endswith(f"/task/{pid}")
    assert n_participants(app) == 1


@pytest.mark.parametrize("line", ['platform = "mturk"\n', ""])
def test_mturk_preview_shows_only_a_preview_and_creates_nobody(declared_app, line):
    app = declared_app(line)
    resp = app.test_client().get("/start/small?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    assert resp.status_code == 200 and "preview" in resp.get_data(as_text=True).lower()
    assert n_participants(app) == 0


def test_mturk_completion_posts_to_the_sandbox_external_submit(declared_app):
    app = declared_app('platform = "mturk"\n')
    _pid, _token = enter(app.test_client(), "workerId=W1&assignmentId=A1&hitId=H1"
                               "&turkSubmitTo=https://workersandbox.mturk.com")
    with app.app_context():
        from humanlike.server.platforms import completion_target

        p = db.session.execute(sa.select(Participant)).scalar_one()
        assert (p.platform, p.platform_id, p.assignment_id, p.hit_id) == ("mturk", "W1", "A1", "H1")
        target = completion_target(p)
    assert target["action"] == "https://workersandbox.mturk.com/mturk/externalSubmit"
    assert target["fields"]["assignmentId"] == "A1"


def test_a_foreign_turk_submit_host_is_refused(app, client):
    resp = client.get("/start/small?workerId=W1&assignmentId=A1&hitId=H1&turkSubmitTo=https://evil.example")
    assert resp.status_code == 400 and n_participants(app) == 0


def test_mobile_browsers_are_refused_when_the_spec_says_so(app, client):
    resp = client.get("/start/small?PROLIFIC_PID=M1", headers={"User-Agent": MOBILE_UA})
    assert resp.status_code == 403 and "computer" in resp.get_data(as_text=True)
    assert n_participants(app) == 0


def test_local_links_create_a_new_participant_per_browser(declared_app):
    app = declared_app("")
    for _ in range(2):
        resp = app.test_client().get("/start/small")
        assert resp.status_code == 302
    assert n_participants(app) == 2


def test_participants_of_listed_experiments_are_not_eligible(database_url, small_experiment):
    """A follow-up study listing `small` in exclude_participants_from turns its participants away."""
    followup = small_experiment.parent / "followup.toml"
    followup.write_text(small_experiment.read_text().replace(
        'slug = "small"', 'slug = "followup"\nexclude_participants_from = ["small"]'))
    application = create_app({"TESTING": True, "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": database_url,
                              "EXPERIMENT_PATHS": [str(small_experiment), str(followup)]})
    try:
        database.upgrade(application)
        experiments.sync_all(application)
        enter(application.test_client(), "PROLIFIC_PID=P1")
        refused = application.test_client().get("/start/followup?PROLIFIC_PID=P1")
        assert refused.status_code == 403 and "Not eligible" in refused.get_data(as_text=True)
        assert n_participants(application) == 1
        newcomer = application.test_client().get("/start/followup?PROLIFIC_PID=P2")
        assert newcomer.status_code == 302 and n_participants(application) == 2
    finally:
        database.dispose(application)
        followup.unlink()


def test_conditions_are_filled_least_filled_first(app):
    app.config["ALLOCATION_RANDOM_TIES"] = False  # ties in spec order (random by default)
    conditions = []
    for i in range(4):
        c = app.test_client()
        pid, token = enter(c, f"PROLIFIC_PID=C{i}")
        c.post(f"/api/v1/participants/{pid}/consent", json={"agree": True}, headers=auth(token))
        tl = c.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
        conditions.append(tl["condition"])
        body = {"trial_index": 0, "trial_type": tl["trials"][0]["type"],
                "response": {"ratings": {str(d): 0.0 for d in range(10)}}}
        assert c.post(f"/api/v1/participants/{pid}/trials", json=body, headers=auth(token)).status_code == 201
    assert conditions == ["A", "B", "A", "B"]


def test_declining_consent_ends_the_study(app, client):
    pid, token = enter(client)
    resp = client.post(f"/api/v1/participants/{pid}/consent", json={"agree": False}, headers=auth(token))
    assert resp.get_json()["status"] == "returned"


def test_the_task_page_is_only_for_the_browser_that_was_allocated(app, client):
    pid, token = enter(client)
    other = app.test_client().get(f"/task/{pid}")
    assert other.status_code == 403 and token not in other.get_data(as_text=True)


def test_consent_markdown_is_rendered_with_html_escaped(client):
    pid, token = enter(client)
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    assert "<h1>Consent</h1>" in tl["consent_html"]
    assert "<script>" not in tl["consent_html"] and "&lt;script" in tl["consent_html"]


def test_stimuli_are_served_with_long_cache_headers(client, small_experiment):
    resp = client.get("/stimuli/small/catch/digit3_prototype0.png")
    assert resp.status_code == 200 and resp.mimetype == "image/png"
    assert "max-age=31536000" in resp.headers["Cache-Control"]


def test_stimulus_paths_cannot_leave_the_experiment_folder(client):
    for path in ["/stimuli/small/../experiment.toml", "/stimuli/small/..%2Fexperiment.toml",
                 "/stimuli/small/natural/../../experiment.toml", "/stimuli/small/%2e%2e/consent.md",
                 "/stimuli/small/manifest.csv", "/stimuli/nope/catch/digit3_prototype0.png"]:
        resp = client.get(path)
        assert resp.status_code == 404, path
        assert b"Rate the digits" not in resp.data and b"slug" not in resp.data


def test_admin_pages_redirect_to_the_login_when_logged_out(client):
    resp = client.get("/admin/")
    assert resp.status_code == 302 and "/admin/login" in resp.headers["Location"]


def test_admin_login_needs_the_csrf_token_and_the_right_password(app):
    app.config["WTF_CSRF_ENABLED"] = True
    with app.app_context():
        user = AdminUser(username="alice")
        user.set_password("correct horse")
        db.session.add(user)
        db.session.commit()
        assert "correct horse" not in user.password_hash
    c = app.test_client()
    no_csrf = c.post("/admin/login", data={"username": "alice", "password": "correct horse"})
    assert no_csrf.status_code in (400, 401) and c.get("/admin/").status_code == 302
    page = c.get("/admin/login").get_data(as_text=True)
    import re

    csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
    wrong = c.post("/admin/login", data={"username": "alice", "password": "nope", "csrf_token": csrf})
    assert wrong.status_code == 401
    ok = c.post("/admin/login", data={"username": "alice", "password": "correct horse",
                                      "csrf_token": csrf})
    assert ok.status_code == 302
    index = c.get("/admin/")
    assert index.status_code == 200 and "small" in index.get_data(as_text=True)
