"""``humanlike stimuli responses``: every model's responses to every stimulus of a manifest."""

from __future__ import annotations

from pathlib import Path

import click

from humanlike.cli.options import cache_dir_option
from humanlike.cli.stimuli_options import MODELS_HELP, device_option, load_models, split_values


@click.command()
@click.option("--models", "model_specs", multiple=True, required=True, help=MODELS_HELP)
@click.option(
    "--manifest",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Stimulus manifest CSV; its 'file' column is relative to the manifest's folder.",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the frame (.csv or .parquet). Default: model_responses.csv beside the "
    "manifest.",
)
@device_option()
@click.option("--batch-size", type=int, default=None,
              help="Images per forward pass (default: sized to the device).")  # fmt: skip
@click.option("--threads", default=2, show_default=True, help="torch intra-op threads (CPU).")
@click.option("--seed", default=0, show_default=True, help="Seed of the demo models' training.")
@cache_dir_option
def command(
    model_specs: tuple[str, ...],
    manifest: Path,
    out_path: Path | None,
    device: str,
    batch_size: int | None,
    threads: int,
    seed: int,
    cache_dir: Path | None,
) -> None:
    """Write the model, stimulus, category, probability, logit frame the ratings analysis reads,
    for natural and controversial stimuli alike."""
    import pandas as pd

    from humanlike.stimuli.model_responses import model_responses
    from humanlike.stimuli.models import torch_threads

    out_path = out_path or manifest.parent / "model_responses.csv"
    if out_path.suffix not in (".csv", ".parquet"):
        raise click.BadParameter(f"{out_path}: write .csv or .parquet", param_hint="--out")
    if batch_size is not None and batch_size < 1:
        raise click.BadParameter("must be at least 1", param_hint="--batch-size")
    target, models = load_models(split_values(model_specs), device, cache_dir, seed)
    frame = pd.read_csv(manifest)
    try:
        with torch_threads(threads):
            responses = model_responses(
                models, frame, manifest.parent, batch_size=batch_size, progress=True
            )
    except ValueError as error:
        raise click.UsageError(f"{manifest}: {error}") from error
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if out_path.suffix == ".parquet":
        responses.to_parquet(out_path, index=False)
    else:
        responses.to_csv(out_path, index=False)
    click.echo(
        f"wrote {out_path}: {len(responses)} rows ({len(models)} models x {len(frame)} stimuli, "
        f"on {target})"
    )
