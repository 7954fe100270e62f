"""The server's own ``SECRET_KEY`` for CLI commands that write keyed hashes into the database
(retention, deletion, withdrawals): without it a command would hash under a new development key,
and the server could never match those hashes again."""

from __future__ import annotations

import os

import click


def require_server_key(command: str) -> None:
    """Refuse (a CLI error, nothing changed) unless ``SECRET_KEY`` is set in the environment."""
    if not os.environ.get("SECRET_KEY"):
        raise click.ClickException(
            f"SECRET_KEY is not set: `humanlike {command}` writes keyed hashes of platform ids "
            "that the server must match later, so it runs only with the server's own key; nothing "
            "was changed. Set SECRET_KEY as the server has it (production: the environment file, "
            "e.g. /etc/humanlike/humanlike.env; development: the instance folder's secret_key file)")
