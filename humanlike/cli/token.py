"""``humanlike token``: personal tokens for the researcher API (issue 40): create one for a
login (shown once, or written to a file only its owner can read), list them, revoke one."""

from __future__ import annotations

import os
from pathlib import Path

import click

from humanlike.cli.app_context import database_option, make_app


@click.group("token")
def command() -> None:
    """Personal tokens for the researcher API (/api/research/v1; docs/lab.md)."""


@command.command("create")
@click.option("--user", "username", required=True, help="The dashboard login the token acts as.")
@click.option("--name", required=True, help="What the token is for (shown in lists).")
@click.option("--scopes", default="view", show_default=True,
              help="Space- or comma-separated: view act spend reveal delete.")
@click.option("--days", type=int, default=90, show_default=True, help="Days until it expires.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the token to this file (mode 600) instead of printing it.")
@database_option
def create(username: str, name: str, scopes: str, days: int, out: Path | None,
           database_url: str | None) -> None:
    """Create a token for USER; it is shown (or written) once: only its hash is stored."""
    import sqlalchemy as sa

    from humanlike.server import audit
    from humanlike.server.extensions import db
    from humanlike.server.lab.access import issue_token
    from humanlike.server.tables.core import AdminUser

    app = make_app(database_url=database_url)
    with app.app_context():
        user = db.session.execute(sa.select(AdminUser).where(AdminUser.username == username)
                                  ).scalar_one_or_none()
        if user is None or not user.active:
            raise click.BadParameter(f"no active login {username!r}", param_hint="--user")
        if audit.cli_user() not in (None, username):
            raise click.ClickException(f"--as {audit.cli_user()}: a token is made only for "
                                       "yourself")
        try:
            row, secret = issue_token(user, name, scopes.replace(",", " ").split(), days)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from exc
        db.session.flush()
        audit.record(audit.cli_actor(), "token_create", target=f"token:{row.id}",
                     detail={"name": row.name, "scopes": row.scopes, "user": username,
                             "expires_at": row.expires_at.isoformat()})
        db.session.commit()
        token_id, expires = row.id, row.expires_at
    if out is not None:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secret + "\n")
        click.echo(f"token {token_id} for {username} written to {out} (expires {expires:%Y-%m-%d})")
    else:
        click.echo(secret)
        click.echo(f"token {token_id} for {username}, expires {expires:%Y-%m-%d}: shown only now",
                   err=True)


@command.command("list")
@database_option
def list_tokens(database_url: str | None) -> None:
    """Every token: id, login, name, scopes, expiry, state (never the token itself)."""
    import sqlalchemy as sa

    from humanlike.server.extensions import db
    from humanlike.server.tables.api_tokens import ApiToken
    from humanlike.server.tables.core import AdminUser

    app = make_app(database_url=database_url)
    with app.app_context():
        for row, username in db.session.execute(
                sa.select(ApiToken, AdminUser.username)
                .join(AdminUser, AdminUser.id == ApiToken.user_id).order_by(ApiToken.id)):
            state = "revoked" if row.revoked_at else "live"
            click.echo(f"{row.id}\t{username}\t{row.name}\t{row.scopes}\t"
                       f"{row.expires_at:%Y-%m-%d}\t{state}")


@command.command("revoke")
@click.argument("token_id", type=int)
@database_option
def revoke(token_id: int, database_url: str | None) -> None:
    """Revoke TOKEN_ID: refused from the next request on."""
    from humanlike.server import audit
    from humanlike.server.extensions import db
    from humanlike.server.tables.api_tokens import ApiToken
    from humanlike.server.tables.core import utcnow

    app = make_app(database_url=database_url)
    with app.app_context():
        row = db.session.get(ApiToken, token_id)
        if row is None:
            raise click.BadParameter(f"no token {token_id}", param_hint="TOKEN_ID")
        if row.revoked_at is None:
            row.revoked_at = utcnow()
            audit.record(audit.cli_actor(), "token_revoke", target=f"token:{row.id}",
                         detail={"name": row.name})
            db.session.commit()
    click.echo(f"token {token_id} revoked")
