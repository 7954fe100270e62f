"""Synthesise, select and write controversial stimuli for model pairs: PNGs plus manifest rows.

Manifest rows follow the export contract: ``file`` (relative to the output folder),
``kind = controversial``, empty ``true_class`` and ``targeted_model_1, targeted_model_2,
targeted_class_1, targeted_class_2, controversiality, attempts``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from humanlike.stimuli.controversial import (
    ControversialStimuli,
    SynthesisSettings,
    synthesize_controversial,
)
from humanlike.stimuli.model_responses import model_responses
from humanlike.stimuli.models import CandidateModel
from humanlike.stimuli.selection import Selection, select_balanced

MANIFEST_COLUMNS = [
    "file",
    "kind",
    "true_class",
    "targeted_model_1",
    "targeted_model_2",
    "targeted_class_1",
    "targeted_class_2",
    "controversiality",
    "attempts",
]


#: PIL image mode per channel count.
PNG_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
#: Stimuli are enlarged (nearest neighbour) to about this many pixels on their longer side,
#: by at most ``MAX_DISPLAY_SCALE`` times.
DISPLAY_SIDE = 224
MAX_DISPLAY_SCALE = 8


def display_scale_for(shape: tuple[int, ...]) -> int:
    """Integer enlargement bringing an image's longer side near ``DISPLAY_SIDE``, at most 8x
    (4 -> 8, 28 -> 8, 32 -> 7, 64 -> 3, 224 -> 1)."""
    side = max(int(shape[-1]), int(shape[-2]))
    return max(1, min(MAX_DISPLAY_SCALE, DISPLAY_SIDE // side))


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def save_png(image: np.ndarray, path: Path, *, display_scale: int = 1) -> None:
    """Write a (C, H, W) [0, 1] image as an 8-bit PNG, enlarged ``display_scale`` times (nearest)."""
    pixels = np.round(np.clip(image, 0, 1) * 255).astype(np.uint8)
    if pixels.shape[0] not in PNG_MODES:
        raise ValueError(
            f"a PNG holds 1 (grey), 2 (grey + alpha), 3 (RGB) or 4 (RGBA) channels; got "
            f"{pixels.shape[0]}"
        )
    if pixels.shape[0] == 1:
        picture = Image.fromarray(pixels[0])
    else:
        picture = Image.fromarray(
            np.ascontiguousarray(pixels.transpose(1, 2, 0)), mode=PNG_MODES[pixels.shape[0]]
        )
    if display_scale != 1:
        picture = picture.resize(
            (picture.width * display_scale, picture.height * display_scale),
            Image.Resampling.NEAREST,
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    picture.save(path)


def write_controversial_stimuli(
    stimuli: ControversialStimuli,
    index: np.ndarray,
    out_dir: str | Path,
    *,
    subdir: str = "controversial",
    display_scale: int | None = None,
) -> pd.DataFrame:
    """Write the chosen stimuli as PNGs under ``out_dir/subdir`` (enlarged ``display_scale`` times;
    default ``display_scale_for``); return their manifest rows."""
    out_dir = Path(out_dir)
    if display_scale is None:
        display_scale = display_scale_for(stimuli.images.shape)
    meta = stimuli.to_frame().iloc[index].reset_index(drop=True)
    stem = f"{_safe(stimuli.model_1)}_vs_{_safe(stimuli.model_2)}"
    files = []
    for i in index:
        a, b = stimuli.classes[stimuli.class_1[i]], stimuli.classes[stimuli.class_2[i]]
        rel = f"{subdir}/{stem}_{_safe(a)}_{_safe(b)}.png"
        save_png(stimuli.images[i], out_dir / rel, display_scale=display_scale)
        files.append(rel)
    meta.insert(0, "true_class", "")
    meta.insert(0, "kind", "controversial")
    meta.insert(0, "file", files)
    return meta[MANIFEST_COLUMNS]


def _pair_seed(seed: int, position: int) -> int:
    return int(np.random.SeedSequence([seed, position]).generate_state(1)[0] % (2**31))


@dataclass(frozen=True)
class ControversialSet:
    """What ``build_controversial_set`` wrote: manifest rows, model responses, and per model pair
    the full synthesis (every class pair) and the chosen subset."""

    manifest: pd.DataFrame
    responses: pd.DataFrame
    stimuli: tuple[ControversialStimuli, ...]
    selections: tuple[Selection, ...]


def build_controversial_set(
    models: Mapping[str, CandidateModel],
    model_pairs: Sequence[tuple[str, str]],
    out_dir: str | Path,
    *,
    per_pair: int = 20,
    seed: int = 0,
    settings: SynthesisSettings | None = None,
    response_models: Mapping[str, CandidateModel] | None = None,
    display_scale: int | None = None,
    progress: bool = True,
    device: str | None = None,
) -> ControversialSet:
    """For each model pair: synthesise all K(K-1) class pairs, keep ``per_pair`` by the balanced
    integer program, write PNGs and manifest rows; also writes ``model_responses.csv`` (every model
    in ``response_models``, default ``models``, on every written stimulus). ``device`` (``auto``,
    ``cpu``, ``cuda[:N]``) moves the models there; default: where they are."""
    out_dir = Path(out_dir)
    pairs = [tuple(p) for p in model_pairs]
    if not pairs:
        raise ValueError("model_pairs is empty")
    for pair in pairs:
        if len(pair) != 2 or pair[0] == pair[1]:
            raise ValueError(f"model pair {pair!r} must name two different models")
        missing = [m for m in pair if m not in models]
        if missing:
            raise ValueError(
                f"model pair {pair!r}: unknown model(s) {missing}; have {list(models)}"
            )
    if len({frozenset(p) for p in pairs}) != len(pairs):
        raise ValueError(
            "model_pairs lists the same pair twice ((i, j) and (j, i) are the same pair)"
        )
    for name_1, _ in pairs:
        n_classes = len(models[name_1].classes)
        if per_pair % n_classes or per_pair < n_classes:
            raise ValueError(
                f"per_pair must be a positive multiple of the number of classes ({n_classes}) so "
                f"every class is targeted equally often; got {per_pair}"
            )
    rows, synthesised, selections = [], [], []
    for position, (name_1, name_2) in enumerate(pairs):
        stimuli = synthesize_controversial(
            models[name_1],
            models[name_2],
            settings=settings,
            random_state=_pair_seed(seed, position),
            progress=progress,
            device=device,
        )
        n_classes = len(stimuli.classes)
        chosen = select_balanced(
            stimuli.class_1,
            stimuli.class_2,
            stimuli.controversiality,
            n_classes=n_classes,
            per_class=per_pair // n_classes,
        )
        rows.append(
            write_controversial_stimuli(stimuli, chosen.index, out_dir, display_scale=display_scale)
        )
        synthesised.append(stimuli)
        selections.append(chosen)
    manifest = pd.concat(rows, ignore_index=True)
    responses = model_responses(
        response_models or models,
        manifest,
        out_dir,
        batch_size=settings.batch_size if settings else None,
        progress=progress,
    )
    responses.to_csv(out_dir / "model_responses.csv", index=False)
    return ControversialSet(manifest, responses, tuple(synthesised), tuple(selections))
