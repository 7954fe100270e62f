"""Shared option handling for CLI commands that need an app (experiments + database)."""

from __future__ import annotations

from collections.abc import Sequence

import click
from flask import Flask


def make_app(experiment_paths: Sequence[str] = (), database_url: str | None = None,
             psiturk_project: str | None = None) -> Flask:
    """Build the app for a CLI command; a bad spec (or psiTurk project) becomes a CLI error naming
    the file and field."""
    from humanlike.server import create_app
    from humanlike.server.config import normalise_database_url
    from humanlike.server.psiturk.project import PsiturkProjectError
    from humanlike.server.study.spec import SpecError

    config: dict = {"EXPERIMENT_PATHS": list(experiment_paths)} if experiment_paths else {}
    if database_url:
        config["SQLALCHEMY_DATABASE_URI"] = normalise_database_url(database_url)
    if psiturk_project:
        config["PSITURK_PROJECT"] = psiturk_project
    try:
        return create_app(config or None)
    except (SpecError, PsiturkProjectError) as exc:
        raise click.ClickException(str(exc)) from exc


database_option = click.option(
    "--database-url", envvar="DATABASE_URL", default=None,
    help="SQLAlchemy URL (default: SQLite in the instance folder; env DATABASE_URL).",
)
