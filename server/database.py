"""Database set-up: SQLite pragmas (WAL), schema upgrade, and the ``/healthz`` probe helper."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import threading

import sqlalchemy as sa
from flask import Flask, current_app
from sqlalchemy.engine import Engine

from humanlike.server.extensions import db


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    """WAL journal, foreign keys, and a busy timeout so concurrent writers wait instead of failing."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def init_app(app: Flask) -> None:
    """Attach SQLite pragmas to the engine when the database is SQLite."""
    if app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite"):
        with app.app_context():
            engine: Engine = db.engine
            sa.event.listen(engine, "connect", _sqlite_pragmas)


class _SQLiteWriteLock:
    """Serialise SQLite writers of all server processes on an OS file lock next to the database.

    SQLite lets one writer in at a time; the others poll with growing sleeps (its busy handler),
    which shows up as 10-100 ms latency spikes when two gunicorn workers write at once. A blocking
    flock wakes the next writer the moment the lock is free. PostgreSQL needs none of this."""

    def __init__(self, database_path: str):
        self.path = database_path + ".writelock"
        self.local = threading.local()

    def __enter__(self):
        fd = getattr(self.local, "fd", None)
        if fd is None:
            fd = self.local.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.local.fd, fcntl.LOCK_UN)


def write_lock():
    """A context manager around a short write: the SQLite file lock, or nothing on PostgreSQL."""
    app = current_app
    lock = app.extensions.get("humanlike_write_lock")
    if lock is None:
        url = sa.engine.make_url(app.config["SQLALCHEMY_DATABASE_URI"])
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            lock = _SQLiteWriteLock(url.database)
        else:
            lock = contextlib.nullcontext()
        app.extensions["humanlike_write_lock"] = lock
    return lock


def autocommit_engine() -> Engine:
    """A second engine on the same database whose connections stay in autocommit mode, so a
    single-statement write costs one round trip (no BEGIN/COMMIT); created once per app."""
    app = current_app
    engine = app.extensions.get("humanlike_autocommit")
    if engine is None:
        engine = sa.create_engine(
            app.config["SQLALCHEMY_DATABASE_URI"], isolation_level="AUTOCOMMIT",
            pool_reset_on_return=None,  # nothing to roll back in autocommit mode
            **app.config.get("SQLALCHEMY_ENGINE_OPTIONS", {}),
        )
        if engine.dialect.name == "sqlite":
            sa.event.listen(engine, "connect", _sqlite_pragmas)
        app.extensions["humanlike_autocommit"] = engine
    return engine


def dispose(app: Flask) -> None:
    """Close every pooled connection of both engines (tests, shutdown)."""
    with app.app_context():
        db.session.remove()
        db.engine.dispose()
        extra = app.extensions.pop("humanlike_autocommit", None)
        if extra is not None:
            extra.dispose()


def upgrade(app: Flask) -> None:
    """Bring the schema to the newest migration (Alembic via Flask-Migrate)."""
    from flask_migrate import upgrade as alembic_upgrade

    with app.app_context():
        alembic_upgrade()


def ping() -> bool:
    """True when a trivial query succeeds."""
    try:
        db.session.execute(sa.text("SELECT 1"))
        return True
    except sa.exc.SQLAlchemyError:
        db.session.rollback()
        return False


def as_utc(value: dt.datetime | None) -> dt.datetime | None:
    """A stored time as aware UTC (SQLite hands back naive UTC)."""
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
