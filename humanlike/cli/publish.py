"""``humanlike publish SLUG --out DIR --license ID``: a finished study as a Psych-DS dataset with a
benchmark package (:mod:`humanlike.analysis.psychds.publish`), validated before it is kept."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import click

from humanlike.cli.app_context import database_option, make_app
from humanlike.cli.options import alpha_option, confidence_option, n_resamples_option
from humanlike.cli.publish_targets import check_targets, send, target_options


def _license_choices() -> list[str]:
    from humanlike.analysis.psychds.dataset import LICENSES

    return list(LICENSES)


def _time_choices() -> list[str]:
    from humanlike.analysis.psychds.disclosure import TIME_POLICIES

    return list(TIME_POLICIES)


@click.command("publish")
@click.argument("experiment")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="A new folder for the dataset.")
@click.option("--license", "license_", required=True, type=click.Choice(_license_choices()),
              help="The licence the data are published under (SPDX identifier).")
@click.option("--author", "authors", multiple=True, help="An author (repeatable).")
@click.option("--title", default=None, help="The dataset's name (default: the study's title).")
@click.option("--description", default=None, help="A paragraph describing the dataset.")
@click.option("--models", "responses", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The study's model responses: published and scored into results/.")
@click.option("--include-free-text", is_flag=True,
              help="Also publish free-text answers (the debrief table); only with consent.")
@click.option("--times", default="day", show_default=True,
              type=click.Choice(_time_choices()),
              help="How times are published: the UTC day (durations in whole minutes), seconds "
                   "from each participant's own start, or exact (linkable to the platform's "
                   "submission list; only with consent).")
@n_resamples_option(1000, "Bootstrap resamples the benchmark scores with (as the report).")
@click.option("--n-sim", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Simulations per pair for the kappa independence test (as the report).")
@confidence_option
@alpha_option
@click.option("--seed", default=0, show_default=True, type=int,
              help="Seed of all resampling (as the report).")
@database_option
@target_options
def command(experiment: str, out: Path, license_: str, authors: tuple[str, ...],
            title: str | None, description: str | None, responses: Path | None,
            include_free_text: bool, times: str, n_resamples: int, n_sim: int, confidence: float,
            alpha: float, seed: int, database_url: str | None, **targets) -> None:
    """Publish EXPERIMENT (its slug) as a Psych-DS dataset and benchmark in OUT; with --deposit
    or --brainscore an OUT that already holds the published folder is sent as it is."""
    if check_targets(out, experiment, **targets):  # OUT already published: send it as it is
        send(out, **targets)
        return
    from humanlike.analysis.psychds.publish import publish_export
    from humanlike.analysis.ratings.scores import load_model_responses
    from humanlike.analysis.report.sections import ReportSettings
    from humanlike.server.export.writer import write_export

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise click.BadParameter(f"{out} exists and is not empty; give a new folder",
                                 param_hint="--out")
    try:
        models = load_model_responses(responses) if responses is not None else None
    except ValueError as exc:
        raise click.BadParameter(f"{responses}: {exc}", param_hint="--models") from None
    settings = ReportSettings(n_resamples=n_resamples, n_sim=n_sim, confidence_level=confidence,
                              alpha=alpha, seed=seed)
    app = make_app(database_url=database_url)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".publish-", dir=out.parent) as tmp:
        export, staged = Path(tmp) / "export", Path(tmp) / "dataset"
        with app.app_context():
            try:
                write_export(experiment, export)
            except LookupError as exc:
                raise click.ClickException(str(exc)) from exc
            exp, versions, stimulus_root = _study(experiment)
        spec = exp["spec"]
        try:
            validation = publish_export(
                export, staged, study=experiment, title=title or exp["title"], license=license_,
                stimulus_root=stimulus_root, versions=versions, settings=settings,
                rules=spec.get("exclusion"),
                categories=[str(c["label"]) for c in spec.get("categories", [])],
                authors=authors, description=description, models=models,
                include_free_text=include_free_text, times=times)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(validation.summary())
        if not validation.valid:
            raise click.ClickException("the dataset fails the Psych-DS check; nothing written")
        if out.exists():
            out.rmdir()
        shutil.move(str(staged), str(out))
    click.echo(f"published {experiment} to {out} ({len(validation.datafiles)} data files)")
    send(out, **targets)


def _study(slug: str) -> tuple[dict, list, Path]:
    """(title and spec, the spec versions participants ran under, the stimulus folder)."""
    import sqlalchemy as sa

    from humanlike.analysis.psychds.publish import SpecVersion
    from humanlike.server.extensions import db
    from humanlike.server.study.experiments import text_sources
    from humanlike.server.tables.core import Experiment, Participant
    from humanlike.server.tables.core import SpecVersion as Row

    exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == slug)).scalar_one()
    used = set(db.session.execute(sa.select(Participant.spec_version_id).where(
        Participant.experiment_id == exp.id)).scalars())
    rows = db.session.execute(sa.select(Row).where(Row.experiment_id == exp.id)
                              .order_by(Row.id)).scalars().all()
    versions = [SpecVersion(r.hash, r.spec, r.texts or {}, r.stimuli or [],
                            text_sources(Path(exp.root), r.spec, r.texts or {})) for r in rows
                if r.id in used or r.hash == exp.spec_hash]
    root = (Path(exp.root) / str(exp.spec["manifest"])).parent
    return {"title": exp.title, "spec": dict(exp.spec)}, versions, root
