"""``humanlike withdrawals reapply``: delete again the participants the withdrawal journal names
(after restoring a backup that predates their withdrawal; ``deploy/restore.sh`` runs it)."""

from __future__ import annotations

from pathlib import Path

import click

from humanlike.cli.app_context import database_option, make_app
from humanlike.cli.server_key import require_server_key


@click.group("withdrawals")
def command() -> None:
    """The withdrawal ledger (docs/participants-rights.md)."""


@command.command("reapply")
@click.option("--journal", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The withdrawal journal (default: HUMANLIKE_WITHDRAWALS, else "
                   "withdrawals.jsonl in the instance folder).")
@database_option
def reapply(journal: Path | None, database_url: str | None) -> None:
    """Delete again every participant the journal names, and restore its ledger rows; needs the
    server's SECRET_KEY. Idempotent."""
    from humanlike.server.audit import cli_actor
    from humanlike.server.rights import ledger as withdrawal_ledger

    require_server_key("withdrawals reapply")
    app = make_app(database_url=database_url)
    with app.app_context():
        path = journal or withdrawal_ledger.journal_path()
        if not path.is_file():
            click.echo(f"no withdrawal journal at {path}: nothing to re-apply (no withdrawal was "
                       "made, or HUMANLIKE_WITHDRAWALS names another file)")
            return
        try:
            done = withdrawal_ledger.reapply(withdrawal_ledger.read_journal(path), cli_actor())
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
    click.echo(f"{done.entries} withdrawal(s) re-applied: {len(done.deleted)} participant(s) "
               f"deleted again, {done.added} ledger row(s) restored (journal {path})")
