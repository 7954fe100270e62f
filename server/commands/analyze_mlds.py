"""``humanlike analyze mlds``: MLDS scales per sequence (pooled) and per participant."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click
import numpy as np
import pandas as pd
from tqdm import tqdm

from humanlike.analysis.mlds.batch import fit_many
from humanlike.analysis.mlds.psychophysical import scale_skewness
from humanlike.server.commands.options import confidence_option, n_resamples_option


def _read(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path)


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
def command(triads: Path, out_dir: Path, design: Literal["triads", "quadruples"], n_resamples: int,
            confidence: float, seed: int, max_panels: int) -> None:
    """Fit MLDS scales to TRIADS (the export's triads.csv/.parquet, or R's resp,S1,S2,S3[,S4]).

    Writes scales_by_sequence.csv (long: level, scale, standard scale, SE, CI),
    fits_by_sequence.csv (sigma, log-likelihood, skewness, convergence), the same two files per
    participant when a 'participant' column exists, and mlds_scales.png.
    """
    from humanlike.analysis.mlds.plots import plot_scales

    df = _read(triads)
    by = "sequence" if "sequence" in df.columns else None
    try:
        with tqdm(total=n_resamples, desc="bootstrap", unit="rep", disable=n_resamples == 0) as bar:
            pooled = fit_many(df, by=by, design=design, n_resamples=n_resamples,
                              confidence_level=confidence, random_state=seed,
                              progress=bar.update)
        per_participant = None
        if "participant" in df.columns:
            per_participant = fit_many(df, by=[c for c in (by, "participant") if c],
                                       design=design)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for label, fits in (("sequence", pooled), ("participant", per_participant)):
        if fits is None:
            continue
        summary = fits.summary_frame()
        summary["skewness"] = scale_skewness(fits.scale_std)
        scales_path = out_dir / f"scales_by_{label}.csv"
        fits_path = out_dir / f"fits_by_{label}.csv"
        fits.to_frame().to_csv(scales_path, index=False)
        summary.to_csv(fits_path, index=False)
        written += [scales_path, fits_path]
    figure = out_dir / "mlds_scales.png"
    plot_scales(pooled, participants=per_participant, group_col="sequence",
                max_panels=max_panels, path=figure)
    written.append(figure)

    ok = pooled.converged & pooled.identified
    click.echo(f"{len(pooled.keys)} pooled scale(s) from {int(pooled.n_trials.sum())} trials; "
               f"{int(ok.sum())} converged; median sigma {np.nanmedian(pooled.sigma[ok]):.3g}"
               if ok.any() else f"{len(pooled.keys)} pooled scale(s); none converged")
    if per_participant is not None:
        okp = per_participant.converged & per_participant.identified
        click.echo(f"{len(per_participant.keys)} participant scale(s); {int(okp.sum())} converged "
                   "(the rest are separated or miss a level; see fits_by_participant.csv)")
    for path in written:
        click.echo(f"wrote {path}")
