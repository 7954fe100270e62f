"""``humanlike stimuli controversial``: synthesise, select and write controversial stimuli."""

from __future__ import annotations

import itertools
from pathlib import Path

import click


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


@click.command()
@click.option(
    "--models",
    "model_specs",
    multiple=True,
    help="Candidate models, comma-separated or repeated: a demo model name (cnn, logreg, kde, "
    "adv_cnn) or NAME=PATH to a file written by CandidateModel.save (unpickled: trusted files "
    "only). Default: the four demo models.",
)
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
    "--threads",
    default=2,
    show_default=True,
    help="torch intra-op threads (1 is faster on a busy machine).",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where trained demo models are cached (default ~/.cache/humanlike).",
)
def command(
    model_specs: tuple[str, ...],
    pair_specs: tuple[str, ...],
    out_dir: Path,
    per_pair: int,
    seed: int,
    max_attempts: int,
    max_steps: int,
    threads: int,
    cache_dir: Path | None,
) -> None:
    """Make controversial stimuli for model pairs (Golan, Raju & Kriegeskorte 2020)."""
    from humanlike.stimuli.controversial import SynthesisSettings
    from humanlike.stimuli.controversial_manifest import build_controversial_set
    from humanlike.stimuli.demo_models import DEMO_MODEL_NAMES, demo_models
    from humanlike.stimuli.models import CandidateModel, torch_threads

    specs = _split(model_specs) or list(DEMO_MODEL_NAMES)
    demo_names = [s for s in specs if "=" not in s]
    unknown = [s for s in demo_names if s not in DEMO_MODEL_NAMES]
    if unknown:
        raise click.BadParameter(
            f"{unknown} are neither demo models {list(DEMO_MODEL_NAMES)} nor NAME=PATH",
            param_hint="--models",
        )
    models = (
        dict(demo_models(demo_names, cache_dir=cache_dir, random_state=seed)) if demo_names else {}
    )
    for spec in specs:
        if "=" in spec:
            name, path = spec.split("=", 1)
            try:
                model = CandidateModel.load(path)
            except ValueError as error:
                raise click.BadParameter(str(error), param_hint="--models") from error
            model.name = name
            models[name] = model
    if pair_specs:
        pairs = []
        for spec in _split(pair_specs):
            parts = spec.split(":")
            if len(parts) != 2:
                raise click.BadParameter(f"{spec!r} is not A:B", param_hint="--pairs")
            pairs.append((parts[0], parts[1]))
    else:
        pairs = list(itertools.combinations(models, 2))
    settings = SynthesisSettings(max_attempts=max_attempts, max_steps=max_steps)
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
    click.echo(
        f"wrote {len(built.manifest)} stimuli, {out_dir / 'manifest.csv'} and "
        f"{out_dir / 'model_responses.csv'} ({len(built.responses)} rows)"
    )
