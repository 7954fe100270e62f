"""Model observers for MLDS: a feature extractor answers triads like a participant.

For a triad (s1, s2, s3) of one sequence the observer compares the l2 distances between the
reference's feature vector f(s2) and the two comparisons, and chooses the nearer one as more
similar to the reference: ``response = 1`` (pair (s2, s3) differs more, s1 chosen) when
||f(s2) - f(s3)|| > ||f(s2) - f(s1)||, exact ties broken by a fair coin. Such an observer is
deterministic, so its trials are usually perfectly separated and the MLDS maximum-likelihood
scale does not exist (the fit reports ``converged = False``); ``decision_noise`` adds Gaussian
noise with that standard deviation, in units of the median |difference of the two distances|, to
the decision variable, making the observer stochastic like the model MLDS assumes. The result is
a tidy triads frame (``participant, sequence, s1, s2, s3, response, swapped, trial_type``) that
:func:`humanlike.analysis.mlds_batch.fit_many` fits like a participant's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from humanlike.stimuli.features import extract_features, load_manifest_images

if TYPE_CHECKING:
    import torch

#: Feature values (triads x dimensions) held in memory at once.
_CHUNK_ELEMENTS = 4_000_000


def observer_triads(
    features: np.ndarray,
    manifest: pd.DataFrame,
    design: pd.DataFrame,
    *,
    observer: str = "model",
    decision_noise: float = 0.0,
    random_state: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """Answer every triad of ``design`` from ``features`` (one row per ``manifest`` row).

    ``manifest`` needs ``sequence`` and ``level`` (1-based) columns (rows whose ``kind`` is not
    ``mlds`` are ignored); ``design`` needs ``s1, s2, s3`` and optionally ``swapped`` and
    ``sequence`` (without it the design is applied to every sequence of the manifest)."""
    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 2 or features.shape[0] != len(manifest):
        raise ValueError(f"features must be (n_images, D) with one row per manifest row; got "
                         f"{features.shape} for {len(manifest)} manifest rows")
    for col in ("sequence", "level"):
        if col not in manifest.columns:
            raise ValueError(f"manifest needs a {col!r} column; got {list(manifest.columns)}")
    for col in ("s1", "s2", "s3"):
        if col not in design.columns:
            raise ValueError(f"design needs a {col!r} column; got {list(design.columns)}")
    rows = np.arange(len(manifest))
    if "kind" in manifest.columns:
        rows = rows[(manifest["kind"].astype(str) == "mlds").to_numpy()]
    seq_codes, sequences = pd.factorize(manifest["sequence"].iloc[rows].astype(str), sort=True)
    levels = manifest["level"].iloc[rows].to_numpy(dtype=np.int64)
    if levels.size == 0 or levels.min() < 1:
        raise ValueError("manifest needs MLDS rows with 1-based 'level' values")
    table = np.full((len(sequences), levels.max()), -1, dtype=np.int64)
    if np.unique(seq_codes * table.shape[1] + levels - 1).size != rows.size:
        raise ValueError("manifest lists some (sequence, level) more than once")
    table[seq_codes, levels - 1] = rows

    if "sequence" in design.columns:
        trials = design.copy()
        trials["sequence"] = trials["sequence"].astype(str)
    else:
        trials = design.loc[np.tile(design.index, len(sequences))].reset_index(drop=True)
        trials.insert(0, "sequence", np.repeat(np.asarray(sequences), len(design)))
    code = pd.Index(sequences).get_indexer(trials["sequence"])
    if (code < 0).any():
        raise ValueError(f"design sequence {trials['sequence'][code < 0].iloc[0]!r} is not in "
                         "the manifest")
    s = trials[["s1", "s2", "s3"]].to_numpy(dtype=np.int64)
    if s.min() < 1 or s.max() > table.shape[1]:
        raise ValueError(f"design levels must lie in 1..{table.shape[1]}")
    idx = table[code[:, None], s - 1]
    if (idx < 0).any():
        i = int(np.flatnonzero((idx < 0).any(axis=1))[0])
        raise ValueError(f"design trial {i} uses a level missing from sequence "
                         f"{trials['sequence'].iloc[i]!r} in the manifest")
    if decision_noise < 0:
        raise ValueError(f"decision_noise must be >= 0, got {decision_noise}")
    d12, d23 = _distances(features, idx)
    rng = np.random.default_rng(random_state)
    coin = rng.random(len(trials)) < 0.5
    delta = d23 - d12
    if decision_noise > 0:
        unit = np.median(np.abs(delta))
        delta = delta + rng.normal(0.0, decision_noise * (unit if unit > 0 else 1.0), delta.shape)
    response = np.where(delta == 0, coin, delta > 0).astype(np.int64)
    out = pd.DataFrame({
        "participant": observer,
        "sequence": trials["sequence"].to_numpy(),
        "s1": s[:, 0], "s2": s[:, 1], "s3": s[:, 2],
        "response": response,
        "swapped": trials["swapped"].to_numpy(bool) if "swapped" in trials else False,
        "trial_type": "triad",
    })
    return out


def model_observer_triads(
    model: torch.nn.Module | str | Path,
    manifest_csv: str | Path,
    design: pd.DataFrame,
    *,
    layer: str | None = None,
    size: int | tuple[int, int] | None = None,
    batch_size: int = 64,
    observer: str | None = None,
    decision_noise: float = 0.0,
    random_state: int | np.random.Generator | None = None,
    device: str | torch.device | None = None,
) -> pd.DataFrame:
    """Tidy triad responses of a torch model (optionally truncated at ``layer``) to the MLDS
    stimuli of a manifest, computed on ``device`` (default: the model's); the observer is named
    ``observer`` or the model's class name.

    ``model`` may be a model TOML (``model_spec``): its network then sees the declared input
    normalisation, images are resized to its declared input size unless ``size`` is given,
    ``layer`` names a submodule of the researcher's network, and the observer is named by the TOML.
    """
    if isinstance(model, str | Path):
        from humanlike.stimuli.model_spec import PreparedNetwork, load_network, read_model_spec

        spec = read_model_spec(model)
        model = PreparedNetwork(load_network(spec), spec)
        size = size or (spec.input.height, spec.input.width)
        observer = observer or spec.name + (f":{layer}" if layer else "")
        layer = None if layer is None else f"net.{layer}"
    _, images = load_manifest_images(manifest_csv, size=size)
    manifest = pd.read_csv(manifest_csv)
    features = extract_features(model, images, layer=layer, batch_size=batch_size, device=device)
    name = observer or type(model).__name__ + (f":{layer}" if layer else "")
    return observer_triads(features, manifest, design, observer=name,
                           decision_noise=decision_noise, random_state=random_state)


def _distances(features: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """||f(s2) - f(s1)|| and ||f(s2) - f(s3)|| per triad, in memory-bounded chunks of triads."""
    n = idx.shape[0]
    d12, d23 = np.empty(n), np.empty(n)
    chunk = max(1, _CHUNK_ELEMENTS // max(1, features.shape[1]))
    for start in range(0, n, chunk):
        i = idx[start:start + chunk]
        ref = features[i[:, 1]]
        d12[start:start + chunk] = np.linalg.norm(ref - features[i[:, 0]], axis=1)
        d23[start:start + chunk] = np.linalg.norm(ref - features[i[:, 2]], axis=1)
    return d12, d23
