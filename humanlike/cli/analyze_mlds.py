"""``humanlike analyze mlds``: MLDS scales per sequence (pooled) and per participant."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click
from tqdm import tqdm

from humanlike.analysis.counts import mlds_participant_counts
from humanlike.analysis.io.export import read_export
from humanlike.analysis.mlds.analysis import analyze_mlds
from humanlike.analysis.mlds.inputs import mlds_trials
from humanlike.cli.options import confidence_option, n_resamples_option


@click.command("mlds")
@click.argument("triads", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the CSVs and the figure.")
@click.option("--design", type=click.Choice(["triads", "quadruples"]), default="triads",
              show_default=True)
@n_resamples_option(1000, "Parametric bootstrap replicates per pooled scale (0: no CIs).", 0)
@confidence_option
@click.option("--seed", default=0, show_default=True, help="Random seed of the bootstrap.")
@click.option("--max-panels", default=12, show_default=True, help="Sequences shown in the figure.")
@click.option("--include-excluded", is_flag=True,
              help="Keep participants flagged excluded in the export's participants table.")
@click.option("--include-simulated", is_flag=True,
              help="Analyse simulated participants too (a rehearsal: humanlike simulate).")
def command(triads: Path, out_dir: Path, design: Literal["triads", "quadruples"], n_resamples: int,
            confidence: float, seed: int, max_panels: int, include_excluded: bool,
            include_simulated: bool) -> None:
    """Fit MLDS scales to TRIADS (the export's triads.csv/.parquet, or R's resp,S1,S2,S3[,S4]).

    Practice, catch and repeated trials and the participants the export does not analyse (its
    participants table next to TRIADS: left early, rejected, excluded) are left out. Writes scales_by_sequence.csv (long: level,
    scale, standard scale, SE, CI), fits_by_sequence.csv (sigma, log-likelihood, skewness,
    convergence), the same two files per participant when a 'participant' column exists, and
    mlds_scales.png.
    """
    try:
        export = read_export(triads, "triads", include_excluded, include_simulated)
        frame, notes = mlds_trials(export)
        with tqdm(total=n_resamples, desc="bootstrap", unit="rep", disable=n_resamples == 0) as bar:
            result = analyze_mlds(frame, design=design, n_resamples=n_resamples,
                                  confidence_level=confidence, random_state=seed,
                                  progress=bar.update)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    if (sentence := export.sample_sentence()) is not None:
        click.echo(sentence)
    for note in notes:
        click.echo(note)
    written = result.save(out_dir, max_panels=max_panels)
    click.echo(result.summary())
    if result.per_participant is not None:  # the report's words for the same count
        click.echo(mlds_participant_counts(result.per_participant))
    for path in written:
        click.echo(f"wrote {path}")
