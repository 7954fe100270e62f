"""``humanlike analyze ec``: error-consistency matrices, CIs, tests and figures from trial data.

Reads our tidy export (``classifications.csv`` / ``.parquet``, or the export folder holding it)
through :mod:`humanlike.analysis.io.export` or the model-vs-human raw-data layout (one CSV or a
folder of them), and writes CSVs + PNGs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

import click
import pandas as pd
from tqdm import tqdm

from humanlike.analysis.counts import kappa_counts
from humanlike.analysis.error_consistency.analysis import (
    analyze_error_consistency,
    drop_conditions,
)
from humanlike.analysis.error_consistency.inputs import ModelsError, Ties, ec_trials
from humanlike.analysis.io.export import find_table, read_export
from humanlike.analysis.io.model_vs_human import is_trial_file, read_model_vs_human
from humanlike.cli.options import alpha_option, confidence_option, n_resamples_option

_STANDARD = ["experiment", "condition", "observer", "group", "stimulus", "correct"]


def _read_export(
    path: Path, include_excluded: bool, ties: Ties = "random", models: pd.DataFrame | None = None,
    include_simulated: bool = False,
) -> tuple[pd.DataFrame, list[str]]:
    """What error consistency scores in our export (``error_consistency.inputs.ec_trials``, as
    the report and the panel choose it), with the analysed-sample sentence first."""
    try:
        if path.is_dir():
            export = read_export(path, None, include_excluded, include_simulated)
        else:
            table = "decisions" if path.name.split(".")[0] == "decisions" else "classifications"
            export = read_export(path, table, include_excluded, include_simulated)
        sentence = export.sample_sentence()
        frame, notes = ec_trials(export, ties, models)
    except ModelsError as exc:
        raise click.BadParameter(str(exc), param_hint="--models") from None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="TRIALS") from None
    return frame, ([sentence] if sentence is not None else []) + notes


def _read_mvh(path: Path) -> tuple[pd.DataFrame, list[str]]:
    notes: list[str] = []
    try:
        frame = read_model_vs_human(path, on_skip=notes.append)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    return frame[_STANDARD], notes


def load_trials(
    path: Path, include_excluded: bool = False, ties: Ties = "random",
    models: pd.DataFrame | None = None, include_simulated: bool = False,
) -> tuple[pd.DataFrame, str, list[str]]:
    """Return (standard trial frame, source kind, notes) for an export or model-vs-human path."""
    if path.is_dir():
        if any(find_table(path, t) is not None for t in ("classifications", "decisions")):
            frame, notes = _read_export(path, include_excluded, ties, models, include_simulated)
            return frame, "export", notes
        frame, notes = _read_mvh(path)
        return frame, "model-vs-human", notes
    if not path.is_file():
        raise click.BadParameter(f"no such file or folder: {path}", param_hint="TRIALS")
    if path.suffix == ".parquet" or (path.suffix == ".csv" and not is_trial_file(path)):
        frame, notes = _read_export(path, include_excluded, ties, models, include_simulated)
        return frame, "export", notes
    if models is not None:
        raise click.BadParameter("--models goes with our export's rating decisions, not with "
                                 "model-vs-human data (which holds its models' trials)",
                                 param_hint="--models")
    frame, notes = _read_mvh(path)
    return frame, "model-vs-human", notes


def read_condition_exclusions(path: Path) -> dict[str, list[str]]:
    """The ``--exclude-conditions`` TOML: ``experiment = ["condition", ...]`` per line."""
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise click.BadParameter(f"{path}: not a readable TOML file: {exc}",
                                 param_hint="--exclude-conditions") from None
    for experiment, conditions in table.items():
        if not isinstance(conditions, list) or not all(
            isinstance(c, (str, int, float)) and not isinstance(c, bool) for c in conditions
        ):
            raise click.BadParameter(
                f"{path}: {experiment}: expected a list of condition names, e.g. "
                f'{experiment} = ["c100", "c03"]', param_hint="--exclude-conditions")
    return {str(k): [str(c) for c in v] for k, v in table.items()}


@click.command()
@click.argument("trials", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Folder for the CSVs and figures (created if needed).",
)
@n_resamples_option(10_000, "Bootstrap resamples of stimuli.")
@click.option(
    "--n-sim",
    default=10_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Simulations per pair for the independence test.",
)
@confidence_option
@alpha_option
@click.option(
    "--degenerate",
    type=click.Choice(["undefined", "mvh", "strict", "klein2025"]),
    default="undefined",
    show_default=True,
    help="Kappa where an observer is at 0%% or 100%% accuracy (undefined: NaN with the reason, "
    "left out of means and rankings; mvh: model-vs-human / Brain-Score's convention, 1 where "
    "c_obs = 1, as their published figures; strict: NaN only where c_exp = 1; klein2025: the "
    "same values, Klein et al. 2025's convention, a constant observer scores 0).",
)
@click.option("--unbiased", is_flag=True, help="Small-sample correction n k / ((n - 1) + k).")
@click.option(
    "--include-excluded",
    is_flag=True,
    help="Keep participants flagged excluded in the export's participants.csv.",
)
@click.option("--include-simulated", is_flag=True,
              help="Analyse simulated participants too (a rehearsal: humanlike simulate).")
@click.option(
    "--exclude-conditions",
    "exclusions_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='TOML table of conditions to leave out, experiment = ["condition", ...] '
    '(e.g. contrast = ["c100", "c03", "c01"], as Brain-Score does).',
)
@click.option(
    "--ties",
    type=click.Choice(["random", "incorrect"]),
    default="random",
    show_default=True,
    help="Rating decisions with tied top ratings: the export's seeded random pick, or wrong.",
)
@click.option(
    "--models",
    "models_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Model responses (model, stimulus, category, probability): each model's most probable "
    "category on the rated images joins the rating decisions as an observer (model-human kappa).",
)
@click.option("--seed", default=0, show_default=True, help="Seed of all resampling.")
@click.option(
    "--figures/--no-figures", default=True, show_default=True, help="Also draw the PNG figures."
)
def command(
    trials: Path,
    out_dir: Path,
    n_resamples: int,
    n_sim: int,
    confidence: float,
    alpha: float,
    degenerate: Literal["undefined", "mvh", "strict", "klein2025"],
    unbiased: bool,
    include_excluded: bool,
    include_simulated: bool,
    exclusions_file: Path | None,
    ties: Ties,
    models_path: Path | None,
    seed: int,
    figures: bool,
) -> None:
    """Error consistency (Cohen's kappa on trial-by-trial correctness) of all observer pairs.

    TRIALS is our export's classifications.csv/.parquet or decisions.csv/.parquet (or the export
    folder, which reads both: rating decisions as experiment <experiment>-ratings) or
    model-vs-human raw data (one CSV or a folder; other CSVs there are skipped). Writes pairs.csv, summary.csv, matrix_<experiment>.csv,
    model_comparisons.csv (two or more models) and PNG figures to --out.
    """
    models = None
    if models_path is not None:
        from humanlike.analysis.ratings.scores import load_model_responses

        try:
            models = load_model_responses(models_path)
        except ValueError as exc:
            raise click.BadParameter(f"{models_path}: {exc}", param_hint="--models") from None
    frame, kind, notes = load_trials(trials, include_excluded, ties, models, include_simulated)
    if exclusions_file is not None:
        frame, dropped = drop_conditions(frame, read_condition_exclusions(exclusions_file))
        notes += dropped
    for note in notes:
        click.echo(note)
    if frame.empty:
        raise click.ClickException("no classification trials left to analyse")
    with tqdm(total=4, desc="error consistency", unit="step") as steps:
        try:
            result = analyze_error_consistency(
                frame,
                n_resamples=n_resamples,
                n_sim=n_sim,
                confidence_level=confidence,
                alpha=alpha,
                degenerate=degenerate,
                unbiased=unbiased,
                random_state=seed,
                progress=steps.update,
            )
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
        written = result.save(out_dir, figures=figures)
        steps.update()
    click.echo(f"read {kind} data: {frame['observer'].nunique()} observers, {len(frame)} trials")
    click.echo(kappa_counts(frame, result.pairs))  # the report's words for the same count
    click.echo(result.summary())
    names = [path.name for path in written]
    click.echo(f"wrote {len(names)} files to {out_dir}: " + ", ".join(names))
