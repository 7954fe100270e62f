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
from tqdm.auto import tqdm

from humanlike.stimuli.device import batch_size_for
from humanlike.stimuli.models import CandidateModel

RESPONSE_COLUMNS = ["model", "stimulus", "category", "probability", "logit"]


def load_stimulus_images(
    root: str | Path, files: Iterable[str], input_shape: tuple[int, int, int]
) -> np.ndarray:
    """Read image files as float32 (N, C, H, W) in [0, 1], resampled to the model's input size:
    box (area) resampling when shrinking, bilinear when enlarging.

    Box resampling exactly undoes nearest-neighbour upscaling by an integer factor, so PNGs
    enlarged for display give the model the pixels it was optimised on.
    """
    channels, height, width = input_shape
    modes = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
    if channels not in modes:
        raise ValueError(f"input_shape must have 1 to 4 channels (a PNG's), got {channels}")
    mode = modes[channels]
    root = Path(root)
    arrays = []
    for name in files:
        path = root / name
        if not path.is_file():
            raise ValueError(f"manifest column 'file': {name!r} not found under {root}")
        with Image.open(path) as opened:
            image = opened.convert(mode)
            if image.size != (width, height):
                shrink = image.width >= width and image.height >= height
                method = Image.Resampling.BOX if shrink else Image.Resampling.BILINEAR
                image = image.resize((width, height), method)
            arrays.append(np.asarray(image, dtype=np.float32).reshape(height, width, channels))
    if not arrays:
        return np.zeros((0, *input_shape), dtype=np.float32)
    return np.stack(arrays).transpose(0, 3, 1, 2) / np.float32(255.0)


def model_responses(
    models: Mapping[str, CandidateModel] | Iterable[CandidateModel],
    manifest: pd.DataFrame,
    root: str | Path,
    *,
    batch_size: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Run every model on every stimulus file of ``manifest`` (relative to ``root``): long frame.

    Files are read in batches (``batch_size`` images; default sized to the first model's device and
    input), each batch once per input shape, so a large natural set never sits in memory whole;
    every model runs on its own device. ``progress`` shows a bar over images.
    """
    if "file" not in manifest.columns:
        raise ValueError("manifest has no 'file' column")
    named = dict(models) if isinstance(models, Mapping) else {m.name: m for m in models}
    if not named:
        raise ValueError("models is empty")
    files = manifest["file"].astype(str).tolist()
    if len(set(files)) != len(files):
        raise ValueError("manifest column 'file' has duplicate entries")
    root = Path(root)
    missing = [f for f in files if not (root / f).is_file()]
    if missing:
        raise ValueError(
            f"manifest column 'file': {missing[0]!r} not found under {root}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )
    first = next(iter(named.values()))
    shapes = {tuple(m.input_shape) for m in named.values()}
    largest = max(shapes, key=lambda s: s[0] * s[1] * s[2])
    size = batch_size_for(first.device, largest, len(files), requested=batch_size)
    logits: dict[str, list[np.ndarray]] = {name: [] for name in named}
    with tqdm(total=len(files), desc="model responses", unit="image", disable=not progress) as bar:
        for start in range(0, len(files), size):
            chunk = files[start : start + size]
            images = {shape: load_stimulus_images(root, chunk, shape) for shape in shapes}
            for name, model in named.items():
                logits[name].append(
                    model.predict_logits(images[tuple(model.input_shape)], batch_size=size)
                )
            bar.update(len(chunk))
    frames = []
    for name, model in named.items():
        values = np.concatenate(logits[name]) if logits[name] else np.zeros((0, len(model.classes)))
        n, k = values.shape
        frames.append(
            pd.DataFrame(
                {
                    "model": name,
                    "stimulus": np.repeat(files, k),
                    "category": np.tile(model.classes, n),
                    "probability": special.expit(values.ravel()),
                    "logit": values.ravel(),
                }
            )
        )
    if not frames:
        return pd.DataFrame(columns=RESPONSE_COLUMNS)
    return pd.concat(frames, ignore_index=True)[RESPONSE_COLUMNS]
