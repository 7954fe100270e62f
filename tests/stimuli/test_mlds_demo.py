"""Demo MLDS stimuli from scikit-image's bundled images: fast, deterministic, well formed."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest
from PIL import Image

from humanlike.stimuli.mlds import MANIFEST_COLUMNS
from humanlike.stimuli.mlds_demo import build_demo_mlds


def digest(folder, files):
    return [hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in files]


def test_demo_builds_two_seven_level_sequences_quickly_and_identically(tmp_path):
    start = time.perf_counter()
    manifest = build_demo_mlds(tmp_path / "a")
    elapsed = time.perf_counter() - start
    again = build_demo_mlds(tmp_path / "b")
    assert elapsed < 5.0
    assert list(manifest.columns) == MANIFEST_COLUMNS
    assert manifest["sequence"].nunique() == 2
    assert manifest.groupby("sequence")["level"].apply(list).map(lambda x: x == list(range(1, 8))
                                                                 ).all()
    assert (manifest["kind"] == "mlds").all()
    assert manifest.equals(again)
    assert digest(tmp_path / "a", manifest["file"]) == digest(tmp_path / "b", again["file"])
    assert not (tmp_path / "a" / "manifest.csv").exists()


def test_demo_files_are_relative_paths_to_grey_pngs_that_blend_between_two_sources(tmp_path):
    manifest = build_demo_mlds(tmp_path, n_sequences=3)
    assert manifest["sequence"].nunique() == 3
    for _seq, rows in manifest.groupby("sequence"):
        assert not any(f.startswith("/") for f in rows["file"])
        frames = np.stack([np.asarray(Image.open(tmp_path / f), float) for f in rows["file"]])
        assert frames.shape[1:] == (128, 128)
        # the middle level is the average of the two ends (up to 8-bit rounding)
        np.testing.assert_allclose(frames[3], (frames[0] + frames[6]) / 2, atol=1.01)
        assert rows["source_a"].nunique() == 1 and rows["source_a"].iloc[0] != rows[
            "source_b"].iloc[0]
        assert 0 < rows["jaccard"].iloc[0] <= 1


def test_demo_refuses_more_sequences_than_pairs(tmp_path):
    with pytest.raises(ValueError, match="n_sequences"):
        build_demo_mlds(tmp_path, n_sequences=50)
