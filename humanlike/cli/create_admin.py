"""``humanlike create-admin``: add an owner's dashboard login (or reset a login's password)."""

from __future__ import annotations

import click

from humanlike.cli.app_context import database_option, make_app


@click.command("create-admin")
@click.option("--username", prompt=True)
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True,
              envvar="HUMANLIKE_ADMIN_PASSWORD")
@database_option
def command(username: str, password: str, database_url: str | None) -> None:
    """Create an owner (every study, the users page) with a hashed password, or reset an existing
    login's password (its role stays; other roles are given on the dashboard's users page)."""
    import sqlalchemy as sa

    from humanlike.server import database
    from humanlike.server.extensions import db
    from humanlike.server.tables.core import AdminUser

    if len(password) < 8:
        raise click.BadParameter("use at least 8 characters", param_hint="--password")
    app = make_app(database_url=database_url)
    database.upgrade(app)
    with app.app_context():
        user = db.session.execute(
            sa.select(AdminUser).where(AdminUser.username == username)
        ).scalar_one_or_none()
        created = user is None
        if created:
            user = AdminUser(username=username, role="owner")
            db.session.add(user)
        assert user is not None
        user.set_password(password)
        user.must_change_password = False  # the operator chose this password
        db.session.commit()
    click.echo(f"admin {username!r} {'created (owner)' if created else 'password reset'}")
