"""``humanlike import psiturk SOURCE``: bring a psiTurk study's participants, statuses and data in."""

from __future__ import annotations

from pathlib import Path

import click

from humanlike.cli.app_context import database_option, make_app


@click.command("psiturk")
@click.argument("source")
@click.option("--slug", default=None,
              help="Experiment to import into (default: psiturk-<file name>; the slug `humanlike "
                   "serve --psiturk` uses for a project folder is psiturk-<folder name>).")
@click.option("--table", default=None,
              help="psiTurk's assignments table (default: the table with psiTurk's columns, "
                   "whatever its name: assignments, turkdemo, ...).")
@database_option
def command(source: str, slug: str | None, table: str | None, database_url: str | None) -> None:
    """Import SOURCE, a psiTurk participants.db (SQLite file) or a database URL."""
    import re

    from tqdm import tqdm

    from humanlike.server import database
    from humanlike.server.psiturk.transfer import ImportProblem, import_psiturk

    app = make_app(database_url=database_url)
    database.upgrade(app)
    if slug is None:
        stem = Path(source).stem if "://" not in source else source.rsplit("/", 1)[-1]
        slug = ("psiturk-" + re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-"))[:64]
    with app.app_context():
        try:
            result = import_psiturk(source, slug, table, progress=lambda rows, n: tqdm(
                rows, total=n, unit="participant", desc="importing"))
        except ImportProblem as exc:
            raise click.ClickException(str(exc)) from exc
    for problem in result.problems:
        click.secho(f"warning: {problem}", fg="yellow", err=True)
    click.echo(f"{result.imported} participants ({result.trials} trial records) imported from "
               f"table {result.table!r} into experiment {slug!r}; {result.skipped} already there")
