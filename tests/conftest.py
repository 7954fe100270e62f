"""Shared fixtures: every database test runs on SQLite and on PostgreSQL (mandatory when CI=true)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

# boto's credential chain must never ask the EC2 instance-metadata endpoint from a test
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

PG_URL = os.environ.get("HUMANLIKE_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
ON_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _pg_reachable() -> str | None:
    """None when PostgreSQL answers, else the reason."""
    try:
        import psycopg

        dsn = PG_URL.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


_PG_PROBLEM = _pg_reachable()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """A fresh, empty database: a SQLite file, or a private schema in the PostgreSQL test database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.sqlite'}"
        return
    if _PG_PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true needs PostgreSQL at {PG_URL}, but it is unreachable: {_PG_PROBLEM}")
        pytest.skip(f"PostgreSQL unreachable: {_PG_PROBLEM}")
    import psycopg

    schema = "t_" + secrets.token_hex(6)
    dsn = PG_URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="session")
def chromium():
    """One headless Debian Chromium for the whole test session, driven by Playwright (one fixture
    for every folder: a second sync_playwright() in the same session fails inside its event loop)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make test` (it installs Debian's chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
