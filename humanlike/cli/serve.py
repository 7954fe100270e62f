"""``humanlike serve``: run experiments (development server; in production granian or gunicorn
behind Caddy, docs/deploy.md)."""

from __future__ import annotations

import click

from humanlike.cli.app_context import database_option, make_app


def entry_links(base: str, slug: str, declared: object = None) -> list[tuple[str, str]]:
    """``(label, URL)`` of the links a study's source uses (``server.platforms``): a study without
    a platform its local link; a Prolific or MTurk study the researcher's preview (a plain link
    admits only a logged-in researcher) and the platform's link with its placeholders."""
    from humanlike.server.platforms import Platform, resolve
    from humanlike.server.sources.prolific import study_link

    start = f"{base}/start/{slug}"
    if hasattr(declared, "model_dump"):  # the spec's [platform] table
        declared = declared.model_dump(exclude_none=True)  # type: ignore[union-attr]
    preset = resolve(declared)  # type: ignore[arg-type]
    if preset.platform is Platform.LOCAL:
        return [("local link", start), ("Prolific study URL", study_link(base, slug))]
    preview = ("researcher preview: log in to the admin pages first", start)
    if preset.platform is Platform.PROLIFIC:  # a plain link is only the researcher's preview
        return [preview, ("Prolific study URL", study_link(base, slug))]
    if preset.platform is Platform.SONA:
        return [("SONA study URL", f"{start}?{preset.participant_param}=%SURVEY_CODE%")]
    if preset.platform is Platform.LAB:
        return [("lab entry page", f"{base}/lab/{slug}")]
    if preset.platform is Platform.MTURK:
        return [preview, ("MTurk-format link",
                          f"{start}?workerId=WORKER&assignmentId=ASSIGNMENT&hitId=HIT")]
    params = [p for p in (preset.participant_param, preset.session_param, preset.study_param) if p]
    if preset.platform is Platform.CONNECT:
        return [("Connect study URL", start + "?" + "&".join(f"{p}={{{{%{p}%}}}}" for p in params))]
    if preset.platform is Platform.PANEL and params:
        return [("panel study URL (the panel fills each parameter)",
                 start + "?" + "&".join(f"{p}=<{p}>" for p in params))]
    return [("local link", start)]


def echo_links(base: str, slug: str, heading: str, declared: object = None) -> None:
    """Print the links of a study's source (``entry_links``): the first on ``heading``'s line
    (with its label unless it is the plain local link), the others labelled below it."""
    links = entry_links(base, slug, declared)
    (first_label, first), rest = links[0], links[1:]
    click.echo(f"{heading}{first}" + ("" if first_label == "local link" else f"  ({first_label})"))
    for label, url in rest:
        click.echo(f"  {label + ':':20s} {url}")


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
    from humanlike.server.study import experiments as registry

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
        echo_links(f"http://{host}:{port}", slug, f"experiment {slug} (spec version {version}): ",
                   loaded.spec.platform)
    if psiturk_project:  # its config and custom.py warnings were logged once as it loaded
        click.echo(f"psiTurk project {psiturk_project}: http://{host}:{port}/ad?hitId=debugHIT"
                   "&assignmentId=debugASSIGN&workerId=debugWORKER&mode=debug")
    if panel and "panel_worker" not in app.extensions:
        from humanlike.server.live.panel import start_worker

        start_worker(app)
    app.run(host=host, port=port, threaded=True)
