"""Controversial stimuli for the demo experiment, from the cached demo digit models.

``build_demo_controversial`` is what the demo set-up calls: it trains (once; cached) the demo
models, synthesises and selects stimuli for the demo model pairs, writes PNGs under
``out_dir/controversial/`` and ``out_dir/model_responses.csv``, and returns manifest rows.
``build_demo_natural_digits`` writes held-out natural digits beside them, and
``demo_model_responses`` recomputes the responses for a merged manifest.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from humanlike.stimuli.controversial import SynthesisSettings
from humanlike.stimuli.controversial_manifest import build_controversial_manifest, save_png
from humanlike.stimuli.demo_models import DEMO_MODEL_NAMES, DIGIT_CLASSES, demo_models, digit_splits
from humanlike.stimuli.model_responses import model_responses

# A conventional feed-forward CNN against a generative pixel-space model: the contrast Golan et al.
# (2020) found most informative about human judgements.
DEMO_MODEL_PAIRS: tuple[tuple[str, str], ...] = (("cnn", "kde"),)


def build_demo_controversial(
    out_dir: Path,
    *,
    model_pairs: Sequence[tuple[str, str]] = DEMO_MODEL_PAIRS,
    per_pair: int = 20,
    seed: int = 0,
    cache_dir: Path | None = None,
    settings: SynthesisSettings | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Write ``per_pair`` selected controversial digits per model pair; return their manifest rows.

    ``file`` is relative to ``out_dir`` (``controversial/<m1>_vs_<m2>_<a>_<b>.png``, 224x224
    greyscale: the 28x28 stimulus enlarged 8x); ``model_responses.csv`` in ``out_dir`` holds all
    four demo models' responses to these stimuli. Demo models are cached in ``cache_dir``
    (default ``demo_models.default_cache_dir()``).
    """
    torch.set_num_threads(1)  # tiny batches: a second intra-op thread costs more than it gives
    models = demo_models(DEMO_MODEL_NAMES, cache_dir=cache_dir, random_state=seed)
    return build_controversial_manifest(
        models,
        model_pairs,
        out_dir,
        per_pair=per_pair,
        seed=seed,
        settings=settings,
        progress=progress,
    )


def build_demo_natural_digits(
    out_dir: Path, *, per_class: int = 2, seed: int = 0, display_scale: int = 8
) -> pd.DataFrame:
    """Write ``per_class`` test-split digits per class (never seen in training or calibration) as
    ``natural/digit_<index>.png``; return manifest rows ``file, kind = natural, true_class``."""
    if per_class < 1:
        raise ValueError("per_class must be at least 1")
    splits = digit_splits(seed)
    rng = np.random.default_rng(seed)
    rows = []
    for k, label in enumerate(DIGIT_CLASSES):
        members = np.flatnonzero(splits.test_labels == k)
        for i in np.sort(rng.choice(members, size=per_class, replace=False)):
            rel = f"natural/digit_{i:04d}.png"
            save_png(splits.test_images[i], Path(out_dir) / rel, display_scale=display_scale)
            rows.append({"file": rel, "kind": "natural", "true_class": label})
    return pd.DataFrame(rows)


def demo_model_responses(
    manifest: pd.DataFrame, root: Path, *, seed: int = 0, cache_dir: Path | None = None
) -> pd.DataFrame:
    """The four demo models' responses to every stimulus of ``manifest`` (files relative to ``root``)."""
    return model_responses(
        demo_models(DEMO_MODEL_NAMES, cache_dir=cache_dir, random_state=seed), manifest, root
    )
