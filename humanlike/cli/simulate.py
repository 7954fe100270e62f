"""``humanlike simulate EXPERIMENT``: simulated participants with known ground truth take part
through the real HTTP API (a running server with ``--url``, else the app in-process), as a
rehearsal: each arrival carries the study's rehearsal key (``server.rehearsal``), so the server
records it as simulated and the analyses leave it out unless asked for. ``--agent`` chooses who
answers (``server/demo/agents.py``): the noisy human, or an agent to test the authenticity screen
against."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import click
from tqdm import tqdm

from humanlike.cli.app_context import database_option, make_app
from humanlike.server.demo.agents import AGENTS


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


AGENT_HELP = (
    "Who answers: 'human' (noisy human: model probabilities plus noise, lapses, log-normal RTs), "
    "'model' (the --observer model's probabilities on the rating scale and its most probable class, "
    "no noise, no lapse; human-like RTs), 'replay' (a human's recorded responses and RTs in their "
    "order, blind to the stimuli shown: --replay-source, else a hidden simulated human's shuffled), "
    "'lazy' (the first label on every trial, triads left, 450 +- 5 ms), 'scripted' (a Playwright "
    "browser agent on --url's task page, answering with the --observer model). Agents other than "
    "human test the authenticity screen (docs/authenticity.md).")
REPLAY_HELP = (
    "The replay agent's recording: a CSV of one participant's trials, a model-vs-human raw file "
    "(subj,trial,rt in s,object_response) or a humanlike export table (participant,trial_index,"
    "rt_ms and response, or category,rating as in ratings.csv). A response that is not a study "
    "label is replayed as labels[rank % number of labels], its rank among the file's distinct "
    "responses sorted as text; the k-th trial gets the k-th recorded response (cycling).")


def scripted_runner() -> Callable[..., list[dict[str, Any]]]:
    """``run_scripted_participants`` of ``server/demo/scripted_agent.py``, or a CLI error saying
    what is missing (the module, or Playwright)."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("playwright") is None:
        raise click.ClickException("--agent scripted drives a browser with Playwright, which is not "
                                   "installed: pip install playwright && playwright install chromium")
    try:
        module = importlib.import_module("humanlike.server.demo.scripted_agent")
        return cast(Callable[..., list[dict[str, Any]]], module.run_scripted_participants)
    except (ImportError, AttributeError) as exc:
        raise click.ClickException(f"--agent scripted needs humanlike.server.demo.scripted_agent."
                                   f"run_scripted_participants: {exc}") from exc


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
@click.option("--agent", type=click.Choice(AGENTS), default="human", show_default=True,
              help=AGENT_HELP)
@click.option("--replay-source", type=click.Path(path_type=Path), default=None, help=REPLAY_HELP)
@click.option("--replay-participant", default=None,
              help="Whose trials --replay-source replays when it holds several participants (its "
              "participant, platform_id or subj).")
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
            gamma_range: tuple[float, float], rt_median_ms: float, seed: int, agent: str,
            replay_source: Path | None, replay_participant: str | None, url: str | None,
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

    if agent == "scripted" and url is None and not print_key:
        raise click.UsageError("--agent scripted drives a browser against a running server: give "
                               "its --url")
    if agent != "replay" and (replay_source or replay_participant):
        raise click.UsageError("--replay-source and --replay-participant are for --agent replay")
    if replay_participant and replay_source is None:
        raise click.UsageError("--replay-participant chooses a participant of --replay-source: "
                               "give the file")
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
            rt_median_ms=rt_median_ms, seed=seed, study_id=study_id, sessions=sessions,
            agent=agent, replay_source=None if replay_source is None else str(replay_source),
            replay_participant=replay_participant)
        models: pd.DataFrame | None = load_responses(paths)
        study = SimulatedStudy(spec, settings, models)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    run_scripted = scripted_runner() if agent == "scripted" else None
    click.echo(study.observer_description())
    if agent != "human":
        click.echo(f"agent: {agent}" + (f" (replaying {replay_source})" if replay_source else ""))
    if paths:
        click.echo(f"model responses ({source}): {', '.join(str(p) for p in paths)}")
    if run_scripted is not None:
        assert url is not None
        truth = study.truth()
        try:
            with tqdm(total=n_participants, desc="participants (browser)", unit="participant") as bar:
                truth.participants = [{**p, "agent": "scripted"} for p in run_scripted(
                    url, study.slug, n_participants, seed, rehearsal_key, study,
                    progress=bar.update)]
        except (RuntimeError, OSError) as exc:
            raise click.ClickException(str(exc)) from exc
        write_truth(truth, truth_dir, n_participants, study.slug)
        return
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
    write_truth(truth, truth_dir, n_participants, study.slug)


def write_truth(truth: Any, truth_dir: Path, n_participants: int, slug: str) -> None:
    """Write the ground truth to ``truth_dir`` and say who completed and who was made to fail."""
    written = truth.save(truth_dir)
    failing = [p["participant"] for p in truth.participants if p.get("fails_catch")]
    click.echo(f"{n_participants} simulated participants completed {slug} (recorded as "
               "simulated: not analysed unless asked for); "
               f"made to fail catch trials: {', '.join(failing) or 'none'}")
    for path in written:
        click.echo(f"wrote {path}")
