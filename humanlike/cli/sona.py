"""``humanlike sona grants [SLUG] [--retry]``: SONA's server-side credit grants, listed or sent."""

from __future__ import annotations

import click

from humanlike.cli.app_context import database_option, make_app


@click.group("sona")
def command() -> None:
    """SONA Systems: the server-side credit grants of studies with a ``server_completion_url``."""


@command.command("grants")
@click.argument("slug", required=False)
@click.option("--retry", is_flag=True,
              help="Send every grant not yet credited (failed ones too); safe to repeat: SONA "
                   "credits a survey code once.")
@database_option
def grants(slug: str | None, retry: bool, database_url: str | None) -> None:
    """List each grant (participant, survey code, state, attempts, last error); with --retry send
    the ones not credited first (run it from cron). Exits 1 while any grant is not credited."""
    from humanlike.server import audit
    from humanlike.server.sources import sona

    app = make_app(database_url=database_url)
    with app.app_context():
        sent = sona.retry(slug, actor=audit.cli_actor()) if retry else {}
        rows = sona.grants(slug)
    for row in rows:
        mark = " (sent now)" if row["participant"] in sent else ""
        click.echo(f"{row['experiment']}\t{row['participant']}\t{row['survey_code']}\t"
                   f"{row['state']}{mark}\tattempts={row['attempts']}\t{row['last_error'] or ''}")
    waiting = [r for r in rows if r["state"] != "granted"]
    click.echo(f"{len(rows)} grant(s), {len(rows) - len(waiting)} credited, "
               f"{len(waiting)} not credited")
    if waiting:
        raise SystemExit(1)
