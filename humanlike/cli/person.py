"""Who a CLI command acts for (issue 40): ``humanlike --as LOGIN`` (or ``HUMANLIKE_USER``) names a
dashboard login whose permissions are checked before a command acts on a study; without it the
command runs as the server's operator (docs/lab.md, The command line)."""

from __future__ import annotations

from typing import Any

import click


def require(permission: str, experiment: Any) -> None:
    """Inside the app context: stop with a CLI error naming the login and the missing permission
    when the ``--as`` login may not do ``permission`` in ``experiment`` (a row or its slug)."""
    import sqlalchemy as sa

    from humanlike.server.audit import cli_user
    from humanlike.server.extensions import db
    from humanlike.server.lab.access import AccessDenied, Permission, require_cli
    from humanlike.server.tables.core import Experiment

    if cli_user() is None:
        return
    if isinstance(experiment, str):
        row = db.session.execute(sa.select(Experiment).where(Experiment.slug == experiment)
                                 ).scalar_one_or_none()
        if row is None:
            raise click.ClickException(f"no experiment {experiment!r} in the database")
        experiment = row
    try:
        require_cli(Permission(permission), experiment)
    except AccessDenied as exc:
        raise click.ClickException(f"--as {cli_user()}: {exc}; nothing was done") from exc
