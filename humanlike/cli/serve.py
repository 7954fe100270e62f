"""``humanlike serve``: run experiments (development server; gunicorn in production)."""

from __future__ import annotations

import click

from humanlike.cli.app_context import database_option, make_app


@click.command("serve")
@click.option("--experiment", "experiments", multiple=True, required=True,
              type=click.Path(exists=True, dir_okay=False), help="Experiment spec (TOML); repeatable.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@database_option
def command(experiments: tuple[str, ...], host: str, port: int, database_url: str | None) -> None:
    """Serve the experiments at http://HOST:PORT/start/<slug>."""
    from humanlike.server import database
    from humanlike.server import experiments as registry

    app = make_app(experiments, database_url)
    database.upgrade(app)
    registry.sync_all(app)
    for slug in app.extensions["humanlike"]:
        click.echo(f"experiment {slug}: http://{host}:{port}/start/{slug}")
    app.run(host=host, port=port, threaded=True)
