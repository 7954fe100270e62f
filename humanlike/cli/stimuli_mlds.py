"""``humanlike stimuli mlds``: blend sequences between object images, with a manifest."""

from __future__ import annotations

from pathlib import Path

import click

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}


def _expand(paths: tuple[Path, ...]) -> list[Path]:
    """Image files from the arguments; folders contribute their images except ``*_mask`` files."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES
                            and not p.stem.endswith("_mask"))
        else:
            files.append(path)
    return files


def _find_masks(files: list[Path], mask_dir: Path | None) -> dict[str, Path]:
    """``<stem>_mask.*`` next to an image or in ``mask_dir`` (where ``<stem>.*`` also counts)."""
    found = {}
    for f in files:
        candidates = [f.with_name(f"{f.stem}_mask{s}") for s in IMAGE_SUFFIXES]
        if mask_dir is not None:
            candidates += [mask_dir / f"{f.stem}_mask{s}" for s in IMAGE_SUFFIXES]
            candidates += [mask_dir / f"{f.stem}{s}" for s in IMAGE_SUFFIXES]
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is not None:
            found[f.stem] = hit
    return found


@click.command("mlds")
@click.argument("images", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the sequences and manifest.csv.")
@click.option("--masks", "mask_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder of object masks named like the images (else <stem>_mask.* next to "
                   "each image, else the alpha channel, else an Otsu threshold).")
@click.option("--top-k", default=1, show_default=True,
              help="Partners kept per image, by Jaccard index of the masks.")
@click.option("--levels", default=7, show_default=True, help="Blend levels per sequence.")
@click.option("--sigma", default=3.0, show_default=True, help="Gaussian blur sigma in pixels.")
@click.option("--size", default=256, show_default=True,
              help="Centre-crop and resize every image to SIZE x SIZE px (0: keep sizes).")
@click.option("--background", default=0.5, show_default=True,
              help="Grey value (0-1) outside the object masks.")
def command(images: tuple[Path, ...], out_dir: Path, mask_dir: Path | None, top_k: int,
            levels: int, sigma: float, size: int, background: float) -> None:
    """Make MLDS blend sequences from IMAGES (files and/or folders of images)."""
    from humanlike.stimuli.mlds import build_sequences

    files = _expand(images)
    if len(files) < 2:
        raise click.ClickException(f"need at least two images, got {len(files)}")
    try:
        manifest = build_sequences(files, out_dir, mask_paths=_find_masks(files, mask_dir),
                                   k=top_k, size=size or None, n_levels=levels,
                                   blur_sigma=sigma, background=background)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    n_seq = manifest["sequence"].nunique()
    click.echo(f"{n_seq} sequence(s) x {levels} levels from {len(files)} images "
               f"(top {top_k} Jaccard partner(s) each)")
    click.echo(f"wrote {out_dir / 'manifest.csv'}")
