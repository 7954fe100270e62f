"""Difficulty regimes: bins of images by human accuracy, so that alignment is read per regime.

Xu, Luo, Dickens & Mok (2026, arXiv 2603.07462) place stimuli on a spectrum of human perceptual
difficulty and read model-human alignment in four regimes, whose rankings differ. Their cut
points were not findable here, so the edges are declared: by default four equal-width bins of the
share of humans who classified an image correctly, ``[0, .25], (.25, .5], (.5, .75], (.75, 1]``
(hardest to easiest). Bins are fixed from the observed data; bootstrap resamples keep them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

DEFAULT_EDGES: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)


def check_edges(edges: Sequence[float]) -> tuple[float, ...]:
    """Return ``edges`` as floats, or raise ``ValueError`` unless strictly increasing in [0, 1]."""
    values = tuple(float(e) for e in edges)
    if len(values) < 2 or any(b <= a for a, b in pairwise(values)):
        raise ValueError(f"edges must be at least two strictly increasing numbers, got {edges!r}")
    if values[0] < 0.0 or values[-1] > 1.0:
        raise ValueError(f"edges must lie in [0, 1] (human accuracy), got {edges!r}")
    return values


def regime_labels(edges: Sequence[float]) -> list[str]:
    """Labels of the bins, e.g. ``'[0, 0.25]'`` then ``'(0.25, 0.5]'``."""
    values = check_edges(edges)
    return [("[" if i == 0 else "(") + f"{a:g}, {b:g}]"
            for i, (a, b) in enumerate(pairwise(values))]


def difficulty_regimes(human_accuracy: ArrayLike, edges: Sequence[float] = DEFAULT_EDGES) -> np.ndarray:
    """Each image's regime label from its human accuracy ('' outside the edges or NaN)."""
    values = check_edges(edges)
    cut = pd.cut(np.asarray(human_accuracy, dtype=float), bins=list(values),
                 labels=regime_labels(values), include_lowest=True, right=True)
    return np.asarray(pd.Series(cut).astype(object).fillna(""), dtype=object)
