"""Sign-in with the lab's OpenID Connect provider (issue 40 item 3) against the fake provider in
``tests.fakes.oidc_provider``, through the real redirects: a person an owner invited by email signs
in, is bound by ``iss`` + ``sub`` and has exactly their role; a wrong state, a nonce mismatch, an ID
token signed by another key, an unverified email, an uninvited person and a deactivated login are
refused with nothing changed. SQLite only: the database is not what is under test."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
import sqlalchemy as sa
from joserfc.jwk import RSAKey

from humanlike.server.extensions import db
from humanlike.server.tables.core import AdminUser, AuditEntry
from tests.fakes.oidc_provider import KID, FakeProvider, Serving
from tests.server.admin.dashboard_helpers import add_admin, csrf_from, login

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
CALLBACK = "http://localhost/admin/oidc/callback"


@pytest.fixture
def provider(app, monkeypatch):
    fake = FakeProvider(redirect_uris=[CALLBACK])
    serving = Serving(fake)
    app.config.update(OIDC_ISSUER=fake.issuer, OIDC_CLIENT_ID=fake.client_id,
                      OIDC_PROVIDER_NAME="Lab ID")
    monkeypatch.setenv("OIDC_CLIENT_SECRET", fake.client_secret)
    yield fake
    serving.stop()


def sign_in(client, provider: FakeProvider, state: str | None = None):
    """Our login route -> the provider's authorize (auto-consent) -> our callback."""
    start = client.get("/admin/oidc/login?next=/admin/audit")
    assert start.status_code == 302, start.get_data(as_text=True)
    authorize = start.headers["Location"]
    query = parse_qs(urlsplit(authorize).query)
    assert authorize.startswith(f"{provider.issuer}/authorize?")
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    back = requests.get(authorize, allow_redirects=False, timeout=10)
    assert back.status_code == 302, back.text
    callback = back.headers["Location"]
    assert callback.startswith(CALLBACK + "?") and "code=" in callback
    if state is not None:
        params = {k: v[0] for k, v in parse_qs(urlsplit(callback).query).items()} | {"state": state}
        callback = f"{CALLBACK}?{urlencode(params)}"
    return client.get(callback.removeprefix("http://localhost"))


def invite(app, name="bob", email="bob@lab.example", role="researcher", active=True) -> None:
    with app.app_context():
        user = AdminUser(username=name, role=role, email=email, active=active,
                         must_change_password=True)
        user.set_password("one-time-pw")
        db.session.add(user)
        db.session.commit()


def snapshot(app):
    with app.app_context():
        users = db.session.execute(sa.select(
            AdminUser.username, AdminUser.password_hash, AdminUser.active, AdminUser.role,
            AdminUser.email, AdminUser.oidc_issuer, AdminUser.oidc_subject,
            AdminUser.must_change_password).order_by(AdminUser.id)).all()
        audit = db.session.execute(sa.select(sa.func.count()).select_from(AuditEntry)).scalar_one()
        return users, audit


def test_login_page_shows_the_provider_only_when_configured(app, client, monkeypatch):
    monkeypatch.delenv("OIDC_CLIENT_SECRET", raising=False)
    app.config.update(OIDC_ISSUER="http://127.0.0.1:9/", OIDC_CLIENT_ID="x")
    assert "Sign in with" not in client.get("/admin/login").get_data(as_text=True)
    resp = client.get("/admin/oidc/login")  # no secret: not configured
    assert resp.status_code == 302 and resp.headers["Location"] == "/admin/login"
    assert "no OpenID Connect provider" in client.get("/admin/login").get_data(as_text=True)
    monkeypatch.setenv("OIDC_CLIENT_SECRET", "s")
    app.config["OIDC_PROVIDER_NAME"] = "Lab ID"
    assert "Sign in with Lab ID" in client.get("/admin/login").get_data(as_text=True)


