"""``humanlike analyze ec``: reads model-vs-human data and our export, writes CSVs and figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.cli import main

EDGE = shared_data_dir() / "model-vs-human" / "raw-data" / "edge"


def test_model_vs_human_folder_gives_the_brain_score_ceiling_and_all_outputs(tmp_path: Path):
    out = tmp_path / "ec"
    res = CliRunner().invoke(
        main, ["analyze", "ec", str(EDGE), "--out", str(out), "--n-boot", "300", "--n-sim", "300"]
    )
    assert res.exit_code == 0, res.output
    summary = pd.read_csv(out / "summary.csv", keep_default_na=False)
    ceiling = summary.query("level == 'experiment' and statistic == 'human-human'")
    assert round(float(ceiling["kappa"].iloc[0]), 5) == 0.31844
    assert ceiling["ci_low"].iloc[0] < 0.31844 < ceiling["ci_high"].iloc[0]
    pairs = pd.read_csv(out / "pairs.csv")
    assert len(pairs) == 78
    assert {"p_independence", "p_holm_sidak", "significant", "ci_low"} <= set(pairs.columns)
    assert (pairs["p_holm_sidak"] >= pairs["p_independence"]).all()
    assert len(pd.read_csv(out / "model_comparisons.csv")) == 3
    matrix = pd.read_csv(out / "matrix_edge.csv", index_col=0)
    assert matrix.shape == (13, 13)
    for name in ("matrix_edge.png", "scatter_edge.png", "ec_per_model_edge.png"):
        assert (out / name).stat().st_size > 1000
    assert "human-human kappa = 0.31844" in res.output


def _export(folder: Path) -> None:
    """A small classification export: 4 participants, one excluded, plus practice/repeat/catch."""
    rng = np.random.default_rng(0)
    rows = []
    for p in ["p01", "p02", "p03", "p04"]:
        for i in range(40):
            rows.append(
                {
                    "experiment": "digits",
                    "participant": p,
                    "condition": "A",
                    "trial_index": i,
                    "practice": False,
                    "stimulus": f"natural/d{i:02d}.png",
                    "stimulus_kind": "natural",
                    "is_repeat": False,
                    "correct": bool(rng.random() < 0.7),
                }
            )
        rows.append({**rows[-1], "trial_index": 40, "is_repeat": True})  # repeat of d39
        rows.append(
            {
                **rows[-1],
                "trial_index": 41,
                "is_repeat": False,
                "practice": True,
                "stimulus": "practice/x.png",
            }
        )
        rows.append(
            {
                **rows[-1],
                "trial_index": 42,
                "practice": False,
                "stimulus": "catch/c.png",
                "stimulus_kind": "catch",
            }
        )
    pd.DataFrame(rows).to_csv(folder / "classifications.csv", index=False)
    pd.DataFrame(
        {"participant": ["p01", "p02", "p03", "p04"], "excluded": [False, False, False, True]}
    ).to_csv(folder / "participants.csv", index=False)


def test_export_folder_drops_repeats_practice_catch_and_excluded_participants(tmp_path: Path):
    _export(tmp_path)
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main,
        ["analyze", "ec", str(tmp_path), "--out", str(out), "--n-boot", "200", "--n-sim", "200"],
    )
    assert res.exit_code == 0, res.output
    pairs = pd.read_csv(out / "pairs.csv")
    assert set(pairs["observer_a"]) | set(pairs["observer_b"]) == {"p01", "p02", "p03"}
    assert (pairs["n"] == 40).all()
    assert "dropped 1 excluded participants" in res.output
    assert not (out / "model_comparisons.csv").exists()
    assert (out / "matrix_digits.png").exists()


def test_include_excluded_keeps_flagged_participants(tmp_path: Path):
    _export(tmp_path)
    res = CliRunner().invoke(
        main,
        [
            "analyze",
            "ec",
            str(tmp_path / "classifications.csv"),
            "--out",
            str(tmp_path / "o"),
            "--n-boot",
            "50",
            "--n-sim",
            "50",
            "--include-excluded",
            "--no-figures",
        ],
    )
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(tmp_path / "o" / "pairs.csv")) == 6
    assert not list((tmp_path / "o").glob("*.png"))


def test_a_csv_that_is_neither_layout_fails_with_a_clear_message(tmp_path: Path):
    bad = tmp_path / "trials.csv"
    pd.DataFrame({"who": ["a"], "what": [1]}).to_csv(bad, index=False)
    res = CliRunner().invoke(main, ["analyze", "ec", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code != 0
    assert "participant" in res.output


@pytest.mark.parametrize("flag", ["--degenerate=strict", "--unbiased"])
def test_kappa_options_reach_the_analysis(tmp_path: Path, flag):
    out = tmp_path / "o"
    res = CliRunner().invoke(
        main,
        [
            "analyze",
            "ec",
            str(EDGE),
            "--out",
            str(out),
            "--n-boot",
            "20",
            "--n-sim",
            "20",
            "--no-figures",
            flag,
        ],
    )
    assert res.exit_code == 0, res.output
    ceiling = (
        pd.read_csv(out / "summary.csv")
        .query("level == 'experiment' and statistic == 'human-human'")["kappa"]
        .iloc[0]
    )
    if flag == "--unbiased":
        assert ceiling > 0.31844  # n k / ((n - 1) + k) > k for 0 < k < 1
    else:
        assert round(ceiling, 5) == 0.31844  # no degenerate pairs in edge
