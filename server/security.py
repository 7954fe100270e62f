"""Web hardening: security headers (CSP with a per-request nonce), rate limits (Flask-Limiter for
study entry, with a participant-friendly "try again in N seconds" page), failed-login limits kept in
the database (shared by every worker, per account and address, with device cookies so a flood from
the admin's own address does not lock the admin out), the link-preview filter on study links, and
ProxyFix for running behind a TLS proxy."""

from __future__ import annotations

import datetime as dt
import math
import re
import secrets
import time
from functools import cache

import sqlalchemy as sa
from flask import Flask, Response, current_app, g, make_response, render_template, request
from flask_babel import gettext, ngettext
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from itsdangerous import BadSignature, URLSafeSerializer
from limits import parse_many
from werkzeug.exceptions import TooManyRequests
from werkzeug.middleware.proxy_fix import ProxyFix

# one limiter per process, for /start; storage comes from RATELIMIT_STORAGE_URI (memory:// by
# default: counts are per process, so N gunicorn workers allow up to N times the limit; set
# redis://... to share). Login failures are counted in the database instead (always shared).
limiter = Limiter(key_func=get_remote_address)

LOGIN_FAILED = "login_failed"
"""Audit action of a failed login from a browser without a device cookie (actor: its address)."""
LOGIN_FAILED_DEVICE = "login_failed_device"
"""Audit action of a failed login from a browser with a device cookie (actor: the device)."""
DEVICE_COOKIE = "humanlike_device"
DEVICE_MAX_AGE = 180 * 24 * 3600

#: User-Agent fragments of link-preview and crawler bots (case-insensitive).
PREVIEW_AGENTS = (
    "slackbot", "slack-imgproxy", "facebookexternalhit", "facebot", "twitterbot", "discordbot",
    "whatsapp", "telegrambot", "linkedinbot", "googlebot", "bingbot", "applebot", "skypeuripreview",
    "embedly", "redditbot", "pinterest", "vkshare", "mattermost", "iframely", "bot/", "crawler",
    "spider", "curl/", "wget/",  # not httpx/requests: simulated participants use them
)
_PREVIEW = re.compile("|".join(re.escape(a) for a in PREVIEW_AGENTS), re.IGNORECASE)


def is_link_preview(method: str, user_agent: str | None) -> bool:
    """True for HEAD requests and for User-Agents of known link-preview bots and crawlers."""
    return method == "HEAD" or bool(user_agent and _PREVIEW.search(user_agent))


def csp_nonce() -> str:
    """The nonce of this request's inline scripts (one random value per response)."""
    if "csp_nonce" not in g:
        g.csp_nonce = secrets.token_urlsafe(16)
    return str(g.csp_nonce)


def content_security_policy(admin: bool, nonce: str | None, frame_ancestors: str, form_action: str) -> str:
    """The CSP of a page: own scripts plus this page's nonce; framing by ``frame_ancestors`` only."""
    scripts = "'self'" + (f" 'nonce-{nonce}'" if nonce else "")
    return "; ".join([
        "default-src 'self'",
        f"script-src {scripts}",
        "style-src 'self' 'unsafe-inline'",  # jsPsych and our plugins set style attributes
        "img-src 'self' data: blob:",
        "media-src 'self' blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'" + ("" if admin else f" {form_action}"),
        "frame-ancestors " + ("'none'" if admin else frame_ancestors),
    ])


