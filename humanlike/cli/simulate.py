"""``humanlike simulate EXPERIMENT``: simulated participants with known ground truth take part
through the real HTTP API (a running server with ``--url``, else the app in-process), as a
rehearsal: each arrival carries the study's rehearsal key (``server.rehearsal``), so the server
records it as simulated and the analyses leave it out unless asked for."""

from __future__ import annotations

from pathlib import Path

import click
from tqdm import tqdm

from humanlike.cli.app_context import database_option, make_app


def read_sessions(path: Path) -> tuple[tuple[str, str], ...]:
    """(participant id, session id) pairs from a CSV file; a bad line is a CLI error naming it."""
    import csv

    out = []
    with path.open(newline="") as fh:
        for number, row in enumerate(csv.reader(fh), start=1):
            if not row or row[0].startswith("#"):
                continue
            if len(row) != 2 or not row[0].strip() or not row[1].strip():
                raise click.ClickException(f"{path}: line {number}: expected "
                                           f"'participant_id,session_id', got {row!r}")
            out.append((row[0].strip(), row[1].strip()))
    if not out:
        raise click.ClickException(f"{path}: no 'participant_id,session_id' lines")
    return tuple(out)


def resolve_spec(experiment: str, database_url: str | None) -> Path:
    """EXPERIMENT as a spec path; ``demo`` is the demo experiment `humanlike demo` built."""
    path = Path(experiment)
    if path.is_file():
        return path
    if path.is_dir() and (path / "experiment.toml").is_file():
        return path / "experiment.toml"
    if experiment == "demo":
        from humanlike.server.demo.build import build_demo, demo_is_current

        demo_dir = Path(make_app(database_url=database_url).instance_path) / "demo"
        if not demo_is_current(demo_dir):
            build_demo(demo_dir)
        return demo_dir / "experiment.toml"
    raise click.BadParameter(f"{experiment}: no such experiment file (give its experiment.toml, "
                             "or 'demo')", param_hint="EXPERIMENT")


@click.command("simulate")
@click.argument("experiment")
@click.option("--participants", "n_participants", default=12, show_default=True,
              type=click.IntRange(min=1), help="Simulated participants to send.")
@click.option("--observer", default=None,
              help="Model whose responses the participants rate and classify with (default: the "
              "first model in the responses).")
@click.option("--models", "responses", type=click.Path(exists=True, path_type=Path),
              multiple=True, help="Model responses, a CSV/Parquet file or a folder of them "
              "(repeatable; default: the spec's [panel] model_responses, else the models/ folder "
              "beside the spec, else model_responses.csv beside the manifest; none found: the "
              "true class answers).")
@click.option("--noise", default=0.15, show_default=True, type=click.FloatRange(min=0),
              help="SD of the Gaussian noise added to the model's probabilities before rounding.")
@click.option("--lapse", default=0.05, show_default=True, type=click.FloatRange(0, 1),
              help="Probability that a classification is a uniform guess.")
@click.option("--fail-catch", default=None, type=click.IntRange(min=0),
              help="Participants who answer every catch trial wrongly (default: 2, at most a "
              "third of --participants).")
@click.option("--mlds-sigma", default=0.15, show_default=True, type=click.FloatRange(min=0,
              min_open=True), help="Decision noise of the MLDS observer (standard scale).")
@click.option("--gamma", "gamma_range", nargs=2, type=float, default=(0.5, 2.0), show_default=True,
              help="Range of the per-sequence exponent of psi = ((k-1)/(N-1))**gamma.")
