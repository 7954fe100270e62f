"""``humanlike score DIR --models responses.csv``: score models on a published benchmark
(:func:`humanlike.analysis.benchmark.score_package`) exactly as the study's report scored its own:
scores with bootstrap CIs, the noise ceiling, the pairwise comparisons, error consistency and the
alignment profile (every metric per model with CIs, the differences decided, the metrics' agreement).

``humanlike score DIR --declared models.toml`` first runs models declared in a model TOML (or a
demo model's name) on the package's stimuli, on a GPU where there is one, then scores them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from tqdm import tqdm

from humanlike.cli.options import cache_dir_option
from humanlike.cli.stimuli_options import MODELS_HELP, device_option, load_models, split_values

if TYPE_CHECKING:
    import pandas as pd

    from humanlike.analysis.benchmark import Package


@click.command("score")
@click.argument("benchmark", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--models", "responses", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Model responses: model, stimulus, category, probability[, logit].")
@click.option("--declared", "declared", multiple=True,
              help="Models to run on the package's stimuli first. " + MODELS_HELP)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the tables (scores, noise_ceiling, comparisons, kappa) and "
                   "summary.json; the benchmark folder itself is never written.")
@click.option("--responses-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --declared: also write the models' responses here (.csv).")
@click.option("--no-error-consistency", is_flag=True, help="Skip the kappa analysis.")
@click.option("--no-alignment", is_flag=True, help="Skip the alignment profile.")
@device_option()
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Images per forward pass (default: sized to the device).")
@click.option("--seed", default=0, show_default=True, help="Seed of the demo models' training.")
@cache_dir_option
def command(benchmark: Path, responses: Path | None, declared: tuple[str, ...],
            out_dir: Path | None, responses_out: Path | None, no_error_consistency: bool,
            no_alignment: bool, device: str, batch_size: int | None, seed: int, cache_dir: Path | None) -> None:
    """Score models on the benchmark in BENCHMARK (a `humanlike publish` folder)."""
    from humanlike.analysis.benchmark import read_package, score_package
    from humanlike.analysis.ratings.scores import load_model_responses

    if (responses is None) == (not declared):
        raise click.UsageError("give either --models (a responses file) or --declared (models "
                               "to run on the stimuli)")
    if out_dir is not None and out_dir.resolve().is_relative_to(benchmark.resolve()):
        raise click.BadParameter("write the scores outside the benchmark folder",
                                 param_hint="--out")
    try:
        package = read_package(benchmark)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if responses is not None:
        try:
            models = load_model_responses(responses)
        except ValueError as exc:
            raise click.BadParameter(f"{responses}: {exc}", param_hint="--models") from None
    else:
        models = _run_declared(package, split_values(declared), device, batch_size, seed,
                               cache_dir)
        if responses_out is not None:
            responses_out.parent.mkdir(parents=True, exist_ok=True)
            models.to_csv(responses_out, index=False)
            click.echo(f"wrote {responses_out}")
    n = package.settings.n_resamples
    with tqdm(total=n, desc="bootstrap", unit="resample", leave=False) as bar:
        try:
            result = score_package(package, models, error_consistency=not no_error_consistency,
                                   alignment=not no_alignment, progress=bar.update)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(result.summary())
    if out_dir is not None:
        written = result.save(out_dir)
        click.echo(f"wrote {len(written)} files to {out_dir}")


def _run_declared(package: Package, specs: list[str], device: str, batch_size: int | None,
                  seed: int, cache_dir: Path | None) -> pd.DataFrame:
    """The declared models' responses to the rated stimuli of the package's manifest."""
    import pandas as pd

    from humanlike.stimuli.model_responses import model_responses

    manifest = pd.read_csv(package.manifest, dtype={"stimulus": str, "file": str})
    rated = set(package.export.table("ratings", ["stimulus"])["stimulus"].astype(str)) \
        if package.export.has("ratings") else set(manifest["file"])
    manifest = manifest[manifest["file"].isin(rated)].reset_index(drop=True)
    target, models = load_models(specs, device, cache_dir, seed)
    try:
        frame = model_responses(models, manifest, package.manifest.parent,
                                batch_size=batch_size, progress=True)
    except ValueError as exc:
        raise click.ClickException(f"{package.manifest}: {exc}") from None
    click.echo(f"{len(models)} models x {len(manifest)} stimuli on {target}")
    return frame
