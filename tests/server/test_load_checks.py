"""Load-time checks of specs against manifests: bad MLDS rows and over-asked catch/practice fail `serve`."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from humanlike.server.study.experiments import load_experiment
from humanlike.server.study.spec import SpecError
from tests.server.conftest import write_small_experiment

TRIAD_SPEC = """\
slug = "tri"
title = "Triads"
consent = "consent.md"
instructions = "instructions.md"
manifest = "stimuli/manifest.csv"

[[blocks]]
name = "mlds"
trial_type = "triad"
kinds = ["mlds"]
"""


def write_triad_experiment(dest: Path, rows: list[dict[str, str]]) -> Path:
    """A triad experiment whose manifest has exactly ``rows`` (files are created)."""
    stim = dest / "stimuli"
    stim.mkdir(parents=True)
    for row in rows:
        (stim / row["file"]).write_bytes(b"png")
    with (stim / "manifest.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["file", "kind", "sequence", "level"])
        writer.writeheader()
        writer.writerows(rows)
    (dest / "experiment.toml").write_text(TRIAD_SPEC)
    (dest / "consent.md").write_text("ok")
    (dest / "instructions.md").write_text("ok")
    return dest / "experiment.toml"


def mlds_rows(n: int = 4) -> list[dict[str, str]]:
    return [{"file": f"a_{i}.png", "kind": "mlds", "sequence": "a", "level": str(i)}
            for i in range(1, n + 1)]


def test_an_empty_mlds_level_fails_naming_file_row_and_column(tmp_path):
    rows = mlds_rows()
    rows[2]["level"] = ""
    spec = write_triad_experiment(tmp_path, rows)
    with pytest.raises(SpecError) as err:
        load_experiment(spec)
    message = str(err.value)
    assert "manifest.csv" in message and "row 4" in message and "'level'" in message


@pytest.mark.parametrize(("column", "value"), [("level", "2.5"), ("level", "two"), ("sequence", "")])
def test_mlds_rows_need_an_integer_level_and_a_sequence(tmp_path, column, value):
    rows = mlds_rows()
    rows[0][column] = value
    with pytest.raises(SpecError, match=rf"row 2: column '{column}'"):
        load_experiment(write_triad_experiment(tmp_path, rows))


def test_serve_refuses_the_manifest_with_an_empty_level(tmp_path):
    from humanlike.cli import main

    rows = mlds_rows()
    rows[1]["level"] = ""
    spec = write_triad_experiment(tmp_path, rows)
    result = CliRunner().invoke(main, ["serve", "--experiment", str(spec), "--database-url",
                                       f"sqlite:///{tmp_path / 'db.sqlite'}"])
    assert result.exit_code != 0
    assert "manifest.csv" in result.output and "row 3" in result.output and "'level'" in result.output


def _with_block_settings(spec: Path, **settings: object) -> Path:
    text = spec.read_text()
    for key, value in settings.items():
        text = text.replace("repeats = 2\n", f"repeats = 2\n{key} = {value}\n", 1)
    spec.write_text(text)
    return spec


def test_catch_trials_beyond_the_manifest_are_an_error(tmp_path):
    spec = write_small_experiment(tmp_path)  # 10 catch stimuli
    spec.write_text(spec.read_text().replace("catch_trials = 2", "catch_trials = 11"))
    with pytest.raises(SpecError, match=r"blocks\.0 \(ratings\)\.catch_trials: .*11.*10"):
        load_experiment(spec)


def test_cap_true_allows_asking_for_more_catch_trials_than_the_manifest_holds(tmp_path):
    spec = write_small_experiment(tmp_path)
    spec.write_text(spec.read_text().replace("catch_trials = 2", "catch_trials = 11"))
    _with_block_settings(spec, cap="true")
    assert load_experiment(spec).spec.blocks[0].cap is True


def test_practice_beyond_the_manifest_is_an_error(tmp_path):
    spec = write_small_experiment(tmp_path)  # 10 catch - 2 used = 8 spare for practice
    spec.write_text(spec.read_text().replace("practice = 1", "practice = 9"))
    with pytest.raises(SpecError, match=r"blocks\.0 \(ratings\)\.practice: .*9.*8"):
        load_experiment(spec)


def test_an_mlds_sequence_of_two_levels_fails_at_load_naming_block_and_minimum(tmp_path):
    """Issue 36.1: a spec that would 500 at every arrival fails at load (check, serve) instead."""
    spec = write_triad_experiment(tmp_path, mlds_rows(2))
    with pytest.raises(SpecError) as err:
        load_experiment(spec)
    message = str(err.value)
    assert str(spec) in message and "blocks.0 (mlds)" in message
    assert "at least 3" in message and "got 2" in message


def test_check_names_the_timeline_problem(tmp_path):
    from humanlike.cli import main

    spec = write_triad_experiment(tmp_path, mlds_rows(2))
    result = CliRunner().invoke(main, ["check", str(tmp_path)])
    assert result.exit_code == 1
    assert f"{spec}: blocks.0 (mlds): " in result.output and "at least 3" in result.output


def test_more_repeats_than_trials_fails_at_load_naming_the_field(tmp_path):
    spec = write_triad_experiment(tmp_path, mlds_rows(3))  # one triad
    spec.write_text(spec.read_text() + "repeats = 2\n")
    with pytest.raises(SpecError, match=r"blocks\.0 \(mlds\)\.repeats: .*2 repeats.*1 trial"):
        load_experiment(spec)
