"""From participants to scores on the demo: simulated participants answer through the API, the
export feeds `humanlike analyze ratings` and `humanlike analyze mlds` unchanged."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server import create_app, database, experiments
from humanlike.server.export import write_export


def _simulate(app, n_participants: int, responses: pd.DataFrame, rng) -> None:
    """Participants whose ratings are the CNN's probabilities plus noise, rounded to the 5 levels;
    triads answered by psi = level / 7 with noise."""
    p_cnn = responses[responses["model"] == "cnn"].pivot(
        index="stimulus", columns="category", values="probability")
    p_cnn.columns = p_cnn.columns.astype(str)
    for i in range(n_participants):
        client = app.test_client()
        start = client.get(f"/start/demo?PROLIFIC_PID=sim{i}&STUDY_ID=s&SESSION_ID=x")
        pid = start.headers["Location"].split("#")[0].rstrip("/").split("/")[-1]
        token = re.search(r'"token": ?"([^"]+)"', client.get(f"/task/{pid}").get_data(as_text=True)).group(1)
        auth = {"Authorization": f"Bearer {token}"}
        api = f"/api/v1/participants/{pid}"
        client.post(api + "/consent", json={"agree": True}, headers=auth)
        timeline = client.get(api + "/timeline", headers=auth).get_json()
        for t in timeline["trials"]:
            if t["type"] == "rating":
                p = p_cnn.loc[t["stimulus"]] + rng.normal(0, 0.2, 10)
                levels = np.clip(np.round(p.to_numpy() * 4), 0, 4) / 4
                response = {"ratings": dict(zip(p.index, levels.tolist()))}
            elif t["type"] == "triad":
                d = abs(t["s1"] - t["s2"]) - abs(t["s3"] - t["s2"]) + rng.normal(0, 1.0)
                chose_s1 = d < 0
                response = {"choice": "left" if chose_s1 != t["swapped"] else "right"}
            elif t["type"] == "classification":  # the CNN's most probable digit, with noise
                p = p_cnn.loc[t["stimulus"]] + rng.normal(0, 0.2, 10)
                response = {"choice": str(p.idxmax())}
            else:
                response = {"answers": {"strategy": "simulated"}}
            body = {"trial_index": t["index"], "trial_type": t["type"], "response": response,
                    "rt_ms": float(rng.uniform(500, 2500)), "presented_ms": 800.0, "frames": 48}
            assert client.post(api + "/trials", json=body, headers=auth).status_code == 201
        assert client.post(api + "/complete", headers=auth).status_code == 200


def test_the_demo_export_feeds_the_ratings_and_mlds_analyses(demo_spec, tmp_path):
    app = create_app({"SECRET_KEY": "x", "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/d.sqlite",
                      "EXPERIMENT_PATHS": [str(demo_spec)]})
    database.upgrade(app)
    experiments.sync_all(app)
    responses_path = demo_spec.parent / "stimuli" / "model_responses.csv"
    responses = pd.read_csv(responses_path, dtype={"category": str})
    assert set(responses["model"]) == {"cnn", "logreg", "kde", "adv_cnn"}
    _simulate(app, 5, responses, np.random.default_rng(0))
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
    assert len(fits) == 2
    assert json.loads((tmp_path / "export" / "codebook.json").read_text())["triads"]
    result = runner.invoke(main, ["analyze", "ec", str(tmp_path / "export"), "--out",
                                  str(tmp_path / "ec"), "--n-boot", "100", "--n-sim", "100",
                                  "--no-figures"])
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(tmp_path / "ec" / "summary.csv")
    assert set(summary["condition"]) >= {"noise15", "noise45"}  # the stimuli's noise levels
    assert summary[["ci_low", "ci_high"]].notna().all().all()
    assert pd.read_csv(tmp_path / "ec" / "matrix_demo.csv", index_col=0).shape == (5, 5)