def test_an_invited_person_signs_in_and_is_bound_by_iss_and_sub(app, client, provider):
    login(app, client)  # alice, an owner, invites bob by email on the users page
    page = client.get("/admin/users").get_data(as_text=True)
    resp = client.post("/admin/users", data={"username": "bob", "role": "researcher",
                                             "email": "bob@lab.example", "csrf_token": csrf_from(page)})
    assert resp.status_code == 200 and "bob@lab.example" in resp.get_data(as_text=True)

    bob = app.test_client()
    resp = sign_in(bob, provider)
    assert resp.status_code == 302 and resp.headers["Location"] == "/admin/audit"
    assert provider.requests.count("/token") == 1 and "/jwks" in provider.requests
    with app.app_context():
        user = db.session.execute(sa.select(AdminUser).where(AdminUser.username == "bob")).scalar_one()
        assert (user.oidc_issuer, user.oidc_subject) == (provider.issuer, "248289761001")
        assert not user.must_change_password and not user.check_password("x")
        actions = db.session.execute(sa.select(AuditEntry.actor, AuditEntry.action).where(
            AuditEntry.action.like("oidc%")).order_by(AuditEntry.id)).all()
        assert actions == [("admin:bob", "oidc_bind"), ("admin:bob", "oidc_login")]
    assert bob.get("/admin/").status_code == 200
    assert bob.get("/admin/users").status_code == 403  # a researcher, exactly as by password

    # the next sign-in is matched by iss + sub alone, whatever the email now says
    provider.person = provider.person | {"email": "robert@elsewhere.example"}
    again = app.test_client()
    assert sign_in(again, provider).status_code == 302
    assert again.get("/admin/").status_code == 200


def _other_key(provider):
    provider.signing_key = RSAKey.generate_key(2048, {"kid": KID})


REFUSALS = {
    "wrong state": (lambda p: None, {"state": "forged"}, 401, "MismatchingStateError"),
    "nonce mismatch": (lambda p: setattr(p, "nonce_override", "not-the-nonce-sent"), {}, 401,
                       "Invalid claim: &#39;nonce&#39;"),
    "signed by another key": (_other_key, {}, 401, "BadSignatureError"),
    "unverified email": (lambda p: p.person.update(email_verified=False), {}, 403,
                         "did not give a verified email"),
    "uninvited": (lambda p: p.person.update(email="eve@lab.example", sub="666"), {}, 403,
                  "nobody invited eve@lab.example"),
    "deactivated": (None, {}, 403, "this login is deactivated"),
    "outside the allowed domains": (None, {}, 403, "lab.example is not one of this lab"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_with_nothing_changed(app, client, provider, case):
    tamper, kwargs, status, reason = REFUSALS[case]
    add_admin(app)
    invite(app, active=case != "deactivated")
    if case == "outside the allowed domains":
        app.config["OIDC_ALLOWED_DOMAINS"] = "uni.example, other.example"
    if tamper is not None:
        tamper(provider)
    before = snapshot(app)
    resp = sign_in(client, provider, **kwargs)
    assert resp.status_code == status, resp.get_data(as_text=True)
    assert "Sign-in with Lab ID refused" in resp.get_data(as_text=True)
    assert reason in resp.get_data(as_text=True)
    assert snapshot(app) == before
    assert client.get("/admin/").status_code == 302  # not logged in


def test_the_fake_provider_refuses_a_wrong_verifier_secret_or_reused_code(provider):
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")

    def code() -> str:
        resp = requests.get(f"{provider.issuer}/authorize", allow_redirects=False, timeout=10, params={
            "response_type": "code", "client_id": provider.client_id, "redirect_uri": CALLBACK,
            "scope": "openid email", "state": "s", "nonce": "n",
            "code_challenge": challenge.decode(), "code_challenge_method": "S256"})
        return parse_qs(urlsplit(resp.headers["Location"]).query)["code"][0]

    def token(c: str, secret: str = provider.client_secret, v: str = verifier):
        return requests.post(f"{provider.issuer}/token", auth=(provider.client_id, secret), timeout=10,
                             data={"grant_type": "authorization_code", "code": c,
                                   "redirect_uri": CALLBACK, "code_verifier": v})

    assert token(code(), v=secrets.token_urlsafe(48)).json()["error"] == "invalid_grant"
    assert token(code(), secret="wrong").status_code == 401
    good = code()
    assert "id_token" in token(good).json()
    assert token(good).json()["error"] == "invalid_grant"  # single use
    plain = requests.get(f"{provider.issuer}/authorize", allow_redirects=False, timeout=10, params={
        "response_type": "code", "client_id": provider.client_id, "redirect_uri": CALLBACK,
        "scope": "openid", "state": "s", "nonce": "n", "code_challenge": "x" * 43,
        "code_challenge_method": "plain"})
    assert "error=invalid_request" in plain.headers["Location"]
