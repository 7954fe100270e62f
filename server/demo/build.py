"""The demo experiment, built offline at set-up: digit ratings (natural, catch, controversial),
MLDS triads and a short classification block (digits at two noise levels)."""

from __future__ import annotations

import shutil
import types
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from humanlike.vocabulary import StimulusKind

DEMO_SLUG = "demo"
DEMO_VERSION = "9"  # bump when the demo content changes: `humanlike demo` then rebuilds it
PROLIFIC_CODE = "C1HLDEMO"


def demo_text(name: str) -> str:
    """A demo file shipped with the package (``server/demo/files/``): spec templates, consent, instructions."""
    return (resources.files("humanlike.server.demo") / "files" / name).read_text(encoding="utf-8")


def build_demo(dest: Path, *, controversial: bool = True, mlds: bool = True, seed: int = 0,
               classification: bool = True, panel: bool = False) -> Path:
    """Write the demo experiment (spec, texts, stimuli, manifest) into ``dest``; return the spec path.

    Controversial and MLDS stimuli are included when their builders are importable (torch is
    needed for controversial stimuli); the natural digits never need more than scikit-learn.
    ``panel`` (``humanlike demo``) adds ``[panel]`` with the demo models' responses and a
    ``[stopping]`` target, so the dashboard's live panel scores the models."""
    from humanlike.stimuli.digits import build_digit_stimuli, build_noisy_digits, noise_mask

    if dest.exists():
        shutil.rmtree(dest)
    stim_dir = dest / "stimuli"
    stim_dir.mkdir(parents=True)
    controversial_demo: types.ModuleType | None = None
    if controversial:
        try:  # torch is an optional extra: without it the demo has natural digits only
            from humanlike.stimuli import controversial_demo
        except ImportError:
            controversial = False
    exclude = None
    if controversial_demo is not None:
        # natural digits from the demo models' held-out split, so model scores are not on training data
        exclude = np.setdiff1d(np.arange(1797), controversial_demo.demo_heldout_digit_indices(seed))
    frames = [build_digit_stimuli(stim_dir, per_class=2, catch_per_class=1, seed=seed,
                                  exclude=exclude)]
    noise_mask(stim_dir / "mask.png", seed=seed)
    rating_kinds = [StimulusKind.NATURAL.value]
    if controversial_demo is not None:
        frames.append(controversial_demo.build_demo_controversial(stim_dir, seed=seed))
        rating_kinds.append(StimulusKind.CONTROVERSIAL.value)
    mlds_block = ""
    if mlds:
        from humanlike.stimuli.mlds_demo import build_demo_mlds

        frames.append(build_demo_mlds(stim_dir, n_sequences=3))  # 3: the Psychophysical-Score needs 3
        mlds_block = demo_text("mlds_block.toml").format(repeats=4)
    classification_block = ""
    if classification:
        frames.append(build_noisy_digits(stim_dir, seed=seed, exclude=exclude))
        classification_block = demo_text("classification_block.toml")
    manifest = pd.concat(frames, ignore_index=True)
    for column in ("dataset_index", "targeted_class_1", "targeted_class_2", "attempts", "level"):
        if column in manifest:  # integers stay integers next to other kinds' empty cells
            manifest[column] = manifest[column].astype("Int64")
    manifest.to_csv(stim_dir / "manifest.csv", index=False)
    if controversial_demo is not None:
        # every demo model's responses to every rating stimulus, for `humanlike analyze ratings`
        rated = manifest[manifest["kind"].isin(
            [StimulusKind.NATURAL, StimulusKind.CONTROVERSIAL, StimulusKind.CATCH])]
        controversial_demo.demo_model_responses(rated, stim_dir, seed=seed).to_csv(
            stim_dir / "model_responses.csv", index=False)
    categories = "".join(f'[[categories]]\nlabel = "{d}"\nkey = "{d}"\n\n' for d in range(10))
    spec = demo_text("experiment.toml").format(
        slug=DEMO_SLUG, code=PROLIFIC_CODE, categories=categories,
        rating_kinds="[" + ", ".join(f'"{k}"' for k in rating_kinds) + "]",
        mlds_block=mlds_block + classification_block,
    )
    if panel and controversial_demo is not None:
        spec += demo_text("panel_block.toml")
    (dest / "experiment.toml").write_text(spec)
    (dest / "consent.md").write_text(demo_text("consent.md"))
    (dest / "instructions.md").write_text(demo_instructions(mlds=mlds, classification=classification))
    (dest / "VERSION").write_text(
        f"{DEMO_VERSION} controversial={controversial} mlds={mlds} classification={classification} "
        f"panel={panel}\n")
    return dest / "experiment.toml"


def demo_instructions(*, mlds: bool, classification: bool) -> str:
    """The demo's instructions: one numbered part per block, in the spec's block order (rating,
    triads, classification), then the repeats, which the timeline puts last."""
    names = ["rating", *([StimulusKind.MLDS.value] if mlds else []),
             *(["classification"] if classification else []), "repeats"]
    parts = "\n".join(f"{i}. {demo_text(f'instructions_{name}.md').strip()}"
                      for i, name in enumerate(names, 1))
    return demo_text("instructions.md").format(parts=parts)


def demo_is_current(dest: Path) -> bool:
    """True when ``dest`` holds a complete demo of the current version."""
    stamp = dest / "VERSION"
    return (dest / "experiment.toml").is_file() and stamp.is_file() and (
        stamp.read_text().split()[0] == DEMO_VERSION
    )
