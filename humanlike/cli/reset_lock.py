"""``humanlike reset-lock``: let a participant who is refused as "already taken part" resume."""

from __future__ import annotations

import click

from humanlike.cli import person
from humanlike.cli.app_context import database_option, make_app


@click.command("reset-lock")
@click.argument("slug")
@click.argument("platform_id")
@click.option("--reason", default="", help="Why (kept in the audit log).")
@database_option
def command(slug: str, platform_id: str, reason: str, database_url: str | None) -> None:
    """Clear the session (Prolific) or assignment (MTurk) bound to PLATFORM_ID in SLUG, so that the
    next study link with this id and any SESSION_ID / assignmentId resumes the same participant
    (once: that new id is then bound). Stored trials and the status are kept; audit-logged."""
    import sqlalchemy as sa

    from humanlike.server import audit, database
    from humanlike.server.extensions import db
    from humanlike.server.participants import resume
    from humanlike.server.tables.core import Experiment, Participant

    app = make_app(database_url=database_url)
    database.upgrade(app)
    with app.app_context():
        participant = db.session.execute(
            sa.select(Participant).join(Experiment)
            .where(Experiment.slug == slug, Participant.platform_id == platform_id)
        ).scalar_one_or_none()
        if participant is None:
            raise click.ClickException(f"no participant {platform_id!r} in experiment {slug!r}")
        person.require("act", participant.experiment)
        if not resume.resumable(participant):
            raise click.ClickException(
                f"participant {platform_id!r} is {participant.status!r}: only an unfinished "
                "participant (allocated, consented, started) can resume")
        cleared = resume.reset_lock(participant)
        audit.record(audit.cli_actor(), "reset_lock", experiment=slug, target=platform_id,
                     detail={"reason": reason, "cleared": cleared,
                             "participant": participant.public_id})
        db.session.commit()
    click.echo(f"lock reset for {platform_id!r} in {slug!r}: the next study link with this id "
               "resumes where it stopped")
