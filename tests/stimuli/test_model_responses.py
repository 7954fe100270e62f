"""The model-responses frame: one row per (model, stimulus, category), probabilities equal the
models' outputs on the pixels they were given, whatever the display size of the PNG."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from humanlike.stimuli.controversial_manifest import save_png
from humanlike.stimuli.model_responses import (
    RESPONSE_COLUMNS,
    load_stimulus_images,
    model_responses,
)
from humanlike.stimuli.models import CandidateModel


@pytest.fixture
def model():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Flatten(), nn.Linear(36, 4))
    return CandidateModel(net, ("a", "b", "c", "d"), name="lin", input_shape=(1, 6, 6), slope=0.5)


@pytest.fixture
def stimuli(tmp_path):
    rng = np.random.default_rng(0)
    images = np.round(rng.uniform(0, 1, (3, 1, 6, 6)) * 255) / 255
    files = []
    for i, (image, scale) in enumerate(zip(images, (1, 4, 8), strict=True)):
        files.append(f"set/img{i}.png")
        save_png(image, tmp_path / files[-1], display_scale=scale)
    return images.astype(np.float32), pd.DataFrame({"file": files, "kind": "natural"})


def test_enlarged_pngs_load_back_to_the_exact_stored_pixels(stimuli, tmp_path):
    images, manifest = stimuli
    loaded = load_stimulus_images(tmp_path, manifest.file, (1, 6, 6))
    np.testing.assert_allclose(loaded, images, atol=1e-7)


def test_responses_are_long_form_with_the_models_calibrated_outputs(model, stimuli, tmp_path):
    images, manifest = stimuli
    frame = model_responses({"lin": model}, manifest, tmp_path)
    assert list(frame.columns) == RESPONSE_COLUMNS
    assert len(frame) == 3 * 4
    expected = model.predict_proba(images)
    wide = frame.pivot(index="stimulus", columns="category", values="probability")
    np.testing.assert_allclose(
        wide.loc[manifest.file, list("abcd")].to_numpy(), expected, rtol=1e-6
    )
    # probability = sigmoid(logit), with logit = slope * raw + intercept.
    np.testing.assert_allclose(frame.probability, 1 / (1 + np.exp(-frame.logit)), rtol=1e-9)


def test_missing_stimulus_file_is_named_in_the_error(model, stimuli, tmp_path):
    _, manifest = stimuli
    broken = pd.concat([manifest, pd.DataFrame({"file": ["set/gone.png"]})], ignore_index=True)
    with pytest.raises(ValueError, match="gone.png"):
        model_responses([model], broken, tmp_path)


def test_manifest_without_a_file_column_is_rejected(model, tmp_path):
    with pytest.raises(ValueError, match="'file'"):
        model_responses([model], pd.DataFrame({"path": ["x.png"]}), tmp_path)
