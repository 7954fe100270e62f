"""``humanlike serve``: run experiments (development server; gunicorn in production)."""

from __future__ import annotations

import click

from humanlike.cli.app_context import database_option, make_app


@click.command("serve")
@click.option("--experiment", "experiments", multiple=True, required=True,
              type=click.Path(exists=True, dir_okay=False), help="Experiment spec (TOML); repeatable.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--allow-spec-change", is_flag=True, default=False,
              help="Give new participants an edited spec even though participants exist "
                   "(those already allocated keep their version). Config: ALLOW_SPEC_CHANGE.")
@database_option
def command(experiments: tuple[str, ...], host: str, port: int, allow_spec_change: bool,
            database_url: str | None) -> None:
    """Serve the experiments at http://HOST:PORT/start/<slug>."""
    from humanlike.server import database
    from humanlike.server import experiments as registry

    app = make_app(experiments, database_url)
    if allow_spec_change:
        app.config["ALLOW_SPEC_CHANGE"] = True
    database.upgrade(app)
    for problem in registry.sync_all(app):
        click.secho(f"warning: {problem}", fg="yellow", err=True)
    for slug, loaded in app.extensions["humanlike"].items():
        version = loaded.version_hash[:12]
        click.echo(f"experiment {slug} (spec version {version}): http://{host}:{port}/start/{slug}")
    app.run(host=host, port=port, threaded=True)
