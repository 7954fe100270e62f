"""``humanlike stimuli mlds``: sequences and a manifest from image files and folders."""

from __future__ import annotations

import numpy as np
import pandas as pd
from click.testing import CliRunner
from PIL import Image

from humanlike.cli import main


def test_cli_makes_sequences_from_a_folder_with_mask_files(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "objects"
    folder.mkdir()
    for i in range(3):
        pixels = rng.integers(0, 255, (48, 48, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"o{i}.png")
        mask = np.zeros((48, 48), np.uint8)
        mask[10:40, 5 + 5 * i:30 + 5 * i] = 255
        Image.fromarray(mask).save(folder / f"o{i}_mask.png")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["stimuli", "mlds", str(folder), "--out", str(out),
                                       "--size", "32", "--levels", "5"])
    assert result.exit_code == 0, result.output
    manifest = pd.read_csv(out / "manifest.csv")
    assert set(manifest["source_a"]) | set(manifest["source_b"]) <= {"o0", "o1", "o2"}
    assert manifest.groupby("sequence")["level"].max().eq(5).all()
    # nearest masks are shifted by 5 px: J = 20 / 30
    np.testing.assert_allclose(manifest["jaccard"].max(), 20 / 30, rtol=0.05)
    assert all((out / f).is_file() for f in manifest["file"])


def test_cli_needs_two_images(tmp_path):
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "one.png")
    result = CliRunner().invoke(main, ["stimuli", "mlds", str(tmp_path / "one.png"), "--out",
                                       str(tmp_path / "o")])
    assert result.exit_code != 0 and "two images" in result.output
