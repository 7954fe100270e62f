"""``humanlike stimuli calibrate``: fit a model's shared affine logit on held-out natural images."""

from __future__ import annotations

from pathlib import Path

import click

from humanlike.cli.stimuli_options import device_option


@click.command()
@click.argument("model_toml", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--manifest",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Manifest CSV of held-out natural images: 'file' (relative to its folder) and a label.",
)
@click.option("--label-col", default="true_class", show_default=True,
              help="Column naming each image's category (one of the model's classes).")  # fmt: skip
@device_option()
@click.option("--batch-size", type=int, default=None, help="Images per forward pass.")
def command(
    model_toml: Path, manifest: Path, label_col: str, device: str, batch_size: int | None
) -> None:
    """Fit z' = s z + t shared by all classes (Golan, Raju & Kriegeskorte 2020, Methods) on the
    manifest's images; write <model>.calibration.json beside MODEL_TOML."""
    import pandas as pd

    from humanlike.stimuli.device import resolve_device
    from humanlike.stimuli.model_responses import load_stimulus_images
    from humanlike.stimuli.model_spec import fit_spec_calibration, read_model_spec

    try:
        target = resolve_device(device)
        spec = read_model_spec(model_toml)
        frame = pd.read_csv(manifest)
        for col in ("file", label_col):
            if col not in frame.columns:
                raise ValueError(f"{manifest}: no column {col!r}; got {list(frame.columns)}")
        if frame.empty:
            raise ValueError(f"{manifest}: lists no images")
        images = load_stimulus_images(manifest.parent, frame["file"].astype(str), spec.input.shape)
        written = fit_spec_calibration(
            spec, images, frame[label_col].astype(str).tolist(), device=target,
            batch_size=batch_size,
        )  # fmt: skip
    except ValueError as error:
        raise click.ClickException(str(error)) from error
    click.echo(
        f"{spec.name}: slope {written['slope']:.4f}, intercept {written['intercept']:.4f} on "
        f"{written['n_images']} images; cross-entropy {written['loss_before']:.4f} -> "
        f"{written['loss_after']:.4f}; accuracy {written['accuracy']:.3f}\n"
        f"wrote {spec.calibration_path}"
    )
