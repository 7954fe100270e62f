"""``humanlike sweep-timeouts``: mark participants idle past their spec's timeout as timed out."""

from __future__ import annotations

import click

from humanlike.cli.app_context import database_option, make_app


@click.command("sweep-timeouts")
@database_option
def command(database_url: str | None) -> None:
    """Set ``timed_out`` on participants idle longer than ``timeout_minutes`` (run it from cron;
    a participant who comes back is resumed and nothing they send is lost)."""
    from humanlike.server.participants import timeouts

    app = make_app(database_url=database_url)
    with app.app_context():
        counts = timeouts.sweep()
    for slug, n in sorted(counts.items()):
        click.echo(f"{slug}: {n} timed out")
