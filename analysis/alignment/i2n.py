"""I2n: image-by-distractor normalised d' (Rajalingham et al. 2018, J. Neurosci., "Large-scale,
high-resolution comparison of the core visual object recognition behavior of humans, monkeys, and
state-of-the-art deep artificial neural networks").

From n-way classification trials (many per image), the binary task "true class c vs distractor j"
is read off the responses that name c or j: ``HR_ij = n_i(c) / (n_i(c) + n_i(j))`` for image i of
class c, ``FAR_cj = N_j(c) / (N_j(c) + N_j(j))`` over the trials of class-j images, ``d'_ij =
Z(HR_ij) - Z(FAR_cj)``; I2n subtracts the mean d' of the images of class c for the same
distractor, leaving what is specific to the image. Rates are kept inside ``[1/(2n), 1 - 1/(2n)]``
(n: the rate's trials; Macmillan & Creelman 2005). Designs with fewer than ``min_trials`` trials
per image (e.g. one deterministic model response) get no I2n: ``ValueError`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import norm

from humanlike.analysis._resampling import (
    ConfidenceInterval,
    RandomState,
    as_rng,
    bootstrap_counts,
    check_n_resamples,
    confidence_interval,
)

MIN_TRIALS = 10


def _clipped_z(hits: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``Z(hits / total)`` with the rate kept inside ``[1/(2 total), 1 - 1/(2 total)]``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = hits / total
        half = 0.5 / total
    return norm.ppf(np.clip(rate, half, 1.0 - half))


def i2n(trials: pd.DataFrame, min_trials: int = MIN_TRIALS) -> pd.DataFrame:
    """I2n per (image, distractor) from trials ``stimulus, category, response`` (Rajalingham 2018)."""
    missing = [c for c in ("stimulus", "category", "response") if c not in trials.columns]
    if missing:
        raise ValueError(f"trials lack column(s) {missing} (need stimulus, category, response)")
    per_image = trials.groupby("stimulus").size()
    if per_image.min() < min_trials:
        raise ValueError(f"I2n needs at least {min_trials} trials per image; "
                         f"{int((per_image < min_trials).sum())} image(s) have fewer "
                         f"(fewest: {int(per_image.min())})")
    counts = pd.crosstab([trials["stimulus"], trials["category"]], trials["response"])
    classes = sorted(set(trials["category"].astype(str)))
    counts = counts.reindex(columns=classes, fill_value=0)
    image_class = counts.index.get_level_values("category").astype(str).to_numpy()
    n = counts.to_numpy(dtype=float)  # images x response classes
    by_class = counts.groupby(level="category").sum().reindex(classes, fill_value=0).to_numpy(float)
    col = {c: k for k, c in enumerate(classes)}
    true = np.array([col[c] for c in image_class])
    rows = np.arange(n.shape[0])
    hits = n[rows, true][:, None]  # n_i(c)
    hr_z = _clipped_z(np.broadcast_to(hits, n.shape), hits + n)  # vs each distractor j
    fa = by_class[:, true].T  # N_j(c): class-j trials answered c, images x j
    far_z = _clipped_z(fa, fa + np.diag(by_class)[None, :])
    d = hr_z - far_z
    d[rows, true] = np.nan  # the true class is no distractor
    frame = pd.DataFrame(d, index=counts.index.get_level_values("stimulus"), columns=classes)
    frame["category"] = image_class
    norm_d = frame[classes] - frame.groupby("category")[classes].transform("mean")
    out = norm_d.stack().reset_index()
    out.columns = ["stimulus", "distractor", "i2n"]
    return out.dropna(subset=["i2n"]).reset_index(drop=True)


@dataclass(frozen=True)
class I2nConsistency:
    """Pearson r of two I2n tables with its image-bootstrap interval and the cells it used."""

    r: float
    ci: ConfidenceInterval
    n_cells: int
    bootstrap_distribution: np.ndarray = field(repr=False)


def i2n_consistency(a: pd.DataFrame, b: pd.DataFrame, *, n_resamples: int = 1000,
                    confidence_level: float = 0.95,
                    random_state: RandomState = None) -> I2nConsistency:
    """Pearson r of two I2n tables over common (image, distractor) cells (Rajalingham et al. 2018;
    raw, not divided by split-half reliabilities), with a percentile CI from image resamples."""
    n_resamples = check_n_resamples(n_resamples)
    joined = a.merge(b, on=["stimulus", "distractor"], suffixes=("_a", "_b")).dropna()
    images, cell_image = np.unique(joined["stimulus"].astype(str), return_inverse=True)
    x, y = joined["i2n_a"].to_numpy(float), joined["i2n_b"].to_numpy(float)
    columns = np.column_stack([np.ones_like(x), x, y, x * x, y * y, x * y])
    counts = bootstrap_counts(images.size, n_resamples, as_rng(random_state))
    weights = np.vstack([np.ones((1, images.size)), counts])[:, cell_image]
    sw, sx, sy, sxx, syy, sxy = (weights @ columns).T
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = sxy / sw - sx * sy / sw**2
        r = cov / np.sqrt((sxx / sw - (sx / sw) ** 2) * (syy / sw - (sy / sw) ** 2))
    return I2nConsistency(float(r[0]), confidence_interval(r[1:], confidence_level),
                          len(joined), r[1:])
