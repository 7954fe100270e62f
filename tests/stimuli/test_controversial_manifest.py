"""Writing a controversial set: PNGs, manifest rows in the export contract's columns, balanced
selection per model pair, and a model-responses CSV that matches the models on the written files."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from torch import nn

from humanlike.stimuli.controversial import SynthesisSettings
from humanlike.stimuli.controversial_demo import (
    build_demo_controversial,
    demo_heldout_digit_indices,
)
from humanlike.stimuli.controversial_manifest import MANIFEST_COLUMNS, build_controversial_set
from humanlike.stimuli.demo_models import DEMO_MODEL_NAMES, digit_splits
from humanlike.stimuli.model_responses import RESPONSE_COLUMNS
from humanlike.stimuli.models import CandidateModel

FAST = SynthesisSettings(max_steps=60, window=20, max_attempts=1)


def toy_model(name: str, seed: int) -> CandidateModel:
    """Three classes, 4x4 images, random linear logits."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
    return CandidateModel(net, ("cat", "dog", "owl"), name=name, input_shape=(1, 4, 4))


@pytest.fixture
def toy_models():
    return {name: toy_model(name, seed) for seed, name in enumerate(("m1", "m2", "m3"))}


def test_set_writes_pngs_and_contract_columns_with_each_class_targeted_once(toy_models, tmp_path):
    built = build_controversial_set(
        toy_models,
        [("m1", "m2"), ("m3", "m1")],
        tmp_path,
        per_pair=3,
        settings=SynthesisSettings(max_attempts=2),
        progress=False,
    )
    manifest = built.manifest
    assert list(manifest.columns) == MANIFEST_COLUMNS
    assert len(manifest) == 6
    assert (manifest.kind == "controversial").all() and (manifest.true_class == "").all()
    for (m1, m2), rows in manifest.groupby(["targeted_model_1", "targeted_model_2"]):
        assert (m1, m2) in {("m1", "m2"), ("m3", "m1")}
        assert sorted(rows.targeted_class_1) == ["cat", "dog", "owl"]
        assert sorted(rows.targeted_class_2) == ["cat", "dog", "owl"]
    for file in manifest.file:
        assert file.startswith("controversial/")
        with Image.open(tmp_path / file) as image:
            assert image.size == (32, 32) and image.mode == "L"  # 4x4 enlarged 8x
    # Each pair's selection is the integer program's choice over all K(K-1) = 6 class pairs.
    for stimuli, selection in zip(built.stimuli, built.selections, strict=True):
        assert len(stimuli.controversiality) == 6
        assert selection.total == pytest.approx(stimuli.controversiality[selection.index].sum())


def test_responses_csv_holds_every_model_on_every_stimulus_and_matches_the_pngs(
    toy_models, tmp_path
):
    built = build_controversial_set(
        toy_models, [("m1", "m2")], tmp_path, per_pair=3, progress=False
    )
    responses = pd.read_csv(tmp_path / "model_responses.csv", dtype={"category": str})
    assert list(responses.columns) == RESPONSE_COLUMNS
    assert len(responses) == 3 * 3 * 3  # models x stimuli x categories
    np.testing.assert_allclose(responses.probability, 1 / (1 + np.exp(-responses.logit)), rtol=1e-9)
    # The controversiality recomputed from the CSV equals the manifest's.
    p = responses.set_index(["model", "stimulus", "category"]).probability
    for row in built.manifest.itertuples():
        c = min(
            p["m1", row.file, row.targeted_class_1],
            1 - p["m1", row.file, row.targeted_class_2],
            p["m2", row.file, row.targeted_class_2],
            1 - p["m2", row.file, row.targeted_class_1],
        )
        assert c == pytest.approx(row.controversiality, abs=1e-6)


def test_per_pair_must_be_a_multiple_of_the_number_of_classes(toy_models, tmp_path):
    with pytest.raises(ValueError, match="per_pair"):
        build_controversial_set(toy_models, [("m1", "m2")], tmp_path, per_pair=4, progress=False)


def test_the_same_model_pair_twice_is_rejected(toy_models, tmp_path):
    with pytest.raises(ValueError, match="same pair twice"):
        build_controversial_set(
            toy_models, [("m1", "m2"), ("m2", "m1")], tmp_path, per_pair=3, progress=False
        )


def test_unknown_model_in_a_pair_is_rejected(toy_models, tmp_path):
    with pytest.raises(ValueError, match="unknown model"):
        build_controversial_set(toy_models, [("m1", "vgg")], tmp_path, per_pair=3, progress=False)


def test_demo_build_returns_twenty_manifest_rows_and_all_demo_model_responses(
    tmp_path, tmp_path_factory
):
    manifest = build_demo_controversial(
        tmp_path, cache_dir=tmp_path_factory.getbasetemp() / "demo-models", settings=FAST
    )
    assert list(manifest.columns) == MANIFEST_COLUMNS
    assert len(manifest) == 20
    assert set(manifest.targeted_model_1) == {"cnn"} and set(manifest.targeted_model_2) == {"kde"}
    assert (manifest.targeted_class_1.value_counts() == 2).all()
    assert (manifest.targeted_class_2.value_counts() == 2).all()
    assert manifest.attempts.between(1, FAST.max_attempts).all()
    with Image.open(tmp_path / manifest.file[0]) as image:
        assert image.size == (224, 224) and image.mode == "L"
    responses = pd.read_csv(tmp_path / "model_responses.csv")
    assert set(responses.model) == set(DEMO_MODEL_NAMES)
    assert len(responses) == 4 * 20 * 10
    assert set(responses.stimulus) == set(manifest.file)


def test_heldout_digit_indices_are_the_test_split_no_model_was_fitted_on():
    held_out = demo_heldout_digit_indices(0)
    splits = digit_splits(0)
    assert len(held_out) == 360
    assert not set(held_out) & (set(splits.train_index) | set(splits.calibration_index))
