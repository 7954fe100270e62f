"""Options shared by the ``humanlike stimuli`` commands that run torch models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

DEVICE_HELP = "Where torch runs: auto (a GPU when torch sees one, else the CPU), cpu, cuda or cuda:N."
MODELS_HELP = (
    "Candidate models, comma-separated or repeated: a demo model (cnn, logreg, kde, adv_cnn: "
    "28x28 digits; rgb_cnn, rgb_mlp: 32x32 RGB digits), a model TOML file (entry point or "
    "TorchScript, input transform, classes; see docs/controversial-stimuli.md) or NAME=FILE.toml. "
    "Pickled model files are refused."
)


def split_values(values: tuple[str, ...]) -> list[str]:
    """Comma-separated or repeated option values as one list."""
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def device_option(default: str = "auto") -> Callable[[Any], Any]:
    return click.option("--device", default=default, show_default=True, help=DEVICE_HELP)


def load_models(model_specs: list[str], device_spec: str, cache_dir: Any, seed: int) -> tuple[Any, Any]:
    """(device, {name: CandidateModel}) or a click error naming what is wrong."""
    from humanlike.stimuli.device import resolve_device
    from humanlike.stimuli.model_registry import resolve_models, uncalibrated

    try:
        device = resolve_device(device_spec)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--device") from error
    try:
        models = resolve_models(model_specs, device=device, cache_dir=cache_dir, seed=seed)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--models") from error
    for name in uncalibrated(models):
        click.echo(
            f"warning: model {name!r} has no calibration; its raw logits are used (fit one with "
            "`humanlike stimuli calibrate`)",
            err=True,
        )
    return device, models
