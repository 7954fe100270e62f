"""Demo MLDS stimuli from images bundled with scikit-image (no downloads).

Six sample images (cameraman, astronaut, cat, coffee cup, rocket, horse silhouette) are
centre-cropped to 128 x 128 px and given object masks (an Otsu threshold; the horse is its own
silhouette); pairs come from the top Jaccard partner of each image and the first ``n_sequences``
pairs by decreasing Jaccard index become 7-level blend sequences.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from humanlike.stimuli.mlds import fit_square, object_mask, select_pairs, write_sequences

DEMO_IMAGES = ("camera", "astronaut", "chelsea", "coffee", "rocket", "horse")
DEMO_SIZE = 128


def demo_images(size: int = DEMO_SIZE) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(images, masks) of the scikit-image samples in ``DEMO_IMAGES``, ``size`` x ``size``."""
    from skimage import data

    images, masks = {}, {}
    for name in DEMO_IMAGES:
        if name == "horse":
            mask = ~data.horse()  # True marks the background in scikit-image's silhouette
            image = np.where(mask, 40, 215).astype(np.uint8)
        else:
            image = getattr(data, name)()
            mask = object_mask(image)
        images[name], masks[name] = fit_square(image, size), fit_square(mask, size)
    return images, masks


def build_demo_mlds(out_dir: Path, n_sequences: int = 2) -> pd.DataFrame:
    """Write ``n_sequences`` demo blend sequences (7 levels) under ``out_dir / "mlds"`` and return
    their manifest rows (``file`` relative to ``out_dir``; no manifest file is written)."""
    images, masks = demo_images()
    pairs = select_pairs(masks, k=1)
    if not 1 <= n_sequences <= len(pairs):
        raise ValueError(f"n_sequences must be between 1 and {len(pairs)}, got {n_sequences}")
    pairs = pairs.iloc[:n_sequences].reset_index(drop=True)
    names = [f"{a}-{b}" for a, b in zip(pairs.source_a, pairs.source_b, strict=True)]
    return write_sequences(pairs, images, masks, Path(out_dir), subdir="mlds",
                           sequence_names=names, manifest_name=None)
