"""``humanlike demo``: build the demo experiment, prepare the database, print the links, serve."""

from __future__ import annotations

import secrets
from pathlib import Path

import click

from humanlike.cli.app_context import database_option, make_app


@click.command("demo")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--prepare-only", is_flag=True, help="Build stimuli and database, then exit.")
@click.option("--rebuild", is_flag=True, help="Rebuild the demo stimuli even if present.")
@click.option("--simulated", default=12, show_default=True, type=click.IntRange(min=0),
              help="Simulated participants the demo database starts with (0: none).")
@database_option
def command(host: str, port: int, prepare_only: bool, rebuild: bool, simulated: int,
            database_url: str | None) -> None:
    """Serve the demo experiment with participant links for every platform."""
    import sqlalchemy as sa

    from humanlike.server import database
    from humanlike.server.demo.build import DEMO_SLUG, build_demo, demo_is_current
    from humanlike.server.extensions import db
    from humanlike.server.study import experiments
    from humanlike.server.tables.core import AdminUser

    probe = make_app(database_url=database_url)
    demo_dir = Path(probe.instance_path) / "demo"
    spec_path = demo_dir / "experiment.toml"
    if rebuild or not demo_is_current(demo_dir):
        click.echo(f"building the demo experiment in {demo_dir} ...")
        build_demo(demo_dir, panel=True)
    app = make_app([str(spec_path)], database_url)
    database.upgrade(app)
    experiments.sync_all(app)
    password_file = Path(app.instance_path) / "demo_admin_password"
    with app.app_context():
        user = db.session.execute(
            sa.select(AdminUser).where(AdminUser.username == "admin")
        ).scalar_one_or_none()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = AdminUser(username="admin")
            user.set_password(password)
            db.session.add(user)
            db.session.commit()
            password_file.write_text(password + "\n")
            password_file.chmod(0o600)
    report = _simulated_study(app, spec_path, simulated)
    base = f"http://{host}:{port}"
    click.echo("\nhumanlike demo experiment (a Prolific study: it takes Prolific links only, and your "
               "own preview)")
    for label, url in demo_links(base, password_file):
        click.echo(f"  {label + ':' if label else '':20s} {url}")
    click.echo(f"  export the data:     humanlike export {DEMO_SLUG} --out demo_out")
    if report is not None:
        click.echo(f"  study report:        {report}  ({simulated} simulated participants, "
                   "analysed: the demo is a rehearsal, [exclusion] analyse_simulated = true)")
    click.echo("")
    if prepare_only:
        return
    if "panel_worker" not in app.extensions:  # the dashboard's live panel, computed in the background
        from humanlike.server.live.panel import start_worker

        start_worker(app)
    app.run(host=host, port=port, threaded=True)


def demo_links(base: str, password_file: Path) -> list[tuple[str, str]]:
    """``(label, text)`` of the lines ``humanlike demo`` prints: links that work for the person
    running it (the demo declares Prolific, so a plain link is only the logged-in researcher's
    preview), Prolific's study URL template, the admin pages."""
    from humanlike.cli.serve import entry_links
    from humanlike.server.demo.build import DEMO_SLUG

    link = f"{base}/start/{DEMO_SLUG}"
    token = secrets.token_hex(3)
    template_label, template = entry_links(base, DEMO_SLUG, "prolific")[1]
    return [
        ("Prolific-style link", f"{link}?PROLIFIC_PID=demo-{token}&STUDY_ID=demo-study"
                                f"&SESSION_ID=demo-session-{token}"),
        ("", "(as Prolific sends a participant; another PROLIFIC_PID takes part again)"),
        ("researcher preview", f"{link}  (log in to the admin pages first: your preview is "
                               "recorded as simulated)"),
        (template_label, template),
        ("", "(paste it into Prolific's study form: Prolific fills in the ids)"),
        ("admin pages", f"{base}/admin/  (user 'admin', password in {password_file};"),
        ("", "add your own with `humanlike create-admin`)"),
    ]


def _simulated_study(app, spec_path: Path, n: int) -> Path | None:
    """Once per demo database: ``n`` simulated participants through the API (2 fail the catch
    trials; a rehearsal, recorded as simulated, which the demo's spec analyses), then the export
    and the study report in the instance folder; returns the report."""
    import json
    import tomllib

    import sqlalchemy as sa

    from humanlike.analysis.io.export import read_export
    from humanlike.analysis.ratings.scores import load_model_responses
    from humanlike.analysis.report import ReportSettings, build_report
    from humanlike.server.demo.build import DEMO_SLUG
    from humanlike.server.demo.simulate import (
        SimulatedStudy,
        SimulationSettings,
        api_client,
        simulate_participants,
    )
    from humanlike.server.export.writer import write_export
    from humanlike.server.extensions import db
    from humanlike.server.participants.rehearsal import rehearsal_key
    from humanlike.server.tables.core import Experiment, Participant

    if n == 0:
        return None
    instance = Path(app.instance_path)
    report = instance / "demo_report.html"
    responses = spec_path.parent / "stimuli" / "model_responses.csv"
    models = load_model_responses(responses) if responses.is_file() else None
    with app.app_context():
        demo = sa.select(Experiment.id).where(Experiment.slug == DEMO_SLUG).scalar_subquery()
        db.session.execute(  # a demo database from before migration 0020: its own rehearsal
            sa.update(Participant).where(Participant.experiment_id == demo,
                                         Participant.platform_id.like("demo-sim%"))
            .values(simulated=True))
        db.session.commit()
        count = db.session.execute(
            sa.select(sa.func.count(Participant.id)).join(Experiment)
            .where(Experiment.slug == DEMO_SLUG, Participant.simulated)
        ).scalar_one()
    if count == 0:
        settings = SimulationSettings(n_participants=n, fail_catch=min(2, n), seed=0,
                                      id_prefix="demo-sim")
        study = SimulatedStudy(spec_path, settings, models)
        click.echo(f"sending {n} simulated participants through the demo ...")
        key = rehearsal_key(app.config["SECRET_KEY"], DEMO_SLUG)
        with api_client(app=app, rehearsal_key=key) as client:
            simulate_participants(client, study).save(instance / "demo_truth")
    elif report.is_file():
        return report
    export = instance / "demo_export"
    with app.app_context():
        write_export(DEMO_SLUG, export)
    truth_file = instance / "demo_truth" / "truth.json"
    truth: dict[str, list[float]] | None = None
    if truth_file.is_file():
        truth = json.loads(truth_file.read_text())["psi"]
    click.echo("writing the study report ...")
    built = build_report(read_export(export), models=models,
                         spec=tomllib.loads(spec_path.read_text()), truth=truth,
                         settings=ReportSettings(n_resamples=500, n_sim=500))
    return built.save(report)
