"""Configuration: defaults, then environment variables, then the caller's test config."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any


class ConfigError(RuntimeError):
    """The server cannot start safely with this configuration."""


def normalise_database_url(url: str) -> str:
    """postgres:// and postgresql:// URLs are sent to the psycopg 3 driver."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def database_url_from_env(instance_path: str) -> str:
    """``DATABASE_URL`` (normalised) or SQLite in the instance folder."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        return "sqlite:///" + str(Path(instance_path) / "humanlike.sqlite")
    return normalise_database_url(url)


def dev_secret_key(instance_path: str) -> str:
    """A random key kept in the instance folder so sessions survive restarts in development."""
    path = Path(instance_path) / "secret_key"
    if path.is_file():
        return path.read_text().strip()
    key = secrets.token_hex(32)
    path.write_text(key)
    path.chmod(0o600)
    return key


def build_config(instance_path: str, test_config: dict[str, Any] | None) -> dict[str, Any]:
    """Assemble the app config; in production refuse to run without ``SECRET_KEY``."""
    production = os.environ.get("HUMANLIKE_ENV", "development") == "production"
    config: dict[str, Any] = {
        "PRODUCTION": production,
        "SQLALCHEMY_DATABASE_URI": database_url_from_env(instance_path),
        # no pre-ping (it doubles the round trips of a trial); stale connections are recycled and
        # a failed request is a 5xx the browser retries
        "SQLALCHEMY_ENGINE_OPTIONS": {"pool_recycle": 1800},
        "MAX_CONTENT_LENGTH": 64 * 1024,
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_SECURE": production,
        "REMEMBER_COOKIE_SECURE": production,
        "WTF_CSRF_TIME_LIMIT": None,
        "EXPERIMENT_PATHS": [
            p for p in os.environ.get("HUMANLIKE_EXPERIMENTS", "").split(os.pathsep) if p
        ],
        "STIMULUS_MAX_AGE": 365 * 24 * 3600,
        # a psiTurk project folder to serve as it is (server/psiturk/)
        "PSITURK_PROJECT": os.environ.get("HUMANLIKE_PSITURK") or None,
        "ALLOW_SPEC_CHANGE": os.environ.get("HUMANLIKE_ALLOW_SPEC_CHANGE", "").lower()
        in ("1", "true", "yes"),
        # web hardening (server/security.py)
        "PROXY_COUNT": int(os.environ.get("HUMANLIKE_PROXY_COUNT", "0")),
        "FRAME_ANCESTORS": os.environ.get(
            "HUMANLIKE_FRAME_ANCESTORS", "https://www.mturk.com https://workersandbox.mturk.com"),
        "FORM_ACTION": os.environ.get(
            "HUMANLIKE_FORM_ACTION", "https://www.mturk.com https://workersandbox.mturk.com"),
        "RATELIMIT_ENABLED": os.environ.get("HUMANLIKE_RATE_LIMITS", "on") != "off",
        "RATELIMIT_STORAGE_URI": os.environ.get("HUMANLIKE_RATELIMIT_STORAGE", "memory://"),
        # sized for a lab or classroom of 100 starting at once behind one (NAT) address
        "START_RATE_LIMIT": os.environ.get("HUMANLIKE_START_RATE_LIMIT", "120 per minute;1200 per hour"),
        # failed logins, counted in the database: per account and address (a browser with the
        # account's device cookie apart), and per address over all usernames
        "LOGIN_RATE_LIMIT": os.environ.get("HUMANLIKE_LOGIN_RATE_LIMIT", "5 per minute;50 per hour"),
        "LOGIN_ADDRESS_RATE_LIMIT": os.environ.get("HUMANLIKE_LOGIN_ADDRESS_RATE_LIMIT",
                                                   "30 per minute;300 per hour"),
        # the live analysis panel's background thread (docs/dashboard.md)
        "PANEL_THREAD": os.environ.get("HUMANLIKE_PANEL_THREAD", "0") == "1",
        "PANEL_INTERVAL": float(os.environ.get("HUMANLIKE_PANEL_INTERVAL", "5")),
    }
    if os.environ.get("SECRET_KEY"):
        config["SECRET_KEY"] = os.environ["SECRET_KEY"]
    if test_config:
        if test_config.get("TESTING") and "RATELIMIT_ENABLED" not in test_config:
            config["RATELIMIT_ENABLED"] = False  # test apps share 127.0.0.1; limit tests enable them
        config.update(test_config)
    if not config.get("SECRET_KEY"):
        if config["PRODUCTION"]:
            raise ConfigError(
                "SECRET_KEY is not set: in production (HUMANLIKE_ENV=production) the server "
                "refuses to start without it; set SECRET_KEY to a long random string"
            )
        config["SECRET_KEY"] = dev_secret_key(instance_path)
    return config
