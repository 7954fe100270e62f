"""``humanlike report EXPORT --out report.html``: one self-contained HTML report of a study."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from humanlike.cli.options import alpha_option, confidence_option, n_resamples_option

#: Steps the progress bar counts (sample/timing, ratings, kappa, alignment, MLDS bootstrap, runs
#: tests).
_STEPS = 6


def _spec(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    from humanlike.analysis.report.replication import resolve_package

    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise click.BadParameter(f"{path}: not a readable TOML spec: {exc}",
                                 param_hint="--spec") from None
    return resolve_package(spec, path.parent)  # [replication] package: relative to the spec


def _truth(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    file = path / "truth.json" if path.is_dir() else path
    try:
        return dict(json.loads(file.read_text())["psi"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise click.BadParameter(f"{file}: no 'psi' table of a simulation's truth.json ({exc})",
                                 param_hint="--truth") from None


def print_pdf(html: Path, pdf: Path) -> Path:
    """Print the HTML to PDF with headless Chromium (the browser the tests use); no network."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which(
        "google-chrome")
    if browser is None:
        raise click.ClickException("--pdf needs Chromium (Debian: apt-get install chromium)")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                    f"--print-to-pdf={pdf}", html.resolve().as_uri()],
                   check=True, capture_output=True, timeout=300)
    return pdf


@click.command("report")
@click.argument("export", type=click.Path(exists=True, path_type=Path))
@click.option("--models", "responses", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Model responses for the rating scores: model, stimulus, category, probability.")
@click.option("--spec", "spec_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The experiment.toml: intended durations, exclusion rules, methods paragraph.")
@click.option("--model-triads", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Model observers' triads (participant = model name) for the Psychophysical-Score.")
@click.option("--truth", "truth_path", type=click.Path(exists=True, path_type=Path),
              help="A simulation's truth.json (or its folder): generating scales are drawn and "
              "the CI coverage is reported.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The HTML file to write.")
@click.option("--pdf", is_flag=True, help="Also print the report to a PDF beside it (Chromium).")
@click.option("--figures", "figure_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write every figure as a file into this folder.")
@click.option("--figure-format", type=click.Choice(["svg", "pdf", "png"]), default="svg",
              show_default=True, help="File format of --figures.")
@click.option("--max-panels", default=12, show_default=True, type=click.IntRange(min=1),
              help="MLDS sequences drawn (and bootstrapped) in the report.")
@n_resamples_option(1000, "Bootstrap resamples for every CI of the report.")
@click.option("--n-sim", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Simulations per pair for the kappa independence test.")
@confidence_option
@alpha_option
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of all resampling.")
@click.option("--include-excluded", is_flag=True, help="Analyse excluded participants too.")
@click.option("--include-simulated", is_flag=True,
              help="Analyse simulated participants too (a rehearsal: humanlike simulate).")
def command(export: Path, responses: Path | None, spec_path: Path | None,
            model_triads: Path | None, truth_path: Path | None, out: Path, pdf: bool,
            figure_dir: Path | None, figure_format: str, max_panels: int, n_resamples: int, n_sim: int, confidence: float, alpha: float, seed: int,
            include_excluded: bool, include_simulated: bool) -> None:
    """Write one HTML report of the study in EXPORT (a `humanlike export` folder)."""
    from humanlike.analysis.io.export import read_export, read_table
    from humanlike.analysis.ratings.scores import load_model_responses
    from humanlike.analysis.report import ReportSettings, build_report

    settings = ReportSettings(n_resamples=n_resamples, n_sim=n_sim, confidence_level=confidence,
                              alpha=alpha, seed=seed, max_panels=max_panels)
    try:
        data = read_export(export, include_excluded=include_excluded,
                           include_simulated=include_simulated)
        models = load_model_responses(responses) if responses is not None else None
        triads = read_table(model_triads) if model_triads is not None else None
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    with tqdm(total=_STEPS, desc="report", unit="step") as bar:
        def step(name: str) -> None:
            bar.set_postfix_str(name)
            bar.update(1)

        try:
            report = build_report(data, models=models, spec=_spec(spec_path), settings=settings,
                                  truth=_truth(truth_path), model_triads=triads, progress=step)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        bar.update(max(0, _STEPS - bar.n))
    path = report.save(out)
    for section in report.sections:
        state = f"not available: {section.missing}" if section.missing else "ok"
        click.echo(f"  {section.title:<36} {state}")
    click.echo(f"wrote {path}")
    if figure_dir is not None:
        files = report.save_figures(figure_dir, figure_format)
        click.echo(f"wrote {len(files)} figures to {figure_dir}")
    if pdf:
        click.echo(f"wrote {print_pdf(path, path.with_suffix('.pdf'))}")
