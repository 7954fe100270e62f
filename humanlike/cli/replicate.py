"""``humanlike replicate PACKAGE --slug NEW --out DIR``: a published study as a new experiment on
this server (:mod:`humanlike.analysis.psychds.replication`): every hash checked, the spec version's
design, texts and stimuli kept (same design hash, same seeded timelines), the platform this
study's own, the equivalence bounds its report tests declared before any data exist."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import click

from humanlike.cli.app_context import database_option, make_app

PLATFORMS = ("local", "lab", "prolific")
"""Platforms a replication can declare here (others: edit [platform] in the written spec; the
platform is outside the design hash)."""


def _bounds(values: tuple[str, ...]) -> dict[str, float]:
    """``--bound METRIC=DELTA`` options as a mapping."""
    from humanlike.analysis.psychds.replication import METRICS

    out: dict[str, float] = {}
    for value in values:
        metric, sep, number = value.partition("=")
        try:
            delta = float(number)
        except ValueError:
            delta = float("nan")
        if not sep or metric not in METRICS or not 0 < delta <= 10:
            raise click.BadParameter(f"{value!r}: give METRIC=DELTA with METRIC one of "
                                     f"{', '.join(METRICS)} and 0 < DELTA <= 10",
                                     param_hint="--bound")
        out[metric] = delta
    return out


@click.command("replicate")
@click.argument("package", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--slug", required=True, help="The new experiment's slug (not used on this server).")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="A new folder for the replication's spec, texts, stimuli and the package.")
@click.option("--version", "version", default=None,
              help="The spec version to replicate (a prefix of its hash; needed when the package "
                   "holds several).")
@click.option("--platform", default="local", show_default=True, type=click.Choice(PLATFORMS),
              help="This study's own recruitment platform (the package withholds the original's).")
@click.option("--prolific-code", default=None,
              help="The completion code of this study's Prolific listing (--platform prolific).")
@click.option("--bound", "bounds", multiple=True, metavar="METRIC=DELTA",
              help="Equivalence bound of a metric (pearson_r, mse): the largest difference "
                   "between the studies still called equivalent; repeatable. Default: each "
                   "score's and comparison's half-width of the original's confidence interval.")
@database_option
def command(package: Path, slug: str, out: Path, version: str | None, platform: str,
            prolific_code: str | None, bounds: tuple[str, ...], database_url: str | None) -> None:
    """Import the published PACKAGE (a `humanlike publish` folder) as a new experiment SLUG."""
    import sqlalchemy as sa

    from humanlike.analysis.psychds.replication import (
        check_package,
        design_hash,
        write_replication,
    )
    from humanlike.server import database
    from humanlike.server.extensions import db
    from humanlike.server.study import experiments
    from humanlike.server.study.spec import SpecError
    from humanlike.server.tables.core import Experiment

    declared = _bounds(bounds)
    if (platform == "prolific") != (prolific_code is not None):
        raise click.BadParameter("--prolific-code goes with --platform prolific (and it needs "
                                 "one)", param_hint="--prolific-code")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise click.BadParameter(f"{out} exists and is not empty; give a new folder",
                                 param_hint="--out")
    try:
        chosen = check_package(package, version)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"checked every hash of {package}: version {chosen.version_hash[:12]}, "
               f"design {chosen.design_hash[:12]}, {len(chosen.stimuli)} stimuli")
    completion: dict[str, object] = {"mturk_sandbox": bool((chosen.spec.get("completion") or {}).get(
        "mturk_sandbox", True))}
    if prolific_code:
        completion["prolific_code"] = prolific_code
    app = make_app(database_url=database_url)
    database.upgrade(app)
    with app.app_context():
        if db.session.execute(sa.select(Experiment.id).where(Experiment.slug == slug)).first():
            raise click.BadParameter(f"experiment {slug!r} exists on this server; give a new slug",
                                     param_hint="--slug")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".replicate-", dir=out.parent) as tmp:
        staged = Path(tmp) / "experiment"
        try:
            spec_path = write_replication(package, chosen, staged, slug=slug, platform=platform,
                                          completion=completion, bounds=declared)
            loaded = experiments.load_experiment(spec_path)
        except (ValueError, OSError) as exc:  # SpecError is a ValueError
            raise click.ClickException(str(exc)) from None
        rebuilt = design_hash(loaded.spec.model_dump(mode="json"), loaded.texts,
                              loaded.stimulus_rows())
        if rebuilt != chosen.design_hash:
            raise click.ClickException(
                f"{spec_path}: the rebuilt experiment's design hash {rebuilt[:12]} is not the "
                f"package's {chosen.design_hash[:12]}; nothing imported")
        if out.exists():
            out.rmdir()
        shutil.move(str(staged), str(out))
    spec_path = out / "experiment.toml"
    with app.app_context():
        try:
            loaded = experiments.sync(experiments.load_experiment(spec_path))
        except SpecError as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"imported as experiment {slug!r} (version {loaded.version_hash[:12]}, design "
               f"{chosen.design_hash[:12]} as the original's) in {out}")
    click.echo(f"run it:     humanlike serve --experiment {spec_path}")
    models = out / "original" / "results" / "model_responses.csv"
    click.echo(f"report it:  humanlike report EXPORT --spec {spec_path}"
               + (f" --models {models}" if models.is_file() else "")
               + " (its replication section compares with the original)")
