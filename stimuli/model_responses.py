"""Every candidate model's responses to every stimulus of a manifest (the model-responses frame).

Columns ``model, stimulus, category, probability, logit``: ``stimulus`` is the manifest's ``file``
(path relative to the manifest's folder, the id used in exports), ``category`` a class label,
``logit`` the calibrated logit and ``probability = sigmoid(logit)`` (multi-label readout).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from scipy import special

from humanlike.stimuli.models import CandidateModel

RESPONSE_COLUMNS = ["model", "stimulus", "category", "probability", "logit"]


def load_stimulus_images(
    root: str | Path, files: Iterable[str], input_shape: tuple[int, int, int]
) -> np.ndarray:
    """Read image files as float32 (N, C, H, W) in [0, 1], box-resampled to the model's input size.

    Box resampling exactly undoes nearest-neighbour upscaling by an integer factor, so PNGs
    enlarged for display give the model the pixels it was optimised on.
    """
    channels, height, width = input_shape
    if channels not in (1, 3):
        raise ValueError(f"input_shape must have 1 or 3 channels, got {channels}")
    mode = "L" if channels == 1 else "RGB"
    root = Path(root)
    arrays = []
    for name in files:
        path = root / name
        if not path.is_file():
            raise ValueError(f"manifest column 'file': {name!r} not found under {root}")
        with Image.open(path) as opened:
            image = opened.convert(mode)
            if image.size != (width, height):
                image = image.resize((width, height), Image.Resampling.BOX)
            arrays.append(np.asarray(image, dtype=np.float32).reshape(height, width, channels))
    if not arrays:
        return np.zeros((0, *input_shape), dtype=np.float32)
    return np.stack(arrays).transpose(0, 3, 1, 2) / np.float32(255.0)


def model_responses(
    models: Mapping[str, CandidateModel] | Iterable[CandidateModel],
    manifest: pd.DataFrame,
    root: str | Path,
) -> pd.DataFrame:
    """Run every model on every stimulus file of ``manifest`` (relative to ``root``): long frame."""
    if "file" not in manifest.columns:
        raise ValueError("manifest has no 'file' column")
    named = dict(models) if isinstance(models, Mapping) else {m.name: m for m in models}
    if not named:
        raise ValueError("models is empty")
    files = manifest["file"].astype(str).tolist()
    if len(set(files)) != len(files):
        raise ValueError("manifest column 'file' has duplicate entries")
    frames = []
    images_by_shape: dict[tuple[int, ...], np.ndarray] = {}
    for name, model in named.items():
        shape = tuple(model.input_shape)
        if shape not in images_by_shape:
            images_by_shape[shape] = load_stimulus_images(root, files, shape)
        logits = model.predict_logits(images_by_shape[shape])
        n, k = logits.shape
        frames.append(
            pd.DataFrame(
                {
                    "model": name,
                    "stimulus": np.repeat(files, k),
                    "category": np.tile(model.classes, n),
                    "probability": special.expit(logits.ravel()),
                    "logit": logits.ravel(),
                }
            )
        )
    if not frames:
        return pd.DataFrame(columns=RESPONSE_COLUMNS)
    return pd.concat(frames, ignore_index=True)[RESPONSE_COLUMNS]
