"""``humanlike retention``: replace the platform ids of participants past their experiment's
``[privacy] retention_days`` by keyed hashes (run it from cron; audited)."""

from __future__ import annotations

import datetime as dt

import click

from humanlike.cli import person
from humanlike.cli.app_context import database_option, make_app
from humanlike.cli.server_key import require_server_key


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


@click.command("retention")
@click.argument("experiments", nargs=-1)
@click.option("--experiment", "experiment_paths", multiple=True, type=click.Path(dir_okay=False),
              help="experiment.toml to read [privacy] from (default: HUMANLIKE_EXPERIMENTS).")
@click.option("--now", type=click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S"]),
              default=None, help="Take this UTC time as now (default: the clock).")
@database_option
def command(experiments: tuple[str, ...], experiment_paths: tuple[str, ...],
            now: dt.datetime | None, database_url: str | None) -> None:
    """Apply the retention period of EXPERIMENTS (default: every served experiment); needs the
    server's SECRET_KEY."""
    from humanlike.server.audit import cli_actor
    from humanlike.server.rights import retention
    from humanlike.server.study import experiments as registry

    require_server_key("retention")
    app = make_app(experiment_paths, database_url=database_url)
    with app.app_context():
        served = registry.registry()
        slugs = list(experiments) or sorted(served)
        unknown = [s for s in slugs if s not in served]
        if unknown:
            raise click.ClickException(f"not served here (give --experiment): {', '.join(unknown)}")
        for slug in slugs:
            person.require("delete", slug)
        for slug in slugs:
            try:
                done = retention.run(slug, cli_actor(), _utc(now))
            except LookupError as exc:
                raise click.ClickException(str(exc)) from exc
            if done.retention_days is None:
                click.echo(f"{slug}: no [privacy] retention_days; nothing replaced")
                continue
            assert done.cutoff is not None
            click.echo(f"{slug}: {len(done.public_ids)} participants' platform ids replaced by keyed "
                       f"hashes (last active before {done.cutoff.isoformat()}; audit log: retention)")
