"""Candidate models named on a command line: demo names or model TOML files, on one device.

A spec is a demo model name (``cnn``, ``logreg``, ``kde``, ``adv_cnn``: 28 x 28 digits; ``rgb_cnn``,
``rgb_mlp``: 32 x 32 RGB digits), a path to a model TOML (``model_spec``), or ``NAME=PATH.toml``
to rename one. Files written by ``CandidateModel.save`` hold a pickled network and are refused:
commands never unpickle a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from humanlike.stimuli.colour_demo_models import COLOUR_MODEL_NAMES, colour_demo_models
from humanlike.stimuli.demo_models import DEMO_MODEL_NAMES, demo_models
from humanlike.stimuli.model_spec import load_candidate
from humanlike.stimuli.models import CandidateModel

KNOWN_DEMOS = DEMO_MODEL_NAMES + COLOUR_MODEL_NAMES


def resolve_models(
    specs: Sequence[str],
    *,
    device: torch.device,
    cache_dir: Path | None = None,
    seed: int = 0,
) -> dict[str, CandidateModel]:
    """Load every spec (see the module docstring) onto ``device``; ``ValueError`` names a bad one."""
    parsed: list[tuple[str, str]] = []
    for spec in specs:
        name, _, path = spec.partition("=") if "=" in spec else ("", "", spec)
        if not path.endswith(".toml") and path not in KNOWN_DEMOS:
            if Path(path).suffix in (".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".bin"):
                raise ValueError(
                    f"{path}: a pickled model file; humanlike refuses to unpickle it (loading it "
                    "could run arbitrary code). Declare the model in a TOML file: an entry point "
                    "package.module:factory plus a safetensors or state-dict weights file, or a "
                    "TorchScript file (see docs/controversial-stimuli.md)"
                )
            raise ValueError(
                f"{spec!r} is neither a demo model ({', '.join(KNOWN_DEMOS)}) nor a model .toml file"
            )
        parsed.append((name, path))
    demos = [p for _, p in parsed if p in DEMO_MODEL_NAMES]
    colours = [p for _, p in parsed if p in COLOUR_MODEL_NAMES]
    loaded: dict[str, CandidateModel] = {}
    if demos:
        loaded.update(demo_models(demos, cache_dir=cache_dir, random_state=seed))
    if colours:
        loaded.update(colour_demo_models(colours, cache_dir=cache_dir, random_state=seed))
    models: dict[str, CandidateModel] = {}
    for name, path in parsed:
        model = loaded[path] if path in loaded else load_candidate(path, device=device)
        if name:
            model.name = name
        if model.name in models:
            raise ValueError(f"two models are named {model.name!r}; rename one with NAME=PATH")
        models[model.name] = model.to(device)
    return models


def uncalibrated(models: dict[str, CandidateModel]) -> list[str]:
    """Names of models with no calibration (their logits are used as they are)."""
    return [name for name, m in models.items() if "calibration" not in m.metadata]
