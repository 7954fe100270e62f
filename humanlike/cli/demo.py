"""``humanlike demo``: build the demo experiment, prepare the database, print the links, serve."""

from __future__ import annotations

import secrets
from pathlib import Path

import click

from humanlike.cli.app_context import database_option, make_app


@click.command("demo")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--prepare-only", is_flag=True, help="Build stimuli and database, then exit.")
@click.option("--rebuild", is_flag=True, help="Rebuild the demo stimuli even if present.")
@database_option
def command(host: str, port: int, prepare_only: bool, rebuild: bool, database_url: str | None) -> None:
    """Serve the demo experiment with participant links for every platform."""
    import sqlalchemy as sa

    from humanlike.server import database, experiments
    from humanlike.server.demo import DEMO_SLUG, build_demo, demo_is_current
    from humanlike.server.extensions import db
    from humanlike.server.models import AdminUser

    probe = make_app(database_url=database_url)
    demo_dir = Path(probe.instance_path) / "demo"
    spec_path = demo_dir / "experiment.toml"
    if rebuild or not demo_is_current(demo_dir):
        click.echo(f"building the demo experiment in {demo_dir} ...")
        build_demo(demo_dir)
    app = make_app([str(spec_path)], database_url)
    database.upgrade(app)
    experiments.sync_all(app)
    password_file = Path(app.instance_path) / "demo_admin_password"
    with app.app_context():
        user = db.session.execute(
            sa.select(AdminUser).where(AdminUser.username == "admin")
        ).scalar_one_or_none()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = AdminUser(username="admin")
            user.set_password(password)
            db.session.add(user)
            db.session.commit()
            password_file.write_text(password + "\n")
            password_file.chmod(0o600)
    base = f"http://{host}:{port}"
    link = f"{base}/start/{DEMO_SLUG}"
    click.echo("\nhumanlike demo experiment")
    click.echo(f"  local link:          {link}")
    click.echo(f"  Prolific-style link: {link}?PROLIFIC_PID=demo-{secrets.token_hex(3)}"
               "&STUDY_ID=demo-study&SESSION_ID=demo-session")
    click.echo(f"  MTurk-sandbox link:  {link}?workerId=DEMO{secrets.token_hex(3).upper()}"
               "&assignmentId=DEMOASSIGN1&hitId=DEMOHIT1&turkSubmitTo=https://workersandbox.mturk.com")
    click.echo(f"  MTurk preview:       {link}?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=DEMOHIT1")
    click.echo(f"  admin pages:         {base}/admin/  (user 'admin', password in {password_file};")
    click.echo("                       add your own with `humanlike create-admin`)")
    click.echo(f"  export the data:     humanlike export {DEMO_SLUG} --out demo_out\n")
    if prepare_only:
        return
    app.run(host=host, port=port, threaded=True)
