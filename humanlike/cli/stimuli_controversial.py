"""``humanlike stimuli controversial``: synthesise, select and write controversial stimuli."""

from __future__ import annotations

import itertools
from pathlib import Path

import click

from humanlike.cli.options import cache_dir_option
from humanlike.cli.stimuli_options import MODELS_HELP, device_option, load_models, split_values


@click.command()
@click.option("--models", "model_specs", multiple=True, help=MODELS_HELP + " Default: the four "
              "digit demo models.")  # fmt: skip
@click.option(
    "--pairs",
    "pair_specs",
    multiple=True,
    help="Model pairs as A:B, comma-separated or repeated. Default: every pair of --models.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for controversial/*.png, manifest.csv and model_responses.csv.",
)
@click.option("--per-pair", default=20, show_default=True, help="Stimuli kept per model pair.")
@click.option("--seed", default=0, show_default=True, help="Seed for noise and demo training.")
@click.option("--max-attempts", default=5, show_default=True, help="Noise restarts (c < 0.85).")
@click.option("--max-steps", default=1000, show_default=True, help="Step cap per beta phase.")
@click.option(
    "--parameterisation",
    type=click.Choice(["pixel", "fourier"]),
    default="pixel",
    show_default=True,
    help="pixel: x = sigmoid(z) per pixel; fourier: decorrelated Fourier space (colour networks).",
)
@click.option(
    "--objective",
    type=click.Choice(["logsigmoid", "golan2020"]),
    default="logsigmoid",
    show_default=True,
    help="logsigmoid: smooth minimum of log probabilities (humanlike's variant); golan2020: the "
    "paper's eq. 4, smooth minimum of calibrated logits from U(0, 1) noise.",
)
@click.option("--learning-rate", type=float, default=None,
              help="Adam's step (default: 0.3 pixel, 0.05 fourier).")  # fmt: skip
@device_option()
@click.option(
    "--precision",
    type=click.Choice(["float32", "bfloat16", "float16"]),
    default="float32",
    show_default=True,
    help="Mixed precision for the optimiser's forward passes (c is always reported in float32).",
)
@click.option("--batch-size", type=int, default=None,
              help="Images optimised at once (default: sized to the device).")  # fmt: skip
@click.option(
    "--threads",
    default=1,
    show_default=True,
    help="torch intra-op threads on the CPU (more help only on an idle machine with spare cores).",
)
@cache_dir_option
def command(
    model_specs: tuple[str, ...],
    pair_specs: tuple[str, ...],
    out_dir: Path,
    per_pair: int,
    seed: int,
    max_attempts: int,
    max_steps: int,
    parameterisation: str,
    objective: str,
    learning_rate: float | None,
    device: str,
    precision: str,
    batch_size: int | None,
    threads: int,
    cache_dir: Path | None,
) -> None:
    """Make controversial stimuli for model pairs (Golan, Raju & Kriegeskorte 2020)."""
    from humanlike.stimuli.controversial import SynthesisSettings
    from humanlike.stimuli.controversial_manifest import build_controversial_set
    from humanlike.stimuli.demo_models import DEMO_MODEL_NAMES
    from humanlike.stimuli.device import check_precision
    from humanlike.stimuli.models import torch_threads

    specs = split_values(model_specs) or list(DEMO_MODEL_NAMES)
    target, models = load_models(specs, device, cache_dir, seed)
    if pair_specs:
        pairs = []
        for spec in split_values(pair_specs):
            parts = spec.split(":")
            if len(parts) != 2:
                raise click.BadParameter(f"{spec!r} is not A:B", param_hint="--pairs")
            pairs.append((parts[0], parts[1]))
    else:
        pairs = list(itertools.combinations(models, 2))
    try:
        check_precision(precision, target)
        settings = SynthesisSettings(
            max_attempts=max_attempts,
            max_steps=max_steps,
            parameterisation=parameterisation,
            objective=objective,
            learning_rate=learning_rate,
            precision=precision,
            batch_size=batch_size,
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    click.echo(f"device: {target}, precision: {precision}, parameterisation: {parameterisation}, "
               f"objective: {objective}")
    try:
        with torch_threads(threads):
            built = build_controversial_set(
                models, pairs, out_dir, per_pair=per_pair, seed=seed, settings=settings
            )
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    built.manifest.to_csv(out_dir / "manifest.csv", index=False)
    for stimuli, selection in zip(built.stimuli, built.selections, strict=True):
        kept = stimuli.controversiality[selection.index]
        click.echo(
            f"{stimuli.model_1} vs {stimuli.model_2}: {int((stimuli.controversiality >= 0.85).sum())}"
            f"/{len(stimuli.controversiality)} class pairs reached c >= 0.85; kept {len(kept)} "
            f"(c from {kept.min():.3f} to {kept.max():.3f}, mean {kept.mean():.3f})"
        )
        if stimuli.precision_gap is not None:
            verdict = "within" if stimuli.precision_gap <= 0.01 else "NOT within"
            click.echo(
                f"  {precision}: c differs from float32 by at most {stimuli.precision_gap:.4f} "
                f"({verdict} 0.01)"
            )
    click.echo(
        f"wrote {len(built.manifest)} stimuli, {out_dir / 'manifest.csv'} and "
        f"{out_dir / 'model_responses.csv'} ({len(built.responses)} rows)"
    )
