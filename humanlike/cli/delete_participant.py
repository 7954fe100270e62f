"""``humanlike delete-participant SLUG ID``: delete a participant with their trials and events."""

from __future__ import annotations

import click

from humanlike.cli import person
from humanlike.cli.app_context import database_option, make_app
from humanlike.cli.server_key import require_server_key


@click.command("delete-participant")
@click.argument("experiment")
@click.argument("participant")
@click.option("--reason", default="", help="Why (kept in the audit log), e.g. 'withdrawal request'.")
@click.option("--yes", is_flag=True, default=False, help="Delete without asking.")
@database_option
def command(experiment: str, participant: str, reason: str, yes: bool,
            database_url: str | None) -> None:
    """Delete PARTICIPANT (public id or platform id) of EXPERIMENT, audit-logged."""
    from humanlike.server.audit import cli_actor
    from humanlike.server.rights.deletion import count_rows, delete_participant, find_participant

    require_server_key("delete-participant")
    app = make_app(database_url=database_url)
    with app.app_context():
        try:
            row = find_participant(experiment, participant)
        except LookupError as exc:
            raise click.ClickException(str(exc)) from exc
        person.require("delete", row.experiment)
        n_trials, n_events = count_rows(row)
        if not yes:
            click.confirm(f"Delete participant {row.public_id} of {experiment} ({row.platform}, "
                          f"status {row.status}) with {n_trials} trials and {n_events} events? "
                          "This cannot be undone", abort=True)
        done = delete_participant(row, cli_actor(), reason)
    click.echo(f"deleted participant {done.public_id} of {experiment}: {done.n_trials} trials, "
               f"{done.n_events} events (audit log: delete_participant)")
