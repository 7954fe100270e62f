"""MLDS blend sequences: grey conversion, blur, alpha blend, Jaccard pairing, files, manifest."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy import ndimage

from humanlike.stimuli.mlds import (
    MANIFEST_COLUMNS,
    blend_levels,
    blend_sequence,
    build_sequences,
    jaccard_index,
    object_mask,
    prepare_image,
    select_pairs,
    to_grey,
    write_sequences,
)


def test_grey_is_the_plain_mean_of_red_green_and_blue():
    rgb = np.zeros((2, 2, 3), np.uint8)
    rgb[0, 0] = (255, 0, 0)
    rgb[0, 1] = (30, 60, 90)
    rgba = np.dstack([rgb, np.full((2, 2), 7, np.uint8)])
    expected = np.array([[85.0, 60.0], [0.0, 0.0]]) / 255.0
    np.testing.assert_allclose(to_grey(rgb), expected)
    np.testing.assert_allclose(to_grey(rgba), expected)  # alpha is not a colour
    np.testing.assert_allclose(to_grey(expected), expected)


def test_preparation_blurs_with_a_gaussian_of_sigma_three_pixels():
    image = np.zeros((41, 41))
    image[20, 20] = 1.0
    out = prepare_image(image)
    np.testing.assert_allclose(out, ndimage.gaussian_filter(image, 3.0, mode="nearest"))
    # second moment of the blurred impulse = sigma^2 along each axis
    _y, x = np.mgrid[:41, :41]
    assert np.sum(out * (x - 20) ** 2) / out.sum() == pytest.approx(9.0, rel=1e-3)


def test_pixels_outside_the_mask_become_the_background_before_blurring():
    image = np.ones((30, 30))
    mask = np.zeros((30, 30), bool)
    mask[:, :15] = True
    out = prepare_image(image, mask, blur_sigma=0.5, background=0.25)
    assert out[5, 2] == pytest.approx(1.0) and out[5, 27] == pytest.approx(0.25)


def test_sequence_is_the_alpha_blend_at_levels_zero_to_one_in_sixths():
    rng = np.random.default_rng(0)
    a, b = rng.random((20, 24, 3)), rng.random((20, 24, 3))
    seq = blend_sequence(a, b)
    pa, pb = prepare_image(a), prepare_image(b)
    np.testing.assert_allclose(blend_levels(), np.arange(7) / 6)
    np.testing.assert_allclose(seq[0], pa)
    np.testing.assert_allclose(seq[-1], pb)
    np.testing.assert_allclose(seq[2], pa * (1 - 2 / 6) + pb * 2 / 6)
    # equal steps: second differences along the sequence vanish
    np.testing.assert_allclose(np.diff(seq, 2, axis=0), 0.0, atol=1e-12)


def test_images_of_different_sizes_are_refused():
    with pytest.raises(ValueError, match="same size"):
        blend_sequence(np.zeros((10, 10)), np.zeros((10, 12)))


def test_jaccard_index_is_intersection_over_union():
    a = np.zeros((4, 4), bool)
    b = np.zeros((4, 4), bool)
    a[:2, :] = True  # 8 pixels
    b[1:3, :] = True  # 8 pixels, 4 shared
    assert jaccard_index(a, b) == pytest.approx(4 / 12)
    assert jaccard_index(a, a) == 1.0
    assert jaccard_index(a, ~a) == 0.0


def test_each_instance_keeps_its_top_k_partners_by_jaccard_index():
    base = np.zeros((10, 10), bool)
    masks = {}
    for name, width in [("w3", 3), ("w4", 4), ("w6", 6), ("w10", 10)]:
        m = base.copy()
        m[:, :width] = True
        masks[name] = m  # nested bars: J = narrower / wider
    pairs = select_pairs(masks, k=1)
    got = {tuple(sorted(p)) for p in zip(pairs.source_a, pairs.source_b, strict=True)}
    # best partners: w3 -> w4 (3/4), w4 -> w3, w6 -> w4 (4/6 > 6/10), w10 -> w6 (6/10)
    assert got == {("w3", "w4"), ("w4", "w6"), ("w10", "w6")}
    np.testing.assert_allclose(pairs["jaccard"], [3 / 4, 4 / 6, 6 / 10], rtol=1e-6)
    assert len(select_pairs(masks, k=3)) == 6  # every pair once


def test_otsu_mask_takes_the_side_that_avoids_the_border_and_alpha_wins():
    image = np.full((20, 20), 200, np.uint8)
    image[5:15, 5:15] = 30  # dark object on a light ground
    mask = object_mask(image)
    assert mask[10, 10] and not mask[0, 0] and mask.sum() == 100
    rgba = np.dstack([np.zeros((20, 20, 3), np.uint8), np.where(mask, 255, 0).astype(np.uint8)])
    np.testing.assert_array_equal(object_mask(rgba), mask)


def test_written_sequences_round_trip_through_png_and_the_manifest(tmp_path):
    rng = np.random.default_rng(1)
    images = {"a": rng.random((16, 16)), "b": rng.random((16, 16))}
    pairs = pd.DataFrame({"source_a": ["a"], "source_b": ["b"], "jaccard": [0.5]})
    manifest = write_sequences(pairs, images, None, tmp_path)
    assert list(manifest.columns) == MANIFEST_COLUMNS
    assert (manifest["kind"] == "mlds").all()
    assert manifest["level"].tolist() == list(range(1, 8))
    np.testing.assert_allclose(manifest["phi"], np.arange(7) / 6)
    on_disk = pd.read_csv(tmp_path / "manifest.csv")
    pd.testing.assert_frame_equal(on_disk, manifest, check_dtype=False)
    expected = blend_sequence(images["a"], images["b"])
    for row in manifest.itertuples():
        pixels = np.asarray(Image.open(tmp_path / row.file))
        assert pixels.dtype == np.uint8 and pixels.ndim == 2
        np.testing.assert_allclose(pixels / 255.0, expected[row.level - 1], atol=0.5 / 255 + 1e-9)


def test_build_sequences_reads_files_with_alpha_masks(tmp_path):
    rng = np.random.default_rng(2)
    paths = []
    for i in range(3):
        rgba = np.zeros((40, 50, 4), np.uint8)
        rgba[..., :3] = rng.integers(0, 255, (40, 50, 3))
        rgba[5 + i:30, 10:35 + 3 * i, 3] = 255
        path = tmp_path / f"obj{i}.png"
        Image.fromarray(rgba).save(path)
        paths.append(path)
    manifest = build_sequences(paths, tmp_path / "out", k=1, size=32)
    assert set(manifest["source_a"]) | set(manifest["source_b"]) <= {"obj0", "obj1", "obj2"}
    assert manifest.groupby("sequence").size().eq(7).all()
    assert (manifest["jaccard"] > 0.5).all()
    assert Image.open(tmp_path / "out" / manifest["file"][0]).size == (32, 32)


def test_missing_image_file_is_named_in_the_error(tmp_path):
    with pytest.raises(ValueError, match="nope.png"):
        build_sequences([tmp_path / "nope.png", tmp_path / "other.png"], tmp_path / "out")
