"""``humanlike serve``: run experiments (development server; in production granian or gunicorn
behind Caddy, docs/deploy.md)."""

from __future__ import annotations

import click

from humanlike.cli.app_context import database_option, make_app


def echo_links(base: str, slug: str, heading: str) -> None:
    """Print an experiment's local link under ``heading`` and the study URL to paste into Prolific,
    with the placeholders Prolific fills (``deploy.prolific.study_link``): ``serve`` and ``demo``."""
    from humanlike.deploy.prolific import study_link

    click.echo(f"{heading}{base}/start/{slug}")
    click.echo(f"  Prolific study URL:  {study_link(base, slug)}")


@click.command("serve")
@click.option("--experiment", "experiments", multiple=True,
              type=click.Path(exists=True, dir_okay=False), help="Experiment spec (TOML); repeatable.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--allow-spec-change", is_flag=True, default=False,
              help="Give new participants an edited spec even though participants exist "
                   "(those already allocated keep their version). Config: ALLOW_SPEC_CHANGE.")
@click.option("--psiturk", "psiturk_project", default=None,
              type=click.Path(exists=True, file_okay=False),
              help="Serve a psiTurk 3 project folder as it is (config.txt, templates/, static/, "
                   "custom.py) at /ad, /pub, /exp ... Config: PSITURK_PROJECT.")
@click.option("--panel/--no-panel", default=True, show_default=True,
              help="Compute the dashboard's live analysis panel in a background thread of this "
                   "server (production: `humanlike panel-worker` beside the app servers).")
@database_option
def command(experiments: tuple[str, ...], host: str, port: int, allow_spec_change: bool,
            psiturk_project: str | None, panel: bool, database_url: str | None) -> None:
    """Serve the experiments at http://HOST:PORT/start/<slug> (and a psiTurk project at /ad)."""
    from humanlike.server import database
    from humanlike.server import experiments as registry

    if not experiments and not psiturk_project:
        raise click.UsageError("give --experiment SPEC (repeatable) and/or --psiturk FOLDER")
    app = make_app(experiments, database_url, psiturk_project)
    if allow_spec_change:
        app.config["ALLOW_SPEC_CHANGE"] = True
    database.upgrade(app)
    for problem in registry.sync_all(app):
        click.secho(f"warning: {problem}", fg="yellow", err=True)
    for slug, loaded in app.extensions["humanlike"].items():
        version = loaded.version_hash[:12]
        echo_links(f"http://{host}:{port}", slug, f"experiment {slug} (spec version {version}): ")
    if psiturk_project:  # its config and custom.py warnings were logged once as it loaded
        click.echo(f"psiTurk project {psiturk_project}: http://{host}:{port}/ad?hitId=debugHIT"
                   "&assignmentId=debugASSIGN&workerId=debugWORKER&mode=debug")
    if panel and "panel_worker" not in app.extensions:
        from humanlike.server.admin.panel import start_worker

        start_worker(app)
    app.run(host=host, port=port, threaded=True)
