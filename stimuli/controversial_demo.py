"""Controversial stimuli for the demo experiment, from the cached demo digit models.

``build_demo_controversial`` is what the demo set-up calls: it trains (once; cached) the demo
models, synthesises and selects stimuli for the demo model pairs, writes PNGs under
``out_dir/controversial/`` and ``out_dir/model_responses.csv``, and returns manifest rows.
``demo_model_responses`` recomputes the responses for a merged manifest (natural digits too);
``demo_heldout_digit_indices`` lists the digits no demo model saw in training or calibration.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from humanlike.stimuli.controversial import SynthesisSettings
from humanlike.stimuli.controversial_manifest import build_controversial_set
from humanlike.stimuli.demo_models import DEMO_MODEL_NAMES, demo_models, digit_splits
from humanlike.stimuli.model_responses import model_responses
from humanlike.stimuli.models import torch_threads

# Two noise restarts instead of five keep the demo set-up short; failures are rarely selected anyway.
DEMO_SETTINGS = SynthesisSettings(max_attempts=2)
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
    models = demo_models(DEMO_MODEL_NAMES, cache_dir=cache_dir, random_state=seed)
    # Batches of 90 small images: a second intra-op thread costs more than it gives (measured).
    with torch_threads(1):
        return build_controversial_set(
            models,
            model_pairs,
            out_dir,
            per_pair=per_pair,
            seed=seed,
            settings=settings or DEMO_SETTINGS,
            progress=progress,
        ).manifest


def demo_heldout_digit_indices(seed: int = 0) -> np.ndarray:
    """Positions in ``sklearn.datasets.load_digits()`` of the test split (unseen by the demo models)."""
    return np.sort(digit_splits(seed).test_index)


def demo_model_responses(
    manifest: pd.DataFrame, root: Path, *, seed: int = 0, cache_dir: Path | None = None
) -> pd.DataFrame:
    """The four demo models' responses to every stimulus of ``manifest`` (files relative to ``root``)."""
    return model_responses(
        demo_models(DEMO_MODEL_NAMES, cache_dir=cache_dir, random_state=seed), manifest, root
    )
