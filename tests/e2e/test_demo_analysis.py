"""From participants to scores on the demo: simulated participants answer through the API, the
export feeds `humanlike analyze ratings` and `humanlike analyze mlds` unchanged."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server import create_app, database, experiments
from humanlike.server.export import write_export


def _simulate(app, n_participants: int, responses_path, seed: int = 0) -> None:
    """Participants whose ratings are the CNN's probabilities plus noise, rounded to the 5 levels;
    triads answered by a known MLDS observer; classifications by the CNN with lapses
    (:mod:`humanlike.server.simulate`, through the HTTP API in-process); none fails catch trials."""
    from humanlike.analysis.ratings.scores import load_model_responses
    from humanlike.server.simulate import (
        SimulatedStudy,
        SimulationSettings,
        api_client,
        simulate_participants,
    )

    settings = SimulationSettings(n_participants=n_participants, observer="cnn", noise=0.2,
                                  fail_catch=0, seed=seed)
    study = SimulatedStudy(app.config["EXPERIMENT_PATHS"][0], settings,
                           load_model_responses(responses_path))
    with api_client(app=app) as client:
        truth = simulate_participants(client, study)
    assert all(p["n_trials"] > 0 for p in truth.participants)


def test_the_demo_export_feeds_the_ratings_and_mlds_analyses(demo_spec, tmp_path):
    app = create_app({"SECRET_KEY": "x", "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/d.sqlite",
                      "EXPERIMENT_PATHS": [str(demo_spec)]})
    database.upgrade(app)
    experiments.sync_all(app)
    responses_path = demo_spec.parent / "stimuli" / "model_responses.csv"
    responses = pd.read_csv(responses_path, dtype={"category": str})
    assert set(responses["model"]) == {"cnn", "logreg", "kde", "adv_cnn"}
    _simulate(app, 5, responses_path)
    with app.app_context():
        write_export("demo", tmp_path / "export")
    database.dispose(app)
    runner = CliRunner()
    out = tmp_path / "ratings"
    result = runner.invoke(main, ["analyze", "ratings", str(tmp_path / "export"), "--models",
                                  str(responses_path), "--out", str(out), "--n-resamples", "200"])
    assert result.exit_code == 0, result.output
    scores = pd.read_csv(out / "scores.csv")
    assert {"cnn", "kde"} <= set(scores["model"])
    r = scores[scores["metric"] == "pearson_r"].set_index(["subset", "model"])["estimate"]
    # the simulated participants rate like the CNN, so the CNN must beat the other models, and on
    # controversial images (made to split CNN and KDE) the KDE must fall far behind it
    assert r.loc["all"].idxmax() == "cnn", r
    assert r.loc[("controversial", "cnn")] - r.loc[("controversial", "kde")] > 0.5, r
    result = runner.invoke(main, ["analyze", "mlds", str(tmp_path / "export" / "triads.csv"),
                                  "--out", str(tmp_path / "mlds")])
    assert result.exit_code == 0, result.output
    fits = pd.read_csv(tmp_path / "mlds" / "fits_by_sequence.csv")
    assert len(fits) == 3  # the demo's three MLDS sequences
    assert json.loads((tmp_path / "export" / "codebook.json").read_text())["triads"]
    result = runner.invoke(main, ["analyze", "ec", str(tmp_path / "export"), "--out",
                                  str(tmp_path / "ec"), "--n-boot", "100", "--n-sim", "100",
                                  "--no-figures"])
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(tmp_path / "ec" / "summary.csv")
    assert set(summary["condition"]) >= {"noise15", "noise45"}  # the stimuli's noise levels
    assert summary[["ci_low", "ci_high"]].notna().all().all()
    assert pd.read_csv(tmp_path / "ec" / "matrix_demo.csv", index_col=0).shape == (5, 5)
    # the rating trials' decisions give a second, human-human kappa matrix (experiment
    # demo-ratings); with --models each model's decisions join it as observers
    assert pd.read_csv(tmp_path / "ec" / "matrix_demo-ratings.csv", index_col=0).shape == (5, 5)
    result = runner.invoke(main, ["analyze", "ec", str(tmp_path / "export"), "--models",
                                  str(responses_path), "--out", str(tmp_path / "ec_models"),
                                  "--n-resamples", "100", "--n-sim", "100", "--no-figures"])
    assert result.exit_code == 0, result.output
    matrix = pd.read_csv(tmp_path / "ec_models" / "matrix_demo-ratings.csv", index_col=0)
    assert matrix.shape == (9, 9) and {"cnn", "kde", "logreg", "adv_cnn"} <= set(matrix.index)
    pairs = pd.read_csv(tmp_path / "ec_models" / "pairs.csv")
    ratings_pairs = pairs[pairs["experiment"] == "demo-ratings"]
    assert ratings_pairs[["ci_low", "ci_high"]].notna().all().all()
    # closed form: an observer that is right on every image agrees with a person exactly on the
    # trials the person got right, so c_obs = the person's accuracy = c_exp and kappa = 0; a
    # person who was right on every image too (it happens with 5 simulated people) has c_obs = 1,
    # where model-vs-human's convention (the default --degenerate mvh) sets kappa = 1
    decisions = pd.read_csv(tmp_path / "export" / "decisions.csv", dtype={"category": str,
                                                                          "response": str})
    scored = decisions[(decisions["stimulus_kind"] == "natural") & ~decisions["practice"]
                       & ~decisions["is_repeat"]]
    accuracy = scored.groupby("participant")["correct"].mean()
    truth = scored.drop_duplicates("stimulus").set_index("stimulus")["category"]
    top = responses.loc[responses.groupby(["model", "stimulus"])["probability"].idxmax()]
    top = top[top["stimulus"].isin(truth.index)]
    model_right = (top.set_index("stimulus")["category"] == truth.reindex(top["stimulus"]).values)
    perfect = {m for m, ok in model_right.groupby(top["model"].values).all().items() if ok}
    assert "cnn" in perfect
    for model in perfect:
        rows = ratings_pairs[ratings_pairs["observer_b"] == model].set_index("observer_a")
        people = rows.index.intersection(accuracy.index)
        assert len(people) == 5
        assert np.allclose(rows.loc[people, "c_obs"], accuracy[people])
        expected = np.where(accuracy[people] == 1.0, 1.0, 0.0)
        assert np.allclose(rows.loc[people, "kappa"], expected, atol=1e-9)
