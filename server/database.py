"""Database set-up: SQLite pragmas (WAL), schema upgrade, and the ``/healthz`` probe helper."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Flask
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
