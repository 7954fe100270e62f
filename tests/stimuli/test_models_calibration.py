"""Affine logit calibration: lowers held-out cross-entropy, keeps argmax accuracy, equals a plain
logistic regression of the one-hot labels on the logits, and survives save/load."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from torch import nn

from humanlike.stimuli.demo_models import DEMO_MODEL_NAMES, SmallCNN, demo_models, digit_splits
from humanlike.stimuli.models import CandidateModel, LogitCalibration, multilabel_cross_entropy


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    return demo_models(cache_dir=tmp_path_factory.getbasetemp() / "demo-models")


@pytest.fixture(scope="session")
def splits():
    return digit_splits(0)


@pytest.mark.parametrize("name", DEMO_MODEL_NAMES)
def test_calibration_lowers_heldout_cross_entropy_and_keeps_argmax_accuracy(demo, splits, name):
    model = demo[name]
    raw_cal = model.predict_logits(splits.calibration_images, raw=True)
    raw_test = model.predict_logits(splits.test_images, raw=True)
    calibration = LogitCalibration().fit(raw_cal, splits.calibration_labels)
    before = multilabel_cross_entropy(raw_test, splits.test_labels)
    after = multilabel_cross_entropy(calibration.transform(raw_test), splits.test_labels)
    print(f"{name}: held-out cross-entropy {before:.3f} -> {after:.3f}")
    assert after < before
    accuracy_raw = np.mean(raw_test.argmax(1) == splits.test_labels)
    accuracy_cal = np.mean(calibration.transform(raw_test).argmax(1) == splits.test_labels)
    assert accuracy_cal == accuracy_raw
    # The model object carries the same calibration (fitted on the same split at training time).
    assert float(model.slope) == pytest.approx(calibration.slope_, rel=1e-4)
    assert float(model.intercept) == pytest.approx(calibration.intercept_, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("name", ["cnn", "kde"])
def test_calibration_equals_unpenalised_logistic_regression_on_the_pooled_logits(
    demo, splits, name
):
    # One slope and one intercept shared by all classes, sigmoid readout, one-hot targets: the same
    # likelihood as a 1-feature logistic regression on every (image, class) logit.
    raw = demo[name].predict_logits(splits.calibration_images, raw=True)
    targets = np.eye(raw.shape[1])[splits.calibration_labels]
    reference = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000)
    reference.fit(raw.reshape(-1, 1), targets.ravel())
    ours = LogitCalibration().fit(raw, splits.calibration_labels)
    assert ours.slope_ == pytest.approx(reference.coef_[0, 0], rel=1e-3)
    assert ours.intercept_ == pytest.approx(reference.intercept_[0], rel=1e-3, abs=1e-3)


def test_calibration_loss_is_the_mean_per_image_sum_of_binary_cross_entropies():
    logits = np.array([[2.0, -1.0], [0.0, 3.0]])
    labels = np.array([0, 1])

    # -[log s(2) + log(1 - s(-1))] and -[log(1 - s(0)) + log s(3)], averaged
    def s(z):
        return 1 / (1 + np.exp(-z))

    expected = -(np.log(s(2)) + np.log(1 - s(-1)) + np.log(1 - s(0)) + np.log(s(3))) / 2
    assert multilabel_cross_entropy(logits, labels) == pytest.approx(expected)


def test_calibration_rejects_labels_outside_the_classes():
    with pytest.raises(ValueError, match="labels"):
        LogitCalibration().fit(np.zeros((3, 4)), np.array([0, 1, 4]))


def test_saved_model_reloads_with_identical_outputs_and_calibration(demo, splits, tmp_path):
    model = demo["cnn"]
    path = model.save(tmp_path / "cnn.pt")
    images = splits.test_images[:16]
    for reloaded in (CandidateModel.load(path, net=SmallCNN()), CandidateModel.load(path)):
        np.testing.assert_array_equal(reloaded.predict_logits(images), model.predict_logits(images))
        assert float(reloaded.slope) == float(model.slope) != 1.0
        assert reloaded.classes == model.classes and reloaded.name == "cnn"
        assert reloaded.metadata["test_accuracy"] == model.metadata["test_accuracy"]


def test_candidate_model_rejects_images_of_the_wrong_shape():
    model = CandidateModel(
        nn.Sequential(nn.Flatten(), nn.Linear(784, 10)), list("0123456789"), name="m"
    )
    with pytest.raises(ValueError, match="expects images of shape"):
        model(torch.zeros(2, 1, 8, 8))


def test_candidate_model_is_frozen_and_in_evaluation_mode():
    model = CandidateModel(
        nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(4, 2)),
        "ab",
        name="m",
        input_shape=(1, 2, 2),
    )
    model.train()
    assert not model.training and not model.net.training
    assert not any(p.requires_grad for p in model.parameters())
