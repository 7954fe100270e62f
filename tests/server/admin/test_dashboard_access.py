"""Dashboard access: every admin URL redirects to the login when logged out (walked from the URL
map, so a new route cannot be forgotten), every admin POST without a CSRF token is refused, several
admins can log in, and participant-typed text is never rendered unescaped."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from humanlike.server.admin.auth import PUBLIC_ENDPOINTS
from humanlike.server.extensions import db
from humanlike.server.tables.core import AuditEntry, Participant
from tests.server.admin.dashboard_helpers import add_admin, csrf_from, login, run_participant

SAMPLE_ARGS = {"slug": "small", "public_id": "0123456789abcdef", "job_id": "1", "user_id": "1",
               "token_id": "1"}


def admin_rules(app):
    return [r for r in app.url_map.iter_rules() if r.endpoint.startswith("admin.")]


def url_of(rule) -> str:
    url = rule.rule
    for name in rule.arguments:
        url = url.replace(f"<{name}>", SAMPLE_ARGS[name])
    return url


def test_every_admin_url_redirects_to_the_login_when_logged_out(app, client):
    rules = admin_rules(app)
    assert len(rules) >= 14  # the dashboard's routes are all in the walk
    for rule in rules:
        if rule.endpoint in PUBLIC_ENDPOINTS:
            continue
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            resp = client.open(url_of(rule), method=method)
            if method == "POST":  # CSRF is checked first: refused either way, never performed
                assert resp.status_code in (302, 400), (rule.rule, method, resp.status_code)
                if resp.status_code == 302:
                    assert "/admin/login" in resp.headers["Location"]
            else:
                assert resp.status_code == 302, (rule.rule, method, resp.status_code)
                assert resp.headers["Location"].startswith("/admin/login"), rule.rule


def test_every_admin_post_without_a_csrf_token_is_refused_even_when_logged_in(app, client):
    login(app, client)
    posts = [r for r in admin_rules(app) if "POST" in r.methods]
    assert {r.endpoint for r in posts} >= {"admin.login", "admin.logout", "admin.set_status",
                                           "admin.confirm_action", "admin.apply_action",
                                           "admin.panel_stale"}
    for rule in posts:
        resp = client.post(url_of(rule), data={"action": "approve", "confirmed": "yes",
                                               "status": "closed", "username": "alice",
                                               "password": "correct horse battery"})
        assert resp.status_code == 400, (rule.rule, resp.status_code)
        assert "The form expired" in resp.get_data(as_text=True)  # the CSRF refusal page
    assert client.get("/admin/").status_code == 200  # still logged in, nothing changed
    assert 'data-slug="small"' in client.get("/admin/").get_data(as_text=True)
    assert "status-live" in client.get("/admin/").get_data(as_text=True)


def test_several_admins_log_in_and_the_audit_names_each(app):
    first, second = app.test_client(), app.test_client()
    login(app, first, "alice")
    login(app, second, "bob", "another good password")
    for c in (first, second):
        page = c.get("/admin/").get_data(as_text=True)
        token = csrf_from(page)
        status = "closed" if c is first else "live"
        assert c.post("/admin/experiments/small/status",
                      data={"status": status, "csrf_token": token}).status_code == 302
    audit = first.get("/admin/audit").get_data(as_text=True)
    assert "admin:alice" in audit and "admin:bob" in audit


def test_a_closed_experiment_shows_new_arrivals_a_polite_page(app, client):
    login(app, client)
    token = csrf_from(client.get("/admin/").get_data(as_text=True))
    client.post("/admin/experiments/small/status", data={"status": "closed", "csrf_token": token})
    resp = app.test_client().get("/start/small?PROLIFIC_PID=late1&STUDY_ID=s&SESSION_ID=x")
    assert resp.status_code == 410 and "not taking participants" in resp.get_data(as_text=True)


def evil_participant(app) -> str:
    """A participant whose debrief answer, user agent and platform id are a script tag."""
    evil = "<script>alert(1)</script>"
    participant = app.test_client()
    pid = run_participant(participant, "PROLIFIC_PID=evil1&STUDY_ID=s1&SESSION_ID=x1",
                          answer=evil, user_agent=f"Mozilla/5.0 {evil}")
    with app.app_context():  # entry refuses such ids; one stored by other means must stay inert
        row = db.session.execute(sa.select(Participant).where(Participant.public_id == pid)
                                 ).scalar_one()
        row.platform_id = evil
        row.user_agent = f"Mozilla/5.0 {evil}"  # stored only with [privacy] store_user_agent
        db.session.commit()
    return pid


@pytest.fixture
def evil_pid(app, built_study) -> str:
    """``evil_participant``, built once per session and backend (each page reads a copy)."""
    return built_study("evil_participant", evil_participant)


@pytest.mark.parametrize("page", ["experiment", "participant", "audit"])
def test_participant_typed_text_is_escaped_on_every_page(app, client, page, evil_pid):
    pid = evil_pid
    login(app, client)
    token = csrf_from(client.get("/admin/").get_data(as_text=True))
    assert client.post("/admin/experiments/small/reveal", data={"csrf_token": token}
                       ).status_code == 302
    urls = {"experiment": "/admin/experiments/small",
            "participant": f"/admin/participants/{pid}", "audit": "/admin/audit"}
    html = client.get(urls[page]).get_data(as_text=True)
    assert "<script>alert(1)" not in html
    if page == "participant":  # the platform id, user agent and debrief answer are all shown
        assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3
    if page == "experiment":
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_wrong_password_does_not_log_in(app, client):
    add_admin(app)
    token = csrf_from(client.get("/admin/login").get_data(as_text=True))
    resp = client.post("/admin/login", data={"username": "alice", "password": "wrong",
                                             "csrf_token": token})
    assert resp.status_code == 401 and client.get("/admin/").status_code == 302


def audit_count() -> int:
    return db.session.execute(sa.select(sa.func.count()).select_from(AuditEntry)).scalar_one()


def test_no_admin_get_writes_the_audit_log(app, client, evil_pid):
    """A page the admin visits elsewhere can make their browser GET any admin URL (an <img>): no
    GET may write an audit row in their name (``?reveal=1`` and ``export.zip`` once did)."""
    login(app, client)
    args = {**SAMPLE_ARGS, "public_id": evil_pid}
    with app.app_context():
        before = audit_count()
    for rule in admin_rules(app):
        if "GET" not in rule.methods or rule.endpoint in PUBLIC_ENDPOINTS:
            continue
        url = rule.rule
        for name in rule.arguments:
            url = url.replace(f"<{name}>", args[name])
        resp = client.get(url + "?reveal=1&pseudonymise=1")
        assert resp.status_code in (200, 302, 404), (url, resp.status_code)
        resp.close()
    with app.app_context():
        assert audit_count() == before
    page = client.get("/admin/experiments/small?reveal=1").get_data(as_text=True)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" not in page  # a GET reveals nothing


def test_revealing_ids_and_downloading_are_posts_with_csrf_and_audited(app, client, evil_pid):
    login(app, client)
    with app.app_context():
        before = audit_count()
    for url in ("/admin/experiments/small/reveal", f"/admin/participants/{evil_pid}/reveal",
                "/admin/experiments/small/export.zip"):
        assert client.post(url).status_code == 400  # no CSRF token: refused
    assert client.get("/admin/experiments/small/export.zip").status_code == 405
    with app.app_context():
        assert audit_count() == before
    token = csrf_from(client.get("/admin/").get_data(as_text=True))
    resp = client.post(f"/admin/participants/{evil_pid}/reveal", data={"csrf_token": token})
    assert resp.status_code == 302 and resp.headers["Location"].endswith(evil_pid)
    html = client.get(f"/admin/participants/{evil_pid}").get_data(as_text=True)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the platform id, revealed
    other = client.get("/admin/experiments/small").get_data(as_text=True)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" not in other  # only that participant's
    resp = client.post("/admin/experiments/small/export.zip", data={"csrf_token": token})
    assert resp.status_code == 200 and resp.mimetype == "application/zip"
    resp.get_data()
    with app.app_context():
        rows = db.session.execute(sa.select(AuditEntry).order_by(AuditEntry.id)).scalars().all()
        assert [(r.action, r.target) for r in rows[before:]] == [
            ("reveal_ids", evil_pid), ("download_export", "small")]
    resp = client.post("/admin/experiments/small/reveal", data={"csrf_token": token, "hide": "1"})
    assert resp.status_code == 302
