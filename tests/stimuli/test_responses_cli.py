"""``humanlike stimuli calibrate`` and ``humanlike stimuli responses`` on natural digits: the
calibration fitted from a TOML model equals the demo model's own, and the responses frame equals
the models' outputs on the PNGs, in batches, as CSV or Parquet."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.stimuli.controversial_manifest import save_png
from humanlike.stimuli.demo_models import DIGIT_CLASSES, demo_models, digit_splits
from humanlike.stimuli.model_responses import load_stimulus_images, model_responses
from humanlike.stimuli.model_spec import load_candidate

from .model_files import cnn_as_toml


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "demo-models"
    demo_models(["cnn", "logreg"], cache_dir=path)
    return path


def write_natural(folder, images, labels):
    files = []
    for i, (image, label) in enumerate(zip(images, labels, strict=True)):
        files.append(f"natural/{i:03d}_{label}.png")
        save_png(image, folder / files[-1])
    manifest = pd.DataFrame({"file": files, "kind": "natural", "true_class": labels.astype(str)})
    manifest.to_csv(folder / "manifest.csv", index=False)
    return folder / "manifest.csv"


@pytest.fixture
def digits(tmp_path):
    splits = digit_splits(0)
    calibration = write_natural(
        tmp_path / "cal", splits.calibration_images, splits.calibration_labels
    )
    natural = write_natural(tmp_path / "test", splits.test_images[:30], splits.test_labels[:30])
    return calibration, natural


def test_calibrate_fits_the_demo_models_own_calibration_from_its_toml(cache, digits, tmp_path):
    cnn = demo_models(["cnn"], cache_dir=cache)["cnn"]
    toml = cnn_as_toml(cnn, tmp_path / "models")
    result = CliRunner().invoke(
        main, ["stimuli", "calibrate", str(toml), "--manifest", str(digits[0]), "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    stored = json.loads((tmp_path / "models" / "cnn.calibration.json").read_text())
    own = cnn.metadata["calibration"]  # fitted on the same 359 digits before 8-bit rounding
    assert stored["n_images"] == own["n_images"] == 359
    assert stored["slope"] == pytest.approx(own["slope"], rel=0.02)
    assert stored["intercept"] == pytest.approx(own["intercept"], rel=0.02, abs=0.02)
    assert stored["loss_after"] < stored["loss_before"]
    assert "wrote" in result.output and "cross-entropy" in result.output


def test_calibrate_names_labels_that_are_not_the_models_classes(cache, tmp_path):
    cnn = demo_models(["cnn"], cache_dir=cache)["cnn"]
    toml = cnn_as_toml(cnn, tmp_path / "models")
    bad = write_natural(tmp_path / "bad", np.zeros((2, 1, 28, 28)), np.array(["3", "cat"]))
    result = CliRunner().invoke(main, ["stimuli", "calibrate", str(toml), "--manifest", str(bad)])
    assert result.exit_code == 1
    assert "['cat'] are not categories of cnn" in result.output
    assert not (tmp_path / "models" / "cnn.calibration.json").exists()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_responses_frame_equals_the_models_outputs_on_the_pngs(cache, digits, tmp_path, suffix):
    cnn = demo_models(["cnn"], cache_dir=cache)["cnn"]
    toml = cnn_as_toml(cnn, tmp_path / "models")
    CliRunner().invoke(main, ["stimuli", "calibrate", str(toml), "--manifest", str(digits[0])])
    out = tmp_path / f"responses{suffix}"
    result = CliRunner().invoke(
        main,
        ["stimuli", "responses", "--models", f"mine={toml},logreg", "--manifest", str(digits[1]),
         "--out", str(out), "--batch-size", "7", "--device", "cpu", "--cache-dir", str(cache)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    frame["category"] = frame.category.astype(str)  # CSV reads the digits back as numbers
    assert list(frame.columns) == ["model", "stimulus", "category", "probability", "logit"]
    assert len(frame) == 2 * 30 * 10 and set(frame.model) == {"mine", "logreg"}
    manifest = pd.read_csv(digits[1])
    images = load_stimulus_images(digits[1].parent, manifest.file, (1, 28, 28))
    mine = frame[frame.model == "mine"].pivot(index="stimulus", columns="category", values="logit")
    expected = load_candidate(toml).predict_logits(images)
    np.testing.assert_allclose(
        mine.loc[manifest.file, list(DIGIT_CLASSES)].to_numpy(), expected, rtol=1e-5, atol=1e-6
    )
    # The TOML model, with its own calibration, answers like the demo model it was written from.
    np.testing.assert_allclose(
        mine.loc[manifest.file, list(DIGIT_CLASSES)].to_numpy(),
        cnn.predict_logits(images),
        rtol=0.05,
        atol=0.05,
    )
    direct = model_responses(demo_models(["logreg"], cache_dir=cache), manifest, digits[1].parent)
    # batches of 7 against one batch of 30: float32 sums over 784 pixels in another order (torch
    # 2.13's CPU kernels block by batch size), so equal to float32 accumulation error, 1e-5
    np.testing.assert_allclose(
        frame[frame.model == "logreg"].logit.to_numpy(), direct.logit.to_numpy(), rtol=1e-5,
        atol=1e-5,
    )


def test_responses_names_a_missing_stimulus(cache, digits, tmp_path):
    manifest = pd.read_csv(digits[1])
    manifest.loc[3, "file"] = "natural/gone.png"
    manifest.to_csv(digits[1], index=False)
    result = CliRunner().invoke(
        main, ["stimuli", "responses", "--models", "logreg", "--manifest", str(digits[1]),
               "--cache-dir", str(cache)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "'natural/gone.png' not found" in result.output
    assert not (digits[1].parent / "model_responses.csv").exists()