@click.option("--rt-median-ms", default=1200.0, show_default=True, type=click.FloatRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--url", default=None, help="A running server (e.g. http://127.0.0.1:5000); "
              "default: the app in-process on --database-url.")
@click.option("--study-id", default=None,
              help="STUDY_ID to send (a study on a fake or staging Prolific); default sim-study.")
@click.option("--sessions", "sessions_csv", type=click.Path(exists=True, dir_okay=False,
                                                            path_type=Path), default=None,
              help="A file of 'participant_id,session_id' lines, one per participant (their "
                   "number sets --participants), as the platform handed them out.")
@click.option("--truth", "truth_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("simulation_truth"), show_default=True,
              help="Folder for truth.json and truth_participants.csv.")
@click.option("--rehearsal-key", envvar="HUMANLIKE_REHEARSAL_KEY", default=None,
              help="The study's rehearsal key, which makes the server record these participants "
              "as simulated (default: derived from this machine's SECRET_KEY, right for the app "
              "in-process and for a server with the same SECRET_KEY; print the server's with "
              "--print-key where it runs). Env: HUMANLIKE_REHEARSAL_KEY.")
@click.option("--print-key", is_flag=True,
              help="Print EXPERIMENT's rehearsal key (from this machine's SECRET_KEY) and exit.")
@database_option
def command(experiment: str, n_participants: int, observer: str | None,
            responses: tuple[Path, ...], noise: float, lapse: float, fail_catch: int | None,
            mlds_sigma: float,
            gamma_range: tuple[float, float], rt_median_ms: float, seed: int, url: str | None,
            study_id: str | None, sessions_csv: Path | None, truth_dir: Path,
            rehearsal_key: str | None, print_key: bool, database_url: str | None) -> None:
    """Send simulated participants through EXPERIMENT (an experiment.toml, or 'demo')."""
    import pandas as pd

    from humanlike.server import database
    from humanlike.server.demo.simulate import (
        SimulatedStudy,
        SimulationSettings,
        api_client,
        find_model_responses,
        load_responses,
        simulate_participants,
    )
    from humanlike.server.participants.rehearsal import rehearsal_key as key_of
    from humanlike.server.study import experiments

    spec = resolve_spec(experiment, database_url)
    if print_key or rehearsal_key is None:
        from humanlike.server.study.spec import load_spec

        try:
            slug = load_spec(spec).slug
        except ValueError as exc:  # SpecError names the file and the field
            raise click.ClickException(str(exc)) from exc
        own_key = key_of(make_app(database_url=database_url).config["SECRET_KEY"], slug)
        if print_key:
            click.echo(own_key)
            return
        rehearsal_key = own_key
    sessions = read_sessions(sessions_csv) if sessions_csv is not None else ()
    if sessions:
        n_participants = len(sessions)
        fail_catch = None if fail_catch is None else min(fail_catch, n_participants)
    try:
        paths, source = list(responses), "--models"
        if not paths:
            paths, source = find_model_responses(spec)
        settings = SimulationSettings(
            n_participants=n_participants, observer=observer, noise=noise, lapse=lapse,
            fail_catch=fail_catch, mlds_sigma=mlds_sigma, gamma_range=gamma_range,
            rt_median_ms=rt_median_ms, seed=seed, study_id=study_id, sessions=sessions)
        models: pd.DataFrame | None = load_responses(paths)
        study = SimulatedStudy(spec, settings, models)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(study.observer_description())
    if paths:
        click.echo(f"model responses ({source}): {', '.join(str(p) for p in paths)}")
    app = None
    if url is None:
        app = make_app([str(spec)], database_url)
        app.config["ALLOCATION_SEED"] = seed  # a rehearsal run twice allocates identically
        database.upgrade(app)
        experiments.sync_all(app)
    try:
        with api_client(url, app, rehearsal_key) as client, tqdm(total=n_participants, desc="participants",
                                                  unit="participant") as bar:
            truth = simulate_participants(client, study, progress=bar.update)
    except (RuntimeError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        if app is not None:
            database.dispose(app)
    written = truth.save(truth_dir)
    failing = [p["participant"] for p in truth.participants if p["fails_catch"]]
    click.echo(f"{n_participants} simulated participants completed {study.slug} (recorded as "
               "simulated: not analysed unless asked for); "
               f"made to fail catch trials: {', '.join(failing) or 'none'}")
    for path in written:
        click.echo(f"wrote {path}")
