"""`humanlike check PATH`: every spec and manifest problem at once, "did you mean" for a misspelt
field, nothing started and nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from humanlike.cli import main


def _copy(small_experiment: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "exp"
    shutil.copytree(small_experiment.parent, folder)
    return folder


def test_a_valid_folder_is_summarised(small_experiment, tmp_path):
    folder = _copy(small_experiment, tmp_path)
    before = sorted(p.name for p in folder.rglob("*"))
    result = CliRunner().invoke(main, ["check", str(folder)])
    assert result.exit_code == 0, result.output
    assert "experiment 'small' is valid: 1 block(s) [ratings (rating)]" in result.output
    assert sorted(p.name for p in folder.rglob("*")) == before  # nothing written


def test_spec_and_manifest_problems_come_together_with_did_you_mean(small_experiment, tmp_path):
    folder = _copy(small_experiment, tmp_path)
    spec = folder / "experiment.toml"
    text = spec.read_text().replace("min_catch_accuracy", "min_catch_acuracy")
    spec.write_text(text.replace('title = "Small rating test"', 'titel = "Small"'))
    manifest = folder / "stimuli" / "manifest.csv"
    manifest.write_text(manifest.read_text().replace("file,", "fil,", 1))
    result = CliRunner().invoke(main, ["check", str(spec)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert f"{spec}: exclusion.min_catch_acuracy: Extra inputs are not permitted (did you mean " \
           "'min_catch_accuracy'?)" in lines
    assert any(line.startswith(f"{spec}: titel:") and "did you mean 'title'?" in line
               for line in lines)
    assert any(line.startswith(f"{manifest}: missing column 'file'") for line in lines)
    assert any(line.startswith(f"{spec}: title: Field required") for line in lines)


def test_a_missing_spec_is_named(tmp_path):
    result = CliRunner().invoke(main, ["check", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip() == f"{tmp_path / 'experiment.toml'}: experiment spec not found"
