"""Demo candidate models: held-out accuracy, KDE logits equal a float64 sum of Gaussian densities, the
adversarially trained CNN resists PGD better than the standard one, training is cached."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from scipy import special, stats
from sklearn.datasets import load_digits

from humanlike.stimuli.demo_models import (
    DEMO_MODEL_NAMES,
    demo_accuracy,
    demo_models,
    digit_images,
    digit_splits,
    pgd_linf,
)


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "demo-models"


@pytest.fixture(scope="session")
def demo(cache):
    return demo_models(cache_dir=cache)


@pytest.fixture(scope="session")
def splits():
    return digit_splits(0)


def test_every_demo_model_reaches_90_percent_heldout_accuracy(demo):
    table = demo_accuracy(demo)
    print(table.to_string(index=False))
    assert list(table.model) == list(DEMO_MODEL_NAMES)
    assert (table.n == 360).all()
    assert (table.accuracy >= 0.9).all()
    for row in table.itertuples():
        assert demo[row.model].metadata["test_accuracy"] == pytest.approx(row.accuracy)


def test_digits_are_upsampled_to_28_pixels_in_the_unit_interval():
    images, labels = digit_images()
    assert images.shape == (1797, 1, 28, 28) and labels.shape == (1797,)
    assert images.min() >= 0 and images.max() <= 1
    # The same pixels as Pillow's bilinear resize of the 8x8 originals scaled to [0, 1].
    originals = load_digits().images[:50].astype(np.float32) / 16
    pillow = np.stack(
        [
            np.asarray(Image.fromarray(o).resize((28, 28), Image.Resampling.BILINEAR))
            for o in originals
        ]
    )
    np.testing.assert_allclose(images[:50, 0], pillow, atol=1e-5)


def test_splits_are_disjoint_stratified_and_cover_every_digit(splits):
    indices = [splits.train_index, splits.calibration_index, splits.test_index]
    assert sum(map(len, indices)) == 1797
    assert len(np.unique(np.concatenate(indices))) == 1797
    assert np.all(np.bincount(splits.test_labels) >= 35)


def test_kde_logits_equal_the_log_mean_of_isotropic_gaussian_densities(demo, splits):
    # log (1/N_k) sum_n prod_d N(x_d; x_nd, h): scipy.stats.norm per pixel, in float64.
    kde = demo["kde"].net
    h = float(kde.bandwidth)
    x = splits.test_images[:5].reshape(5, -1).astype(np.float64)
    logits = kde(torch.from_numpy(splits.test_images[:5])).double().numpy()
    for k in (0, 7):
        members = splits.train_images[splits.train_labels == k].reshape(-1, 784).astype(np.float64)
        per_point = stats.norm.logpdf(x[:, None, :], loc=members[None], scale=h).sum(-1)
        expected = special.logsumexp(per_point, axis=1) - np.log(len(members))
        # float32 distances: |error| ~ 1e-3 on logits of order 1e3
        np.testing.assert_allclose(logits[:, k], expected, rtol=1e-5, atol=1e-2)


def test_adversarially_trained_cnn_keeps_more_accuracy_under_pgd(demo, splits):
    x = torch.from_numpy(splits.test_images)
    labels = torch.from_numpy(splits.test_labels)
    robust = {}
    for name in ("cnn", "adv_cnn"):
        net = demo[name].net
        adv = pgd_linf(
            net, x, labels, epsilon=0.1, steps=10, step_size=0.025,
            generator=torch.Generator().manual_seed(0),
        )  # fmt: skip
        assert float((adv - x).abs().max()) <= 0.1 + 1e-6
        with torch.no_grad():
            robust[name] = float((net(adv).argmax(1).numpy() == splits.test_labels).mean())
    print(f"accuracy under L-inf PGD (eps 0.1, 10 steps): {robust}")
    assert robust["adv_cnn"] > robust["cnn"] + 0.05


def test_second_call_loads_the_cached_weights(demo, cache):
    files = sorted((cache / "demo_models").glob("*.pt"))
    assert len(files) == len(DEMO_MODEL_NAMES)
    again = demo_models(["kde", "cnn"], cache_dir=cache)
    x = torch.rand(3, 1, 28, 28)
    for name in ("kde", "cnn"):
        torch.testing.assert_close(again[name](x), demo[name](x))
    assert [p.stat().st_mtime for p in files] == [p.stat().st_mtime for p in sorted(files)]


def test_unknown_demo_model_name_is_rejected(cache):
    with pytest.raises(ValueError, match="unknown demo model"):
        demo_models(["resnet"], cache_dir=cache)
