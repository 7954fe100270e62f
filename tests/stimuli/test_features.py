"""Manifest images as arrays, and feature vectors from torch models truncated at a layer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from humanlike.stimuli.features import extract_features, load_manifest_images

torch = pytest.importorskip("torch")


def write_manifest(folder, arrays, name="manifest.csv"):
    rows = []
    for i, arr in enumerate(arrays):
        rel = f"img/{i}.png"
        (folder / "img").mkdir(exist_ok=True)
        Image.fromarray(arr).save(folder / rel)
        rows.append({"file": rel, "kind": "natural"})
    pd.DataFrame(rows).to_csv(folder / name, index=False)
    return folder / name


def test_grey_images_load_as_one_channel_scaled_to_unit_range(tmp_path):
    arrays = [np.full((6, 5), v, np.uint8) for v in (0, 51, 255)]
    ids, images = load_manifest_images(write_manifest(tmp_path, arrays))
    assert ids == ["img/0.png", "img/1.png", "img/2.png"]
    assert images.shape == (3, 1, 6, 5) and images.dtype == np.float32
    np.testing.assert_allclose(images[:, 0, 0, 0], [0.0, 0.2, 1.0])


def test_a_colour_image_makes_every_image_three_channel(tmp_path):
    colour = np.zeros((4, 4, 3), np.uint8)
    colour[..., 0] = 255
    _ids, images = load_manifest_images(write_manifest(tmp_path, [colour, np.full((4, 4), 128,
                                                                                 np.uint8)]))
    assert images.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(images[0, :, 0, 0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(images[1, :, 0, 0], 128 / 255)  # grey replicated


def test_size_resizes_and_mismatched_sizes_without_it_are_named(tmp_path):
    path = write_manifest(tmp_path, [np.zeros((8, 8), np.uint8), np.zeros((10, 6), np.uint8)])
    with pytest.raises(ValueError, match="img/1.png"):
        load_manifest_images(path)
    _, images = load_manifest_images(path, size=(5, 7))
    assert images.shape == (2, 1, 5, 7)


def test_missing_files_and_columns_raise_value_errors(tmp_path):
    pd.DataFrame({"file": ["gone.png"]}).to_csv(tmp_path / "m.csv", index=False)
    with pytest.raises(ValueError, match="gone.png"):
        load_manifest_images(tmp_path / "m.csv")
    pd.DataFrame({"path": ["x.png"]}).to_csv(tmp_path / "n.csv", index=False)
    with pytest.raises(ValueError, match="'file'"):
        load_manifest_images(tmp_path / "n.csv")


class Boom(torch.nn.Module):
    def forward(self, x):  # pragma: no cover - must never run when truncated before it
        raise AssertionError("the forward pass went past the requested layer")


def small_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 3, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(3 * 6 * 6, 4)
    )


def test_without_a_layer_the_features_are_the_model_output():
    net = small_net()
    x = np.random.default_rng(0).random((5, 1, 8, 8)).astype(np.float32)
    feats = extract_features(net, x)
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(feats, expected, rtol=1e-6)
    assert feats.dtype == np.float32


def test_a_named_layer_truncates_the_network_there_and_flattens():
    net = small_net()
    net.add_module("boom", Boom())
    x = torch.rand(7, 1, 8, 8)
    feats = extract_features(net, x, layer="1", batch_size=3)
    with torch.no_grad():
        expected = torch.relu(net[0](x)).reshape(7, -1).numpy()
    np.testing.assert_allclose(feats, expected, rtol=1e-6)
    assert feats.shape == (7, 3 * 6 * 6)


def test_batch_size_does_not_change_the_features_and_training_mode_is_restored():
    net = small_net().train()
    x = np.random.default_rng(1).random((10, 1, 8, 8)).astype(np.float32)
    a = extract_features(net, x, layer="2", batch_size=1)
    b = extract_features(net, x, layer="2", batch_size=64)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # float32 kernels differ by batch
    assert net.training
    assert not any(m._forward_hooks for m in net.modules())  # hooks removed


def test_unknown_layer_lists_the_available_names():
    with pytest.raises(ValueError, match=r"available: \['0', '1', '2', '3'\]"):
        extract_features(small_net(), np.zeros((1, 1, 8, 8), np.float32), layer="conv9")


def test_device_option_runs_on_the_named_device_and_refuses_an_absent_gpu():
    net = small_net()
    x = np.random.default_rng(2).random((3, 1, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(extract_features(net, x, device="auto"),
                                  extract_features(net, x, device="cpu"))  # fmt: skip
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch sees no CUDA GPU"):
            extract_features(net, x, device="cuda")
    with pytest.raises(ValueError, match="expected auto, cpu, cuda or cuda:N"):
        extract_features(net, x, device="tpu")
