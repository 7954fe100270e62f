"""Web hardening: security headers (CSP with a per-request nonce), rate limits (Flask-Limiter), the
link-preview filter on study links, and ProxyFix for running behind a TLS proxy."""

from __future__ import annotations

import re
import secrets
from functools import cache

from flask import Flask, Response, current_app, g, render_template, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from werkzeug.middleware.proxy_fix import ProxyFix

# one limiter per process; storage comes from RATELIMIT_STORAGE_URI (memory:// by default: counts
# are per process, so N gunicorn workers allow up to N times the limit; set redis://... to share)
limiter = Limiter(key_func=get_remote_address)

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


def start_limit() -> str:
    """Entry rate limit per client address (config ``START_RATE_LIMIT``)."""
    return str(current_app.config["START_RATE_LIMIT"])


def login_limit() -> str:
    """Admin login attempts per client address (config ``LOGIN_RATE_LIMIT``)."""
    return str(current_app.config["LOGIN_RATE_LIMIT"])


def init_app(app: Flask) -> None:
    """Install ProxyFix, the limiter, the link-preview filter and the headers (after blueprints)."""
    proxies = int(app.config["PROXY_COUNT"])
    if proxies > 0:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies)  # type: ignore[method-assign]
    dummy_password_hash()  # computed once per process, before any login can be timed
    limiter.init_app(app)
    app.before_request(_preview_filter)
    start = app.view_functions["participant.start"]
    app.view_functions["participant.start"] = limiter.limit(start_limit)(start)  # type: ignore[assignment]
    app.after_request(_set_headers)
    app.jinja_env.globals["csp_nonce"] = csp_nonce
