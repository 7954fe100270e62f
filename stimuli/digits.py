"""Natural digit images from scikit-learn's bundled digits (8x8, upsampled), plus catch prototypes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.datasets import load_digits

from humanlike.vocabulary import StimulusKind


def digit_png(pixels_8x8: np.ndarray, path: Path, size: int = 112) -> None:
    """Write an 8x8 digit (values 0..16) as a greyscale PNG upsampled bicubically to ``size``."""
    arr = np.clip(np.asarray(pixels_8x8, dtype=float) / 16.0, 0, 1)
    img = Image.fromarray((arr * 255).round().astype(np.uint8), mode="L")
    img.resize((size, size), Image.Resampling.BICUBIC).save(path, optimize=True)


def build_digit_stimuli(
    out_dir: Path, *, per_class: int = 2, catch_per_class: int = 1, seed: int = 0,
    exclude: np.ndarray | None = None,
) -> pd.DataFrame:
    """Write natural digits (``per_class`` random images per class) and catch trials (class-mean
    prototypes, unambiguous by construction) into ``out_dir``; return their manifest rows."""
    digits = load_digits()
    rng = np.random.default_rng(seed)
    (out_dir / "natural").mkdir(parents=True, exist_ok=True)
    (out_dir / "catch").mkdir(parents=True, exist_ok=True)
    usable = np.ones(len(digits.target), bool)
    if exclude is not None:
        usable[exclude] = False
    rows = []
    for label in range(10):
        idx = np.flatnonzero((digits.target == label) & usable)
        for i in rng.choice(idx, size=per_class, replace=False):
            name = f"natural/digit{label}_{i:04d}.png"
            digit_png(digits.images[i], out_dir / name)
            rows.append({"file": name, "kind": StimulusKind.NATURAL.value, "true_class": str(label),
                         "dataset_index": int(i)})
        if catch_per_class:
            proto = digits.images[digits.target == label].mean(axis=0)
            proto = proto / proto.max() * 16
            for j in range(catch_per_class):
                name = f"catch/digit{label}_prototype{j}.png"
                digit_png(proto, out_dir / name)
                rows.append({"file": name, "kind": "catch", "true_class": str(label),
                             "dataset_index": None})
    return pd.DataFrame(rows)


def noise_mask(path: Path, size: int = 112, seed: int = 0) -> None:
    """A greyscale pixel-noise mask (8x8 blocks upsampled, like the digits' own grain)."""
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(8, 8), dtype=np.uint8)
    Image.fromarray(arr, mode="L").resize((size, size), Image.Resampling.NEAREST).save(path)


def build_noisy_digits(
    out_dir: Path, *, levels: tuple[float, ...] = (0.15, 0.45), per_class: int = 1,
    seed: int = 0, block: str = "classification", exclude: np.ndarray | None = None,
) -> pd.DataFrame:
    """Digits in additive Gaussian pixel noise (sd ``level`` of the full range), each image at
    every level, for a classification block; manifest rows carry ``condition`` (``noise15`` ...),
    ``noise`` and ``block`` (only that block uses them)."""
    digits = load_digits()
    rng = np.random.default_rng(seed + 1)
    folder = out_dir / block
    folder.mkdir(parents=True, exist_ok=True)
    usable = np.ones(len(digits.target), bool)
    if exclude is not None:
        usable[exclude] = False
    rows = []
    for label in range(10):
        for i in rng.choice(np.flatnonzero((digits.target == label) & usable), size=per_class,
                            replace=False):
            base = np.asarray(digits.images[i], dtype=float) / 16.0
            for level in levels:
                noisy = np.clip(base + rng.normal(0.0, level, size=base.shape), 0, 1) * 16
                condition = f"noise{round(level * 100):02d}"
                name = f"{block}/digit{label}_{i:04d}_{condition}.png"
                digit_png(noisy, out_dir / name)
                rows.append({"file": name, "kind": "natural", "true_class": str(label),
                             "dataset_index": int(i), "condition": condition,
                             "noise": float(level), "block": block})
    return pd.DataFrame(rows)