def _set_headers(response: Response) -> Response:
    config = current_app.config
    admin = request.blueprint == "admin"
    response.headers.setdefault("Content-Security-Policy", content_security_policy(
        admin, g.get("csp_nonce"), config["FRAME_ANCESTORS"], config["FORM_ACTION"]))
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    if admin:
        response.headers.setdefault("X-Frame-Options", "DENY")
    if config["PRODUCTION"]:
        response.headers.setdefault("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
    return response


def _preview_filter():
    """A link preview of a study link gets a harmless page and allocates nobody."""
    if request.endpoint == "participant.start" and is_link_preview(
            request.method, request.headers.get("User-Agent")):
        return render_template("message.html", title="Study link",
                               message="Open this link in your browser to take part."), 200
    return None


@cache
def dummy_password_hash() -> str:
    """A hash to check passwords against when the username is unknown (same cost as a real one)."""
    from werkzeug.security import generate_password_hash

    return generate_password_hash(secrets.token_hex(16))


@limiter.request_filter
def _limits_off() -> bool:
    """Exempt every request of an app whose ``RATELIMIT_ENABLED`` is off."""
    return not current_app.config.get("RATELIMIT_ENABLED", True)


def start_limit() -> str:
    """Entry rate limit per client address (config ``START_RATE_LIMIT``)."""
    return str(current_app.config["START_RATE_LIMIT"])


def login_limit() -> str:
    """Failed admin logins per account and address, and per device cookie (config
    ``LOGIN_RATE_LIMIT``)."""
    return str(current_app.config["LOGIN_RATE_LIMIT"])


def _devices() -> URLSafeSerializer:
    return URLSafeSerializer(current_app.config["SECRET_KEY"], salt="humanlike-login-device")


def device_of(username: str) -> str | None:
    """The id of this browser's device cookie when it is valid and was issued to ``username``
    (after a correct login), else None (OWASP, "Slow down online guessing attacks with device
    cookies")."""
    raw = request.cookies.get(DEVICE_COOKIE)
    if not raw:
        return None
    try:
        value = _devices().loads(raw)
    except BadSignature:
        return None
    if not isinstance(value, dict) or value.get("u") != username:
        return None
    return str(value.get("d") or "") or None


def give_device_cookie(response: Response, username: str) -> None:
    """After a correct login: mark this browser as one the admin uses (kept if already valid)."""
    if device_of(username) is not None:
        return
    value = _devices().dumps({"u": username, "d": secrets.token_hex(8)})
    response.set_cookie(DEVICE_COOKIE, value, max_age=DEVICE_MAX_AGE, httponly=True,
                        samesite="Strict", path="/admin/",
                        secure=bool(current_app.config.get("SESSION_COOKIE_SECURE")
                                    or current_app.config.get("PRODUCTION")))


def _failures(action: str, since: dt.datetime, actor: str, target: str | None) -> int:
    from humanlike.server.extensions import db
    from humanlike.server.tables.core import AuditEntry

    stmt = sa.select(sa.func.count()).select_from(AuditEntry).where(
        AuditEntry.action == action, AuditEntry.time >= since, AuditEntry.actor == actor)
    if target is not None:
        stmt = stmt.where(AuditEntry.target == target)
    return int(db.session.execute(stmt).scalar_one())


def login_wait(username: str, address: str) -> int:
    """Seconds this login attempt must wait (0: it may try). A browser with the user's device
    cookie is counted on its own (``LOGIN_RATE_LIMIT``); any other by account and address
    (``LOGIN_RATE_LIMIT``) and by address (``LOGIN_ADDRESS_RATE_LIMIT``). Counts are the audit
    log's failed logins, so every worker sees the same ones."""
    config = current_app.config
    if not config.get("RATELIMIT_ENABLED", True):
        return 0
    device = device_of(username)
    checks: list[tuple[str, str, str, str | None]]
    if device is not None:
        checks = [(login_limit(), LOGIN_FAILED_DEVICE, f"device:{device}", username)]
    else:
        checks = [(login_limit(), LOGIN_FAILED, f"address:{address}", username),
                  (str(config["LOGIN_ADDRESS_RATE_LIMIT"]), LOGIN_FAILED, f"address:{address}",
                   None)]
    now = dt.datetime.now(dt.UTC)
    for spec, action, actor, target in checks:
        for item in parse_many(spec):
            window = dt.timedelta(seconds=item.get_expiry())
            if _failures(action, now - window, actor, target) >= item.amount:
                return item.get_expiry()
    return 0


def record_login_failure(username: str, address: str) -> None:
    """Count a failed login (an audit row; the caller commits)."""
    from humanlike.server import audit

    device = device_of(username)
    if device is not None:
        audit.record(f"device:{device}", LOGIN_FAILED_DEVICE, target=username[:128],
                     detail={"address": address})
    else:
        audit.record(f"address:{address}"[:120], LOGIN_FAILED, target=username[:128])


def _too_many_requests(exc: TooManyRequests):
    """A participant stopped by the /start limit gets a page saying when to retry (labs and
    classrooms share one address); elsewhere the plain page."""
    if request.endpoint != "participant.start":
        return render_template("message.html", title=exc.name, message=exc.description), 429
    limit = limiter.current_limit
    wait = 60
    if limit is not None:
        wait = min(limit.limit.get_expiry(), max(1, math.ceil(limit.reset_at - time.time())))
    response = make_response(render_template(
        "message.html", title=gettext("Please wait a moment"),
        message=ngettext("Many people are starting this study from the same network (a lab, a "
                         "classroom or an office) right now. Please try again in about %(num)d "
                         "second: reload this page then. Nothing is lost.",
                         "Many people are starting this study from the same network (a lab, a "
                         "classroom or an office) right now. Please try again in about %(num)d "
                         "seconds: reload this page then. Nothing is lost.", wait)), 429)
    response.headers["Retry-After"] = str(wait)
    return response


def init_app(app: Flask) -> None:
    """Install ProxyFix, the limiter, the link-preview filter and the headers (after blueprints)."""
    proxies = int(app.config["PROXY_COUNT"])
    if proxies > 0:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies)  # type: ignore[method-assign]
    dummy_password_hash()  # computed once per process, before any login can be timed
    limiter.init_app(app)
    # the limiter is one object for every app in the process, and init_app sets its ``enabled``
    # from the app being built: each request asks its own app instead (tests build many apps)
    limiter.enabled = True
    app.before_request(_preview_filter)
    start = app.view_functions["participant.start"]
    app.view_functions["participant.start"] = limiter.limit(start_limit)(start)  # type: ignore[assignment]
    app.register_error_handler(429, _too_many_requests)
    app.after_request(_set_headers)
    app.jinja_env.globals["csp_nonce"] = csp_nonce
