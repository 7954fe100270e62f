"""Web hardening: link-preview filter, rate limits, login timing, redirects, headers, ProxyFix."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.study import experiments
from humanlike.server.tables.core import AdminUser, Participant

MTURK = "https://www.mturk.com https://workersandbox.mturk.com"


@pytest.fixture
def make_app(database_url, small_experiment):
    """An app factory on the test database with extra config (rate limits on unless told)."""
    built = []

    def build(**config):
        application = create_app({
            "TESTING": True, "SECRET_KEY": "test-secret", "SQLALCHEMY_DATABASE_URI": database_url,
            "EXPERIMENT_PATHS": [str(small_experiment)], "RATELIMIT_ENABLED": True,
            "WTF_CSRF_ENABLED": False, **config,
        })
        database.upgrade(application)
        experiments.sync_all(application)
        built.append(application)
        return application

    yield build
    for application in built:
        database.dispose(application)


def n_participants(app) -> int:
    with app.app_context():
        return db.session.execute(sa.select(sa.func.count()).select_from(Participant)).scalar_one()


def add_admin(app, name="alice", password="correct horse"):
    with app.app_context():
        user = AdminUser(username=name)
        user.set_password(password)
        db.session.add(user)
        db.session.commit()


@pytest.mark.parametrize("agent", [
    "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
    "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
    "Twitterbot/1.0", "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
    "WhatsApp/2.23.20.0", "TelegramBot (like TwitterBot)", "LinkedInBot/1.0",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "curl/8.5.0",
])
def test_link_preview_bots_get_a_page_and_allocate_nobody(make_app, agent):
    app = make_app()
    c = app.test_client()
    for i in range(5):
        resp = c.get(f"/start/small?PROLIFIC_PID=P{i}&STUDY_ID=s&SESSION_ID=x",
                     headers={"User-Agent": agent})
        assert resp.status_code == 200 and "Open this link in your browser" in resp.get_data(as_text=True)
    assert n_participants(app) == 0


def test_head_requests_allocate_nobody_and_a_browser_still_enters(make_app):
    app = make_app()
    c = app.test_client()
    assert c.head("/start/small?PROLIFIC_PID=H1&STUDY_ID=s&SESSION_ID=x").status_code == 200
    assert n_participants(app) == 0
    browser = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0 Safari/537.36"}
    resp = c.get("/start/small?PROLIFIC_PID=H1&STUDY_ID=s&SESSION_ID=x", headers=browser)
    assert resp.status_code == 302 and n_participants(app) == 1


def test_entry_is_rate_limited_per_client_address(make_app):
    app = make_app(START_RATE_LIMIT="3 per minute")
    c = app.test_client()
    codes = [c.get(f"/start/small?PROLIFIC_PID=R{i}&STUDY_ID=s&SESSION_ID=x").status_code
             for i in range(5)]
    assert codes == [302, 302, 302, 429, 429]
    assert n_participants(app) == 3
    other = app.test_client()
    resp = other.get("/start/small?PROLIFIC_PID=R9&STUDY_ID=s&SESSION_ID=x",
                     environ_base={"REMOTE_ADDR": "198.51.100.7"})
    assert resp.status_code == 302 and n_participants(app) == 4


def test_rate_limits_follow_the_client_address_behind_a_configured_proxy(make_app):
    app = make_app(START_RATE_LIMIT="1 per minute", PROXY_COUNT=1)
    c = app.test_client()

    def enter(i, address):
        return c.get(f"/start/small?PROLIFIC_PID=X{i}&STUDY_ID=s&SESSION_ID=x",
                     headers={"X-Forwarded-For": address, "X-Forwarded-Proto": "https"}).status_code

    assert [enter(0, "203.0.113.1"), enter(1, "203.0.113.2"), enter(2, "203.0.113.1")] == [302, 302, 429]


def test_admin_login_is_rate_limited(make_app):
    app = make_app(LOGIN_RATE_LIMIT="3 per minute")
    add_admin(app)
    c = app.test_client()
    codes = [c.post("/admin/login", data={"username": "alice", "password": "nope"}).status_code
             for _ in range(4)]
    assert codes == [401, 401, 401, 429]
    right = c.post("/admin/login", data={"username": "alice", "password": "correct horse"})
    assert right.status_code == 429 and c.get("/admin/").status_code == 302
    assert c.get("/admin/login").status_code == 200  # the form itself is not limited


def wrong(client, address="127.0.0.1", name="alice"):
    return client.post("/admin/login", data={"username": name, "password": "nope"},
                       environ_base={"REMOTE_ADDR": address}).status_code


def right(client, address="127.0.0.1"):
    return client.post("/admin/login", data={"username": "alice", "password": "correct horse"},
                       environ_base={"REMOTE_ADDR": address}).status_code


def test_login_failures_are_counted_across_workers(make_app):
    """Two workers (two apps on one database) share one count: with a limit of 3, two failures on
    one and one on the other use it up on both (per-process counters allowed 3 on each)."""
    first, second = make_app(LOGIN_RATE_LIMIT="3 per minute"), make_app(LOGIN_RATE_LIMIT="3 per minute")
    add_admin(first)
    a, b = first.test_client(), second.test_client()
    assert [wrong(a), wrong(a), wrong(b)] == [401, 401, 401]
    assert wrong(a) == 429 and wrong(b) == 429
    assert right(b) == 429  # a browser the admin never logged in from waits too
    assert wrong(a, address="198.51.100.4") == 401  # another address has its own count


def test_a_flood_from_the_admins_own_address_does_not_lock_the_admin_out(make_app):
    """Someone at the same office or VPN address guesses alice's password: their attempts are
    refused, but alice's browser, which has logged in before (a signed device cookie, OWASP's
    "device cookies"), still gets in with the right password and has its own small limit."""
    app = make_app(LOGIN_RATE_LIMIT="3 per minute")
    add_admin(app)
    alice, mallory, new_browser = app.test_client(), app.test_client(), app.test_client()
    assert right(alice) == 302
    alice.post("/admin/logout")
    assert [wrong(mallory) for _ in range(6)] == [401, 401, 401, 429, 429, 429]
    assert right(new_browser) == 429
    assert right(alice) == 302 and alice.get("/admin/").status_code == 200
    alice.post("/admin/logout")
    assert [wrong(alice) for _ in range(4)] == [401, 401, 401, 429]  # a stolen cookie gains little
    forged = app.test_client()
    forged.set_cookie("humanlike_device", "alice.forged")
    assert right(forged) == 429


def test_a_lab_behind_one_address_can_start_and_a_limited_start_gets_a_friendly_page(make_app):
    from limits import parse_many

    app = make_app()
    per_minute = [i for i in parse_many(app.config["START_RATE_LIMIT"]) if i.get_expiry() == 60]
    assert per_minute and per_minute[0].amount >= 100  # a class of 100 on one NAT address
    limited = make_app(START_RATE_LIMIT="1 per minute")
    c = limited.test_client()
    assert c.get("/start/small?PROLIFIC_PID=L1&STUDY_ID=s&SESSION_ID=x").status_code == 302
    resp = c.get("/start/small?PROLIFIC_PID=L2&STUDY_ID=s&SESSION_ID=x")
    html = resp.get_data(as_text=True)
    assert resp.status_code == 429 and 0 < int(resp.headers["Retry-After"]) <= 60
    assert "Too Many Requests" not in html and "same network" in html
    assert re.search(r"try again in about \d+ seconds?", html)


def test_unknown_usernames_cost_a_password_check_like_known_ones(make_app, monkeypatch):
    from humanlike.server.admin import auth as admin
    from humanlike.server.tables import core as models

    calls = []
    real = admin.check_password_hash

    def counting(hash_, password):
        calls.append(hash_)
        return real(hash_, password)

    monkeypatch.setattr(admin, "check_password_hash", counting)
    monkeypatch.setattr(models, "check_password_hash", counting)
    app = make_app()
    add_admin(app)
    c = app.test_client()
    assert c.post("/admin/login", data={"username": "alice", "password": "nope"}).status_code == 401
    assert c.post("/admin/login", data={"username": "mallory", "password": "nope"}).status_code == 401
    assert len(calls) == 2
    assert calls[0].split("$")[0] == calls[1].split("$")[0]  # same algorithm and cost parameters


@pytest.mark.parametrize("target", [
    "/%09/evil.example", "//evil.example", "/\\evil.example", "/%5Cevil.example", "https://evil.example",
    "/%0d%0a/evil.example", "%2F%2Fevil.example", "///evil.example", "javascript:alert(1)", " //evil.example",
])
def test_the_post_login_redirect_refuses_other_hosts(make_app, target):
    app = make_app()
    add_admin(app)
    c = app.test_client()
    resp = c.post(f"/admin/login?next={target}", data={"username": "alice", "password": "correct horse"})
    assert resp.status_code == 302 and resp.headers["Location"] == "/admin/"


def test_the_post_login_redirect_follows_same_host_paths(make_app):
    app = make_app()
    add_admin(app)
    resp = app.test_client().post("/admin/login?next=/admin/%3Fx%3D1",
                                  data={"username": "alice", "password": "correct horse"})
    assert resp.headers["Location"] == "/admin/?x=1"


def csp(resp) -> dict[str, str]:
    parts = [p.strip().split(" ", 1) for p in resp.headers["Content-Security-Policy"].split(";")]
    return {p[0]: p[1] if len(p) > 1 else "" for p in parts}


def test_participant_pages_may_be_framed_by_mturk_only_and_admin_pages_by_nobody(make_app):
    app = make_app()
    c = app.test_client()
    entry = c.get("/start/small?PROLIFIC_PID=F1&STUDY_ID=s&SESSION_ID=x")
    task = c.get(entry.headers["Location"])
    for resp in (entry, task):
        assert csp(resp)["frame-ancestors"] == MTURK
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        assert resp.headers["Referrer-Policy"] == "no-referrer"
        assert "X-Frame-Options" not in resp.headers
        assert csp(resp)["font-src"] == "'self' data:"  # jsPsych's stylesheet embeds its fonts
    login = c.get("/admin/login")
    assert csp(login)["frame-ancestors"] == "'none'" and login.headers["X-Frame-Options"] == "DENY"
    assert "Strict-Transport-Security" not in login.headers
    api = c.get("/api/v1/participants/nope/timeline")
    assert api.headers["X-Content-Type-Options"] == "nosniff"


def test_the_task_page_script_carries_this_responses_nonce(make_app):
    app = make_app()
    c = app.test_client()
    location = c.get("/start/small?PROLIFIC_PID=N1&STUDY_ID=s&SESSION_ID=x").headers["Location"]
    nonces = []
    for _ in range(2):
        resp = c.get(location)
        policy = csp(resp)
        assert "'unsafe-inline'" not in policy["script-src"]
        nonce = re.search(r"'nonce-([^']+)'", policy["script-src"]).group(1)
        assert f'<script nonce="{nonce}">HumanlikeRunner.start' in resp.get_data(as_text=True)
        nonces.append(nonce)
    assert nonces[0] != nonces[1]


def test_production_adds_hsts(make_app):
    app = make_app(PRODUCTION=True)
    resp = app.test_client().get("/admin/login")
    assert resp.headers["Strict-Transport-Security"].startswith("max-age=")
