"""The demo experiment, built offline at set-up: digit ratings (natural, catch, controversial) and MLDS triads."""

from __future__ import annotations

import shutil
import types
from pathlib import Path

import numpy as np
import pandas as pd

DEMO_SLUG = "demo"
DEMO_VERSION = "4"  # bump when the demo content changes: `humanlike demo` then rebuilds it
PROLIFIC_CODE = "C1HLDEMO"

SPEC_TEMPLATE = """\
slug = "{slug}"
title = "Which digits do you see?"
platform = "prolific"
consent = "consent.md"
instructions = "instructions.md"
manifest = "stimuli/manifest.csv"
key_mapping = "fixed"
allow_mobile = false

[presentation]
mode = "until_response"
image_height_px = 224

[completion]
prolific_code = "{code}"
mturk_sandbox = true

{categories}
[[blocks]]
name = "ratings"
trial_type = "rating"
kinds = {rating_kinds}
practice = 2
catch_trials = 3
repeats = 4
prompt = "How much does the image look like each digit? Rate every digit that applies."
{mlds_block}
[[conditions]]
name = "A"

[[debrief]]
name = "strategy"
text = "Briefly, how did you decide on your ratings?"

[[debrief]]
name = "problems"
text = "Did anything go wrong (display, keyboard, connection)?"

[exclusion]
min_catch_accuracy = 0.66
max_all_zero_share = 0.5
min_trial_rt_ms = 100
"""

MLDS_BLOCK = """
[[blocks]]
name = "mlds"
trial_type = "triad"
kinds = ["mlds"]
repeats = {repeats}
prompt = "Which of the two outer images is more similar to the one in the middle? Press F (left) or J (right), or click it."
"""

CONSENT = """\
# Consent

This is a demonstration study of **humanlike**. You will see images of handwritten digits and rate
how much each looks like each digit from 0 to 9. It takes about five minutes. Your responses are
stored with a random identifier. You may stop at any time.

By continuing you confirm you are 18 or older and agree to take part.
"""

INSTRUCTIONS = """\
# Instructions

Each screen shows one image and ten rows, one per digit. For each digit, rate how present it is:
0, 25, 50, 75 or 100%. Ratings need not add up to 100%.

- **Keyboard:** press a digit's key to raise its rating by one step, **Shift** + key to lower it,
  **Enter** to continue.
- **Mouse:** click a level in a row, then *Continue*.

Some images are shown twice; just rate them again. In the last part you compare three images at a time.
"""


def build_demo(dest: Path, *, controversial: bool = True, mlds: bool = True, seed: int = 0) -> Path:
    """Write the demo experiment (spec, texts, stimuli, manifest) into ``dest``; return the spec path.

    Controversial and MLDS stimuli are included when their builders are importable (torch is
    needed for controversial stimuli); the natural digits never need more than scikit-learn."""
    from humanlike.stimuli.digits import build_digit_stimuli, noise_mask

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
    rating_kinds = ["natural"]
    if controversial_demo is not None:
        frames.append(controversial_demo.build_demo_controversial(stim_dir, seed=seed))
        rating_kinds.append("controversial")
    mlds_block = ""
    if mlds:
        from humanlike.stimuli.mlds_demo import build_demo_mlds

        frames.append(build_demo_mlds(stim_dir, n_sequences=2))
        mlds_block = MLDS_BLOCK.format(repeats=4)
    manifest = pd.concat(frames, ignore_index=True)
    for column in ("dataset_index", "targeted_class_1", "targeted_class_2", "attempts", "level"):
        if column in manifest:  # integers stay integers next to other kinds' empty cells
            manifest[column] = manifest[column].astype("Int64")
    manifest.to_csv(stim_dir / "manifest.csv", index=False)
    if controversial_demo is not None:
        # every demo model's responses to every rating stimulus, for `humanlike analyze ratings`
        rated = manifest[manifest["kind"].isin(["natural", "controversial", "catch"])]
        controversial_demo.demo_model_responses(rated, stim_dir, seed=seed).to_csv(
            stim_dir / "model_responses.csv", index=False)
    categories = "".join(f'[[categories]]\nlabel = "{d}"\nkey = "{d}"\n\n' for d in range(10))
    spec = SPEC_TEMPLATE.format(
        slug=DEMO_SLUG, code=PROLIFIC_CODE, categories=categories,
        rating_kinds="[" + ", ".join(f'"{k}"' for k in rating_kinds) + "]", mlds_block=mlds_block,
    )
    (dest / "experiment.toml").write_text(spec)
    (dest / "consent.md").write_text(CONSENT)
    (dest / "instructions.md").write_text(INSTRUCTIONS)
    (dest / "VERSION").write_text(f"{DEMO_VERSION} controversial={controversial} mlds={mlds}\n")
    return dest / "experiment.toml"


def demo_is_current(dest: Path) -> bool:
    """True when ``dest`` holds a complete demo of the current version."""
    stamp = dest / "VERSION"
    return (dest / "experiment.toml").is_file() and stamp.is_file() and (
        stamp.read_text().split()[0] == DEMO_VERSION
    )
