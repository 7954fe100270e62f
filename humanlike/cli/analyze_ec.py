"""``humanlike analyze ec``: error-consistency matrices, CIs, tests and figures from trial data.

Reads our tidy export (``classifications.csv`` / ``.parquet``, or the export folder holding it)
through :mod:`humanlike.analysis.io.export` or the model-vs-human raw-data layout (one CSV or a
folder of them), and writes CSVs + PNGs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click
import pandas as pd
from tqdm import tqdm

from humanlike.analysis.error_consistency.analysis import (
    analyze_error_consistency,
    standard_trials,
)
from humanlike.analysis.io.export import find_table, read_export
from humanlike.analysis.io.model_vs_human import MVH_COLUMNS, read_model_vs_human
from humanlike.cli.options import alpha_option, confidence_option, n_resamples_option

_STANDARD = ["experiment", "condition", "observer", "group", "stimulus", "correct"]


def _is_mvh_csv(path: Path) -> bool:
    header = pd.read_csv(path, nrows=0).columns
    return all(c in header for c in MVH_COLUMNS)


def _read_export(path: Path, include_excluded: bool) -> tuple[pd.DataFrame, list[str]]:
    """Scoring classification trials of our export as the standard columns, with notes."""
    try:
        selection = read_export(path, "classifications", include_excluded).classifications()
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="TRIALS") from None
    return standard_trials(selection.frame), list(selection.notes)


def load_trials(path: Path, include_excluded: bool = False) -> tuple[pd.DataFrame, str, list[str]]:
    """Return (standard trial frame, source kind, notes) for an export or model-vs-human path."""
    if path.is_dir():
        if find_table(path, "classifications") is not None:
            frame, notes = _read_export(path, include_excluded)
            return frame, "export", notes
        return read_model_vs_human(path)[_STANDARD], "model-vs-human", []
    if not path.is_file():
        raise click.BadParameter(f"no such file or folder: {path}", param_hint="TRIALS")
    if path.suffix == ".parquet" or (path.suffix == ".csv" and not _is_mvh_csv(path)):
        frame, notes = _read_export(path, include_excluded)
        return frame, "export", notes
    return read_model_vs_human(path)[_STANDARD], "model-vs-human", []


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
    type=click.Choice(["mvh", "strict"]),
    default="mvh",
    show_default=True,
    help="Kappa where c_obs or c_exp is 1 (mvh: 1; strict: NaN).",
)
@click.option("--unbiased", is_flag=True, help="Small-sample correction n k / ((n - 1) + k).")
@click.option(
    "--include-excluded",
    is_flag=True,
    help="Keep participants flagged excluded in the export's participants.csv.",
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
    degenerate: Literal["mvh", "strict"],
    unbiased: bool,
    include_excluded: bool,
    seed: int,
    figures: bool,
) -> None:
    """Error consistency (Cohen's kappa on trial-by-trial correctness) of all observer pairs.

    TRIALS is our export's classifications.csv/.parquet (or the export folder) or model-vs-human
    raw data (one CSV or a folder). Writes pairs.csv, summary.csv, matrix_<experiment>.csv,
    model_comparisons.csv (two or more models) and PNG figures to --out.
    """
    frame, kind, notes = load_trials(trials, include_excluded)
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
    click.echo(result.summary())
    names = [path.name for path in written]
    click.echo(f"wrote {len(names)} files to {out_dir}: " + ", ".join(names))
