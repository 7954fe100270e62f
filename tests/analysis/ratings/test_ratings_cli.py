"""``humanlike analyze ratings``: tables, figures and summary from an export folder."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from humanlike.analysis.ratings.simulation import simulate_rating_experiment
from humanlike.cli import main


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    sim = simulate_rating_experiment(
        n_participants=7,
        n_natural=6,
        n_per_pair=2,
        n_models=3,
        n_categories=5,
        missing=0.05,
        random_state=50,
    )
    folder = tmp_path_factory.mktemp("export")
    meta = [
        "true_class",
        "targeted_model_1",
        "targeted_model_2",
        "targeted_class_1",
        "targeted_class_2",
    ]
    sim.ratings.drop(columns=meta).to_csv(folder / "ratings.csv", index=False)
    sim.stimuli.to_csv(folder / "stimuli.csv", index=False)
    pd.DataFrame(
        {
            "participant": sorted(sim.ratings["participant"].unique()),
            "duration_s": 900.0,
            "excluded": [True] + [False] * 6,
            "exclusion_reasons": ["timed out"] + [""] * 6,
        }
    ).to_csv(folder / "participants.csv", index=False)
    models = folder.parent / "models.csv"
    sim.models.to_csv(models, index=False)
    return folder, models


def test_cli_writes_tables_figures_and_summary(export, tmp_path):
    folder, models = export
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        [
            "analyze",
            "ratings",
            str(folder),
            "--models",
            str(models),
            "--out",
            str(out),
            "--n-resamples",
            "200",
            "--rule",
            "max_completion_s=3600",
            "--n-jobs",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    for name in ("qc", "scores", "noise_ceiling", "comparisons", "per_participant", "reliability"):
        assert (out / f"{name}.csv").is_file()
    for subset in ("all", "controversial", "natural"):
        assert (out / f"scores_{subset}.png").stat().st_size > 10_000
    assert (out / "repeat_reliability.png").is_file() and (out / "rt_histograms.png").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["participants"] == 7 and summary["excluded"] == 1
    assert summary["analysed_participants"] == 6
    assert summary["rules"]["max_completion_s"] == 3600
    scores = pd.read_csv(out / "scores.csv")
    assert len(scores) == 3 * 2 * 3  # models x metrics x subsets
    assert "noise ceiling r" in result.output


def test_cli_rejects_an_unknown_rule(export, tmp_path):
    folder, models = export
    result = CliRunner().invoke(
        main,
        [
            "analyze",
            "ratings",
            str(folder),
            "--models",
            str(models),
            "--out",
            str(tmp_path),
            "--rule",
            "min_acuracy=0.9",
        ],
    )
    assert result.exit_code != 0
    assert "min_acuracy" in result.output
