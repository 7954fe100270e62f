"""``humanlike export EXPERIMENT --out DIR``: the tidy CSV/Parquet export with its codebook."""

from __future__ import annotations

from pathlib import Path

import click

from humanlike.cli import person
from humanlike.cli.app_context import database_option, make_app


@click.command("export")
@click.argument("experiment")
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="Folder to write the CSV/Parquet files and codebook.json into (with --server: "
                   "the zip's file, or a folder to put it in).")
@click.option("--pseudonymise", is_flag=True, default=False,
              help="Replace platform, study and session ids by keyed hashes (HMAC-SHA256 per "
                   "experiment; key from SECRET_KEY unless --key-file).")
@click.option("--key-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="File holding the pseudonym key (implies --pseudonymise).")
@click.option("--neutralise-parquet", is_flag=True,
              help="Also prefix formula-like text with ' in the Parquet files (CSV always is; "
                   "Parquet keeps the raw values by default).")
@click.option("--format", "fmt", type=click.Choice(["humanlike", "psiturk"]), default="humanlike",
              show_default=True,
              help="psiturk: psiTurk's trialdata.csv, questiondata.csv and eventdata.csv (as its "
                   "download_datafiles writes them) and psiturk_trials.csv (one column per "
                   "trialdata key).")
@click.option("--waves", is_flag=True, default=False,
              help="EXPERIMENT is wave k of a study: export waves 1..k together, each table "
                   "with a wave column (pseudonyms keyed alike in every wave).")
@database_option
def command(experiment: str, out: Path, pseudonymise: bool, key_file: Path | None,
            neutralise_parquet: bool, fmt: str, waves: bool, database_url: str | None) -> None:
    """Export EXPERIMENT (its slug) as tidy tables, streamed from the database in chunks."""
    from humanlike.cli import remote

    if remote.current() is not None:
        remote.refuse_local_options("export", key_file=key_file,
                                    neutralise_parquet=neutralise_parquet,
                                    format=fmt != "humanlike", waves=waves,
                                    database_url=database_url)
        remote.export(experiment, out, pseudonymise)
        return
    if out.is_file():
        raise click.ClickException(f"--out {out}: a file is there; name a folder")
    if fmt == "psiturk":
        _export_psiturk(experiment, out, database_url)
        return
    from humanlike.server.export.writer import write_export
    from humanlike.server.rights.pseudonyms import key_from_file, key_from_secret

    app = make_app(database_url=database_url)
    key = None
    if key_file is not None:
        try:
            key = key_from_file(key_file)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
    elif pseudonymise:
        key = key_from_secret(app.config["SECRET_KEY"])
    with app.app_context():
        person.require("view" if key is not None else "reveal", experiment)
        try:
            if waves:
                from humanlike.server.export.waves import wave_series, write_wave_export

                for _, each in wave_series(experiment)[:-1]:
                    person.require("view" if key is not None else "reveal", each)
                counts = write_wave_export(experiment, out, pseudonym_key=key)
            else:
                counts = write_export(experiment, out, pseudonym_key=key,
                                      raw_parquet=not neutralise_parquet)
        except LookupError as exc:
            raise click.ClickException(str(exc)) from exc
    for name, n in counts.items():
        click.echo(f"{name:16s} {n:8d} rows  -> {out / (name + '.csv')} (+ .parquet)")
    click.echo(f"codebook         -> {out / 'codebook.json'}")
    if key is not None:
        click.echo("platform, study and session ids are pseudonymised")


def _export_psiturk(experiment: str, out: Path, database_url: str | None) -> None:
    from humanlike.server.export.psiturk import tidy_trials, write_psiturk_csvs, write_tidy_csv

    app = make_app(database_url=database_url)
    with app.app_context():
        person.require("reveal", experiment)  # psiTurk's files carry the worker ids
        try:
            counts = write_psiturk_csvs(experiment, out)
            tidy = tidy_trials(experiment)
        except LookupError as exc:
            raise click.ClickException(str(exc)) from exc
    write_tidy_csv(tidy, out / "psiturk_trials.csv")
    for name, n in counts.items():
        click.echo(f"{name:16s} {n:8d} rows  -> {out / (name + '.csv')}")
    click.echo(f"{'psiturk_trials':16s} {len(tidy):8d} rows  -> {out / 'psiturk_trials.csv'}")
