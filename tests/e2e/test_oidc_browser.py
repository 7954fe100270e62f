"""Sign-in with the lab's OpenID Connect provider in headless Chromium (issue 40 item 3): the login
page shows "Sign in with Lab ID" beside the password form, and one click goes through the fake
provider's authorize and back to the dashboard as the invited login (the session cookie,
SameSite=Lax, survives the top-level redirects; the button is a link, as the page's CSP
form-action would stop a form that redirects to another host). Screenshots in test-artifacts/lab/ (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from humanlike.server.extensions import db
from humanlike.server.tables.core import AdminUser
from tests.e2e.conftest import serving
from tests.fakes.oidc_provider import FakeProvider, Serving

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "lab"


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_one_click_signs_an_invited_person_in(database_url, chromium, monkeypatch):
    fake = FakeProvider()
    provider = Serving(fake)
    monkeypatch.setenv("OIDC_CLIENT_SECRET", fake.client_secret)

    def setup(app):
        app.config.update(OIDC_ISSUER=fake.issuer, OIDC_CLIENT_ID=fake.client_id,
                          OIDC_PROVIDER_NAME="Lab ID")
        with app.app_context():
            user = AdminUser(username="bob", role="researcher", email="bob@lab.example")
            user.set_password("unused local password")
            db.session.add(user)
            db.session.commit()

    try:
        with serving(database_url, setup=setup) as live:
            fake.redirect_uris.append(f"{live.url}/admin/oidc/callback")
            context = chromium.new_context(viewport={"width": 900, "height": 600})
            page = context.new_page()
            page.set_default_timeout(15000)
            page.goto(f"{live.url}/admin/login")
            button = page.locator("a.oidc")
            assert button.inner_text() == "Sign in with Lab ID"
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "login-oidc.png"), full_page=True)
            button.click()
            page.wait_for_url(f"{live.url}/admin/")
            assert "bob" in page.content()
            page.screenshot(path=str(ARTIFACTS / "after-oidc-sign-in.png"), full_page=True)
            assert "/token" in fake.requests
            context.close()
    finally:
        provider.stop()
