"""``humanlike db upgrade``: bring the database schema to the newest migration."""

from __future__ import annotations

import click

from humanlike.cli.app_context import database_option, make_app


@click.group("db")
def command() -> None:
    """Database schema management (Alembic migrations via Flask-Migrate)."""


@command.command("upgrade")
@database_option
def upgrade(database_url: str | None) -> None:
    """Apply all migrations."""
    from humanlike.server import database

    app = make_app(database_url=database_url)
    database.upgrade(app)
    click.echo(f"database at newest revision: {app.config['SQLALCHEMY_DATABASE_URI'].split('@')[-1]}")
