"""Sign-in with the lab's OpenID Connect provider (issue 40 item 3), beside the local passwords
that stay the default: Authlib's Flask client reads the provider's discovery document, sends the
authorization code flow with PKCE (S256), checks the state and the nonce and verifies the ID token's
signature against the provider's JWKS (OpenID Connect Core 1.0 §3.1.3.7). A person is the login
bound to the token's ``iss`` + ``sub``; the first sign-in of a person an owner invited by email
binds that pair when the provider says the email is verified. Nobody else gets in, and no login is
ever created here.

Configured by ``OIDC_ISSUER`` and ``OIDC_CLIENT_ID`` (app config or environment),
``OIDC_CLIENT_SECRET`` (environment only), optional ``OIDC_PROVIDER_NAME`` (the button's label)
and ``OIDC_ALLOWED_DOMAINS`` (comma-separated email domains a binding may use)."""

from __future__ import annotations

import os
import secrets
from typing import Any

import requests
import sqlalchemy as sa
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.flask_client import OAuth
from flask import current_app, flash, redirect, render_template, request, session, url_for
from flask_login import login_user
from joserfc.errors import JoseError

from humanlike.server import audit
from humanlike.server.admin.auth import LoginForm, _safe_next
from humanlike.server.admin.blueprint import bp
from humanlike.server.extensions import db
from humanlike.server.security import give_device_cookie
from humanlike.server.tables.core import AdminUser

EXTENSION = "humanlike.oidc"
NEXT = "oidc_next"
"""The session key holding where to go after the provider sends the person back."""


def setting(name: str) -> str:
    """An OIDC setting: the app's config, else the environment; the client secret only ever from
    the environment (never the repository or a config file)."""
    if name == "OIDC_CLIENT_SECRET":
        return os.environ.get(name, "").strip()
    return str(current_app.config.get(name) or os.environ.get(name, "")).strip()


def configured() -> bool:
    """True when the lab has a provider: issuer, client id and secret are all set."""
    return all(setting(n) for n in ("OIDC_ISSUER", "OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET"))


def provider_name() -> str:
    """The button's label: ``OIDC_PROVIDER_NAME``, else the issuer's host."""
    return setting("OIDC_PROVIDER_NAME") or setting("OIDC_ISSUER").split("//")[-1].split("/")[0]


def client() -> Any:
    """The app's Authlib client, registered on first use from the discovery document's URL."""
    oauth = current_app.extensions.get(EXTENSION)
    if oauth is None:
        oauth = OAuth(current_app)
        oauth.register(
            "lab", client_id=setting("OIDC_CLIENT_ID"), client_secret=setting("OIDC_CLIENT_SECRET"),
            server_metadata_url=setting("OIDC_ISSUER").rstrip("/") + "/.well-known/openid-configuration",
            client_kwargs={"scope": "openid email profile", "code_challenge_method": "S256",
                           "timeout": 10})
        current_app.extensions[EXTENSION] = oauth
    return oauth.create_client("lab")


def allowed_domain(email: str) -> bool:
    """True when ``OIDC_ALLOWED_DOMAINS`` is unset or names the email's domain."""
    domains = {d.strip().lower() for d in setting("OIDC_ALLOWED_DOMAINS").split(",") if d.strip()}
    return not domains or email.rpartition("@")[2].lower() in domains


def person_for(claims: dict[str, Any]) -> tuple[AdminUser | None, str]:
    """The login the verified ID token's claims name, or None and why not: the bound ``iss`` +
    ``sub`` first, else an unbound invited login whose email the provider verified (bound now)."""
    issuer, subject = str(claims.get("iss", "")), str(claims.get("sub", ""))
    user = db.session.execute(sa.select(AdminUser).where(
        AdminUser.oidc_issuer == issuer, AdminUser.oidc_subject == subject)).scalar_one_or_none()
    if user is not None:
        return user, ""
    email = str(claims.get("email") or "").strip()
    if not email or claims.get("email_verified") is not True:
        return None, "the provider did not give a verified email, and this account is not linked to a login"
    if not allowed_domain(email):
        return None, f"{email.rpartition('@')[2]} is not one of this lab's sign-in domains"
    invited = db.session.execute(sa.select(AdminUser).where(
        sa.func.lower(AdminUser.email) == email.lower(),
        AdminUser.oidc_subject.is_(None))).scalars().all()
    if not invited:
        return None, f"nobody invited {email}: ask an owner to invite you by this email"
    if len(invited) > 1:
        return None, f"more than one login was invited as {email}: ask an owner to keep one"
    return invited[0], "bind"


def _refused(message: str, status: int):
    flash(f"Sign-in with {provider_name()} refused: {message}.")
    return render_template("admin/login.html", form=LoginForm()), status


def _not_configured():
    flash("This lab has no OpenID Connect provider: log in with your password.")
    return redirect(url_for("admin.login"))


@bp.get("/oidc/login")
def oidc_login():
    """Send the person to the provider (state, nonce and the PKCE verifier kept in the session)."""
    if not configured():
        return _not_configured()
    session[NEXT] = _safe_next(request.args.get("next"))
    try:
        return client().authorize_redirect(url_for("admin.oidc_callback", _external=True))
    except (requests.RequestException, AuthlibBaseError, ValueError) as exc:
        return _refused(f"the provider could not be reached ({type(exc).__name__})", 502)


@bp.get("/oidc/callback")
def oidc_callback():
    """The provider's answer: exchange the code, verify the ID token, log the person in. Any
    failure is refused with nothing changed (no login bound, no session)."""
    if not configured():
        return _not_configured()
    try:
        token = client().authorize_access_token()
    except (AuthlibBaseError, JoseError) as exc:
        detail = getattr(exc, "description", None) or getattr(exc, "error", None) or str(exc)
        return _refused(f"{type(exc).__name__}: {detail}", 401)
    except requests.RequestException as exc:
        return _refused(f"the provider could not be reached ({type(exc).__name__})", 502)
    claims = token.get("userinfo")
    if not claims:  # Authlib checks the ID token only when it sent a nonce: insist on one
        return _refused("no verified ID token", 401)
    user, why = person_for(dict(claims))
    if user is None:
        return _refused(why, 403)
    if not user.active:
        return _refused("this login is deactivated: ask an owner", 403)
    if why == "bind":
        user.oidc_issuer, user.oidc_subject = str(claims["iss"]), str(claims["sub"])
        if user.must_change_password:  # the invitation's one-time password stops working
            user.set_password(secrets.token_urlsafe(32))
            user.must_change_password = False
        audit.record(f"admin:{user.username}", "oidc_bind", target=f"user:{user.username}",
                     detail={"issuer": user.oidc_issuer})
    audit.record(f"admin:{user.username}", "oidc_login", target=f"user:{user.username}")
    db.session.commit()
    login_user(user)
    response = redirect(session.pop(NEXT, None) or url_for("admin.index"))
    give_device_cookie(response, user.username)
    return response


@bp.context_processor
def _oidc_button() -> dict[str, object]:
    """The login page's "Sign in with ..." button, only where a provider is configured."""
    return {"oidc_provider": provider_name() if configured() else None}
