"""``humanlike analyze ec``: error-consistency matrices, CIs, tests and figures from trial data.

Reads our tidy export (``classifications.csv`` / ``.parquet``, or the export folder holding it)
or the model-vs-human raw-data layout (one CSV or a folder of them), and writes CSVs + PNGs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, cast

import click
import numpy as np
import pandas as pd
from tqdm import tqdm

from humanlike.analysis import holm_sidak
from humanlike.analysis.error_consistency import (
    compare_models,
    independence_pvalues,
    kappa_matrix,
)
from humanlike.analysis.io.model_vs_human import MVH_COLUMNS, read_model_vs_human
from humanlike.server.commands.options import (
    alpha_option,
    confidence_option,
    n_resamples_option,
)

_EXPORT_NAMES = ("classifications.parquet", "classifications.csv")
_STANDARD = ["experiment", "condition", "observer", "group", "stimulus", "correct"]


def _is_mvh_csv(path: Path) -> bool:
    header = pd.read_csv(path, nrows=0).columns
    return all(c in header for c in MVH_COLUMNS)


def _read_export(path: Path, include_excluded: bool) -> tuple[pd.DataFrame, list[str]]:
    """Classification trials of our export as the standard columns, with notes on what was dropped."""
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    missing = [c for c in ("participant", "stimulus", "correct") if c not in frame.columns]
    if missing:
        raise click.BadParameter(
            f"{path} lacks column(s) {missing}: not a classifications export", param_hint="TRIALS"
        )
    notes = []
    keep = pd.Series(True, index=frame.index)
    for column, label in (("practice", "practice"), ("is_repeat", "repeated-presentation")):
        if column in frame.columns:
            flag = frame[column].astype(str).str.lower().isin(["true", "1"])
            notes.append(f"dropped {int((flag & keep).sum())} {label} trials")
            keep &= ~flag
    if "stimulus_kind" in frame.columns:
        catch = frame["stimulus_kind"].astype(str) == "catch"
        notes.append(f"dropped {int((catch & keep).sum())} catch trials")
        keep &= ~catch
    participants = path.parent / "participants.csv"
    if not include_excluded and participants.is_file():
        people = pd.read_csv(participants)
        if {"participant", "excluded"} <= set(people.columns):
            excluded = set(
                people.loc[
                    people["excluded"].astype(str).str.lower().isin(["true", "1"]), "participant"
                ].astype(str)
            )
            drop = frame["participant"].astype(str).isin(excluded)
            notes.append(
                f"dropped {len(excluded)} excluded participants ({int((drop & keep).sum())} trials)"
            )
            keep &= ~drop
    frame = frame[keep]
    out = pd.DataFrame(
        {
            "experiment": frame["experiment"] if "experiment" in frame.columns else "all",
            "condition": frame["condition"] if "condition" in frame.columns else "all",
            "observer": frame["participant"].astype(str),
            "group": frame["group"] if "group" in frame.columns else "human",
            "stimulus": frame["stimulus"].astype(str),
            "correct": frame["correct"],
        }
    )
    return out, notes


def load_trials(path: Path, include_excluded: bool = False) -> tuple[pd.DataFrame, str, list[str]]:
    """Return (standard trial frame, source kind, notes) for an export or model-vs-human path."""
    if path.is_dir():
        for name in _EXPORT_NAMES:
            if (path / name).is_file():
                frame, notes = _read_export(path / name, include_excluded)
                return frame, "export", notes
        return read_model_vs_human(path)[_STANDARD], "model-vs-human", []
    if not path.is_file():
        raise click.BadParameter(f"no such file or folder: {path}", param_hint="TRIALS")
    if path.suffix == ".parquet" or (path.suffix == ".csv" and not _is_mvh_csv(path)):
        frame, notes = _read_export(path, include_excluded)
        return frame, "export", notes
    return read_model_vs_human(path)[_STANDARD], "model-vs-human", []


def _draw_figures(
    result,
    pairs: pd.DataFrame,
    experiment: str,
    slug: str,
    out_dir: Path,
    confidence: float,
    with_models: bool,
) -> list[str]:
    """Save the heatmap, the c_exp/c_obs scatter and (with models) EC per model; return names."""
    from humanlike.analysis.error_consistency import (
        plots as ec_plots,  # matplotlib only when figures are wanted
    )

    figures = {
        f"matrix_{slug}.png": ec_plots.plot_kappa_matrix(result, experiment),
        f"scatter_{slug}.png": ec_plots.plot_consistency_scatter(
            pairs[pairs["experiment"] == experiment], confidence_level=confidence
        ),
    }
    if with_models:
        figures[f"ec_per_model_{slug}.png"] = ec_plots.plot_ec_per_model(result, experiment)
    for name, fig in figures.items():
        fig.savefig(out_dir / name, dpi=150)
        ec_plots.plt.close(fig)
    return list(figures)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip("-") or "all"


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
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    columns: dict[str, Any] = {
        c: c for c in ("observer", "stimulus", "correct", "group", "condition", "experiment")
    }
    steps = tqdm(total=4, desc="error consistency", unit="step")
    try:
        result = kappa_matrix(
            frame,
            **columns,
            degenerate=degenerate,
            unbiased=unbiased,
            n_resamples=n_resamples,
            confidence_level=confidence,
            random_state=rng,
        )
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    steps.update()

    pairs = result.pairs.copy()
    pairs["p_independence"] = cast(np.ndarray, independence_pvalues(  # return_null=False
        pairs["kappa"].to_numpy(),
        np.rint(pairs["acc_a"] * pairs["n"]),
        np.rint(pairs["acc_b"] * pairs["n"]),
        pairs["n"].to_numpy(),
        n_sim=n_sim,
        degenerate=degenerate,
        unbiased=unbiased,
        random_state=rng,
    ))
    adjusted = holm_sidak(pairs["p_independence"].to_numpy(), alpha=alpha)
    pairs["p_holm_sidak"] = adjusted.p_adjusted
    pairs["significant"] = adjusted.reject
    pairs.to_csv(out_dir / "pairs.csv", index=False)
    result.summary.to_csv(out_dir / "summary.csv", index=False)
    steps.update()

    written = ["pairs.csv", "summary.csv"]
    n_models = int((result.observers["group"] == "model").sum())
    if n_models >= 2:
        comparisons = compare_models(
            frame,
            **columns,
            n_resamples=n_resamples,
            confidence_level=confidence,
            alpha=alpha,
            degenerate=degenerate,
            unbiased=unbiased,
            random_state=rng,
        )
        comparisons.to_csv(out_dir / "model_comparisons.csv", index=False)
        written.append("model_comparisons.csv")
    steps.update()

    experiments = sorted(pairs["experiment"].unique())
    for exp in experiments:
        slug = _slug(exp)
        result.matrix(exp).to_csv(out_dir / f"matrix_{slug}.csv")
        written.append(f"matrix_{slug}.csv")
        if figures:
            written += _draw_figures(result, pairs, exp, slug, out_dir, confidence, n_models > 0)
    steps.update()
    steps.close()

    click.echo(f"read {kind} data: {frame['observer'].nunique()} observers, {len(frame)} trials")
    summary = result.summary
    exp_rows = summary[summary["level"] == "experiment"]
    for _, row in exp_rows.iterrows():
        label = row["statistic"] if not row["model"] else f"{row['model']} vs humans"
        ci = f" [{row['ci_low']:.3f}, {row['ci_high']:.3f}]" if "ci_low" in row else ""
        click.echo(f"  {row['experiment']}: {label} kappa = {row['kappa']:.5f}{ci}")
    click.echo(f"wrote {len(written)} files to {out_dir}: " + ", ".join(written))
